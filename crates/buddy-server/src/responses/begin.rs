//! A `POST /v1/responses` body, typed, and the turn it starts: its conversation (a
//! stored one named by `conversation` or `previous_response_id`, a `store: false` one the
//! WebSocket keeps, or a new one), its input, tools, policy and settings.

use axum::http::HeaderMap;
use buddy_core::{Message, Sampling};
use buddy_engine::PolicyPatch;
use buddy_store::ResponseOrigin;
use serde::Deserialize;
use serde_json::Value;

use super::builder::{Builder, Echo};
use super::ids::{conversation_of, response_id, turn_of};
use super::input::input_messages;
use crate::error::AppError;
use crate::request::request_policy;
use crate::settings::SkillCalls;
use crate::turn::{
    Conversation, Family, ModelAsk, StartedTurn, ToolAsk, TurnSpec, Turns, client_conversation,
};
use buddy_openai_wire::client_tools::client_tools;

/// The body of `POST /v1/responses` (fields buddy does not use are accepted and ignored).
#[derive(Deserialize)]
pub(crate) struct ResponsesRequest {
    pub model: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    pub instructions: Option<String>,
    #[serde(default)]
    tools: Vec<Value>,
    pub previous_response_id: Option<String>,
    #[serde(default)]
    pub stream: bool,
    /// Run the response on its own: the request returns at once (or streams), and the
    /// response is read later with `GET /v1/responses/{id}`.
    #[serde(default)]
    pub background: bool,
    max_tool_calls: Option<u64>,
    pub store: Option<bool>,
    tool_choice: Option<Value>,
    prompt_cache_key: Option<String>,
    safety_identifier: Option<String>,
    metadata: Option<Value>,
    /// buddy's own extension: policy overrides for this request.
    buddy_policy: Option<Value>,
    /// buddy's own extension: how server-side skill calls appear in `output`.
    buddy_skill_calls: Option<SkillCalls>,
    /// A conversation (OpenAI's Conversations API) this response continues: its id, or
    /// `{"id": …}`.
    conversation: Option<Value>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_output_tokens: Option<u32>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", …}}`.
    text: Option<Value>,
}

impl ResponsesRequest {
    /// The sampling and output settings the request asks for, or what is wrong with them.
    fn sampling(&self) -> Result<Sampling, String> {
        let response_format = match self.text.as_ref().and_then(|t| t.get("format")) {
            None | Some(Value::Null) => None,
            Some(format) => Some(
                buddy_openai_wire::response_format(format.clone())
                    .map_err(|e| format!("`text.format`: {e}"))?,
            ),
        };
        Ok(Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            max_output_tokens: self.max_output_tokens,
            response_format,
            ..Sampling::default()
        })
    }
}

/// A response whose conversation the caller holds itself (`store: false` over a
/// WebSocket): its id and the whole conversation after it.
pub(crate) struct Unstored {
    pub id: String,
    pub history: Vec<Message>,
}

/// Starts the turn a request asks for; `unstored` is the conversation of a `store: false`
/// response its `previous_response_id` names (the WebSocket mode keeps the last one). A
/// `store: false` turn hands its whole conversation back when it ends. `headers` (an HTTP
/// request's) may name the client's session: its `store: false` turns are kept as the
/// session's conversation (`[server] keep_client_sessions`), their responses still not
/// retrievable by id.
pub(crate) async fn begin(
    turns: &Turns,
    body: ResponsesRequest,
    unstored: Option<Unstored>,
    headers: Option<&HeaderMap>,
) -> Result<(StartedTurn, Builder), AppError> {
    let state = &turns.state;
    let owner = &turns.caller.owner;
    let sampling = body.sampling().map_err(AppError::BadRequest)?;
    let skill_calls = body
        .buddy_skill_calls
        .unwrap_or(state.inner.settings.responses_skill_calls);
    let input = input_messages(&state.inner.items, owner, body.input.unwrap_or(Value::Null))
        .map_err(AppError::BadRequest)?;
    let client = client_tools(body.tools).map_err(AppError::BadRequest)?;
    let tools = client.offered.clone();
    let echo = Echo {
        sampling: sampling.clone(),
        tools: tools.clone(),
        client,
        tool_choice: body.tool_choice,
        max_tool_calls: body.max_tool_calls,
        prompt_cache_key: body.prompt_cache_key.clone(),
        safety_identifier: body.safety_identifier,
        metadata: body.metadata,
    };
    let tools = tools.into_iter().map(Into::into).collect();
    let policy = policy(body.buddy_policy, body.max_tool_calls)?;
    let conversation = continued_conversation(
        body.conversation.as_ref(),
        body.previous_response_id.as_deref(),
        unstored.is_some(),
    )?;
    let continued = !matches!(conversation, Continued::Nothing) || unstored.is_some();
    if !continued && !input.iter().any(Message::is_user) {
        return Err(AppError::BadRequest(
            "`input` has no user message; send the user's text (or continue with previous_response_id)".into(),
        ));
    }
    let named = match &conversation {
        Continued::Named(id) => Some(id.clone()),
        _ => None,
    };
    let (conversation, append) = placed(conversation, unstored, body.store, input);
    let conversation = match (conversation, headers) {
        (Conversation::Ephemeral(history), Some(headers)) => {
            client_conversation(state, headers, None, history)
        }
        (conversation, _) => conversation,
    };
    let turn = turns
        .start(TurnSpec {
            append,
            instructions: body.instructions.clone(),
            family: Family::OpenAi,
            keep_messages: body.store == Some(false),
            sampling,
            cache_key: body.prompt_cache_key,
            tools: ToolAsk {
                client: tools,
                ..ToolAsk::default()
            },
            ..TurnSpec::new(conversation, ModelAsk::model(body.model), policy)
        })
        .await?;
    let origin = ResponseOrigin {
        previous_response_id: body.previous_response_id.clone(),
        background: body.background,
    };
    note_origin(state, &turn, &origin).await;
    // A `store: false` response is never read back by id, kept in a session or not.
    let stored = turn
        .conversation_id
        .as_deref()
        .filter(|_| body.store != Some(false));
    let id = response_id(stored, &turn.turn_id);
    let mut builder = Builder::new(
        std::sync::Arc::clone(&state.inner.items),
        id,
        owner.clone(),
        turn.model.clone(),
        body.instructions,
        body.previous_response_id,
    );
    builder.echo = echo;
    builder.skill_calls = skill_calls;
    builder.conversation = named;
    builder.background = origin.background;
    Ok((turn, builder))
}

