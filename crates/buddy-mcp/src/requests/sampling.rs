//! Sampling: a server's `sampling/createMessage` answered by the model buddy runs its
//! turns with — only for an `[[mcp]]` entry with `sampling = true` (off by default: a
//! server would spend the operator's tokens), and counted per server and, during a
//! turn, in the turn's budget (model calls, tokens, money), which refuses it when spent.

// Sampling is deprecated by SEP-2577 (2026-07-28) yet still asked for, by older servers
// and through `inputRequests`: buddy answers it when the operator allows it.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use buddy_core::{CallBudget, CompletionRequest, Message, Provider};
use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, Role, SamplingContent, SamplingMessage,
    SamplingMessageContentBlock,
};

/// The model that answers a server's sampling requests: the provider and model of the
/// session's turns.
#[derive(Clone)]
pub struct Sampler {
    pub provider: Arc<dyn Provider>,
    pub model: String,
}

/// What sampling has cost, per server.
#[derive(Default)]
pub(crate) struct SamplingCount {
    pub requests: AtomicU64,
    pub input_tokens: AtomicU64,
    pub output_tokens: AtomicU64,
}

/// Sampling requests a server made and the tokens they took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SamplingUse {
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl SamplingCount {
    pub(crate) fn snapshot(&self) -> SamplingUse {
        SamplingUse {
            requests: self.requests.load(Ordering::SeqCst),
            input_tokens: self.input_tokens.load(Ordering::SeqCst),
            output_tokens: self.output_tokens.load(Ordering::SeqCst),
        }
    }
}

/// The text of a sampling message; images, audio and tool blocks are named, not sent.
fn message_text(content: &SamplingContent<SamplingMessageContentBlock>) -> String {
    let value = serde_json::to_value(content).unwrap_or(serde_json::Value::Null);
    let blocks = match value {
        serde_json::Value::Array(blocks) => blocks,
        one => vec![one],
    };
    blocks
        .iter()
        .map(crate::requests::content::block_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the server reads when buddy will not spend the turn's budget: MCP's code for a
/// sampling request the client rejected.
fn refused(message: String) -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode(-1), message, None)
}

/// Answers `params` with `sampler`'s model and counts it in `count` and, when the call
/// runs in a turn, in the turn's `budget` (drawn first: refused when it is spent).
pub(crate) async fn answer(
    server: &str,
    sampler: &Sampler,
    count: &SamplingCount,
    params: CreateMessageRequestParams,
    budget: Option<&dyn CallBudget>,
) -> Result<CreateMessageResult, ErrorData> {
    if let Some(budget) = budget {
        budget.draw(server).await.map_err(|why| {
            tracing::info!(server, %why, "MCP sampling request refused");
            refused(why)
        })?;
    }
    let mut messages = Vec::new();
    if let Some(system) = params.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        messages.push(Message::system(system));
    }
    for message in &params.messages {
        let text = message_text(&message.content);
        messages.push(match message.role {
            Role::User => Message::user(text),
            Role::Assistant => Message::assistant(text),
        });
    }
    let mut request = CompletionRequest::new(&sampler.model, &messages);
    request.max_output_tokens = Some(params.max_tokens);
    count.requests.fetch_add(1, Ordering::SeqCst);
    let reply = sampler.provider.complete(request).await;
    if let Some(budget) = budget {
        // Drawn and made: counted, whatever came back.
        let usage = reply.as_ref().ok().and_then(|r| r.usage);
        budget.book(server, &sampler.model, usage).await;
    }
    let reply = reply.map_err(|e| {
        tracing::warn!(server, error = %e, "MCP sampling request failed");
        ErrorData::internal_error(format!("buddy's model failed: {e}"), None)
    })?;
    if let Some(usage) = reply.usage {
        count
            .input_tokens
            .fetch_add(usage.input_tokens, Ordering::SeqCst);
        count
            .output_tokens
            .fetch_add(usage.output_tokens, Ordering::SeqCst);
    }
    tracing::info!(server, model = %sampler.model, "answered an MCP sampling request");
    let model = reply
        .response
        .as_ref()
        .and_then(|r| r.model.clone())
        .unwrap_or_else(|| sampler.model.clone());
    let message = SamplingMessage::new(
        Role::Assistant,
        SamplingMessageContentBlock::text(reply.text),
    );
    Ok(CreateMessageResult::new(message, model)
        .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN))
}