/// Keeps what the request said of a stored turn (the response it continues, whether it
/// runs in the background), so that the response reads back as it was made. A store
/// that fails here costs only that: the turn runs, and the failure is logged.
async fn note_origin(state: &crate::state::AppState, turn: &StartedTurn, origin: &ResponseOrigin) {
    let stored = turn.conversation_id.is_some();
    if !stored || *origin == ResponseOrigin::default() {
        return;
    }
    let noted = state
        .inner
        .store
        .set_response_origin(&turn.turn_id, origin)
        .await;
    if let Err(e) = noted {
        tracing::warn!(turn = %turn.turn_id, error = %e, "could not keep the response's origin");
    }
}

/// The request's policy, with `max_tool_calls` lowering the turn's tool-call limit.
fn policy(asked: Option<Value>, max_tool_calls: Option<u64>) -> Result<PolicyPatch, AppError> {
    let mut policy = request_policy(asked)?;
    if let Some(max) = max_tool_calls {
        policy
            .set_max_tool_calls(max)
            .map_err(|e| AppError::BadRequest(format!("max_tool_calls: {e}")))?;
    }
    Ok(policy)
}

/// What stored conversation a request goes on with.
enum Continued {
    /// None: a new one (or the WebSocket's own).
    Nothing,
    /// The conversation named by `conversation` (the Conversations API): appended to.
    Named(String),
    /// The stored response `previous_response_id` names (`named`): its own chain of
    /// ancestors.
    After {
        conversation: String,
        turn: String,
        named: String,
    },
}

/// The stored conversation a request continues (named by `conversation`, or found from
/// `previous_response_id` unless the WebSocket holds that response). The turn service
/// reads it (and its last model) when the turn starts.
fn continued_conversation(
    conversation: Option<&Value>,
    previous: Option<&str>,
    unstored: bool,
) -> Result<Continued, AppError> {
    let named = match conversation {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(other) => Some(other["id"].as_str().map(str::to_owned).ok_or_else(|| {
            AppError::BadRequest("`conversation` must be a conversation id or {\"id\": …}".into())
        })?),
    };
    if named.is_some() && previous.is_some() {
        return Err(AppError::BadRequest(
            "give `conversation` or `previous_response_id`, not both".into(),
        ));
    }
    match (named, previous) {
        (Some(id), _) => Ok(Continued::Named(id)),
        (None, None) => Ok(Continued::Nothing),
        (None, Some(_)) if unstored => Ok(Continued::Nothing),
        (None, Some(previous)) => {
            let not_stored = || {
                AppError::NotFound(format!(
                    "response `{previous}` does not exist or was not stored (store: false); send the whole input instead"
                ))
            };
            Ok(Continued::After {
                conversation: conversation_of(previous).ok_or_else(not_stored)?,
                turn: turn_of(previous).ok_or_else(not_stored)?,
                named: previous.to_owned(),
            })
        }
    }
}

/// Where the turn's conversation is and what its input adds to it: a stored one takes
/// the input as appended messages; a held one (the WebSocket's, or `store: false`) is
/// the whole history.
fn placed(
    stored: Continued,
    unstored: Option<Unstored>,
    store: Option<bool>,
    input: Vec<Message>,
) -> (Conversation, Vec<Message>) {
    match (stored, unstored, store) {
        (Continued::Named(id), _, _) => (Conversation::Stored(Some(id)), input),
        (
            Continued::After {
                conversation,
                turn,
                named,
            },
            _,
            _,
        ) => {
            let after = Conversation::After {
                conversation,
                after: turn,
                named,
            };
            (after, input)
        }
        (Continued::Nothing, Some(unstored), _) => {
            let mut history = unstored.history;
            history.extend(input);
            (Conversation::Ephemeral(history), Vec::new())
        }
        (Continued::Nothing, None, Some(false)) => (Conversation::Ephemeral(input), Vec::new()),
        (Continued::Nothing, None, _) => (Conversation::Stored(None), input),
    }
}
