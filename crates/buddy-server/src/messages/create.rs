//! `POST /v1/messages`.

use axum::Json;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use buddy_anthropic_wire::{MessagesRequest, ToHistory, ToolChoice, client_tools, to_messages};
use buddy_core::{ChatEvent, Message, Sampling, StopReason, TurnStats};

use std::sync::Arc;

use super::encoder::{MessageEvents, without_turn};
use super::passthrough::Passthrough;
use super::reply::{STOP_REASON_HEADER, WARNING_HEADER, message, with_header};
use super::thinking::Thinking;
use super::tool_choice::{ClientChoice, unknown_tool};
use crate::error::AppError;
use crate::request::{JsonAndBytes, request_policy};
use crate::spend::AT_CEILING_ANSWER;
use crate::sse;
use crate::turn::{
    Family, ModelAsk, ProviderWrap, StartedTurn, ToolAsk, TurnSpec, Turns, client_conversation,
    frames, until_end, with_turn_header,
};

/// `POST /v1/messages`: one turn over the request's whole history.
pub(crate) async fn messages(
    turns: Turns,
    headers: HeaderMap,
    JsonAndBytes(mut body, raw): JsonAndBytes<MessagesRequest>,
) -> Result<Response, AppError> {
    let sampling = sampling(&body)?;
    let history =
        to_messages(body.system.as_ref(), &body.messages).map_err(AppError::BadRequest)?;
    if !history.messages.iter().any(Message::is_user) {
        return Err(AppError::BadRequest(
            "`messages` has no user message".into(),
        ));
    }
    let (declared, left_out) = client_tools(&body.tools);
    if let Some(why) = unknown_tool(body.tool_choice.as_ref(), &declared) {
        return Err(AppError::BadRequest(why));
    }
    let offered = match body.tool_choice {
        Some(ToolChoice::None) => Vec::new(),
        _ => declared,
    };
    let warnings = warnings(&body, &history, &left_out);
    // A body with buddy's own extension is buddy's to read, never an upstream's.
    let passes = body.buddy_policy.is_none();
    let policy = request_policy(body.buddy_policy.take())?;
    let names = offered.iter().map(|t| t.name.clone()).collect();
    let thinking = Arc::new(Thinking::default());
    let wrap_provider: ProviderWrap = {
        let choice = body.tool_choice.clone();
        let (raw, stream, messages) = (raw.to_vec(), body.stream, history.messages.clone());
        let (passed, thinking) = (passed_headers(&headers), Arc::clone(&thinking));
        Box::new(move |upstream| {
            let mut provider = upstream;
            let asked = ClientChoice::new(Arc::clone(&provider), choice.as_ref());
            if asked.asks() {
                provider = Arc::new(asked);
            }
            if passes {
                let through =
                    Passthrough::new(provider, raw, stream, messages, names, passed, thinking);
                provider = Arc::new(through);
            }
            provider
        })
    };
    let asked = ModelAsk::model(Some(body.model.clone()));
    let user_id = body.metadata.as_ref().and_then(|m| m["user_id"].as_str());
    let conversation = client_conversation(&turns.state, &headers, user_id, history.messages);
    let started = turns
        .start(TurnSpec {
            family: Family::OpenAi,
            sampling,
            tools: ToolAsk {
                client: offered,
                ..ToolAsk::default()
            },
            wrap_provider: Some(wrap_provider),
            ..TurnSpec::new(conversation, asked, policy)
        })
        .await;
    let turn = match started {
        Ok(turn) => turn,
        // A key at its money ceiling: an answer that ends the session, not an error a
        // client retries.
        Err(AppError::AtCeiling(why)) => {
            return Ok(at_ceiling(body.stream, body.model, &why));
        }
        Err(e) => return Err(e),
    };
    let id = format!("msg_{}", turn.turn_id.trim_start_matches("turn_"));
    let turn_id = turn.turn_id.clone();
    let response = match body.stream {
        true => {
            let encoder = MessageEvents::new(id, body.model).with_thinking(thinking);
            let guard = turns.disconnect_guard(turn.cancel);
            sse::respond(frames(turn.events, encoder, guard))
        }
        false => whole(turn, id, body.model, &thinking).await?,
    };
    let response = with_turn_header(response, &turn_id);
    Ok(match warnings.is_empty() {
        true => response,
        false => with_header(response, WARNING_HEADER, &warnings.join("; ")),
    })
}

/// The client's headers an Anthropic upstream gets with its passed-through body: its
/// `anthropic-beta` features (Claude Code's `claude-code-20250219`, `context-management-…`),
/// which its body's fields may need.
fn passed_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| ("anthropic-beta".to_owned(), v.to_owned()))
        .collect()
}

/// What a key at its spend ceiling is answered: an ordinary message saying so, ended
/// `end_turn`, its stop reason `cost_budget` in the header.
fn at_ceiling(stream: bool, model: String, why: &str) -> Response {
    let id = buddy_store::new_id("msg");
    let reason = StopReason::CostBudget;
    let answer = format!("{AT_CEILING_ANSWER}{why}");
    let response = match stream {
        true => sse::respond(futures::stream::iter(without_turn(
            id, model, reason, answer,
        ))),
        false => {
            let reply = message(id, model, reason, answer, &[], &TurnStats::default());
            Json(reply).into_response()
        }
    };
    with_header(response, STOP_REASON_HEADER, reason.as_str())
}

/// The whole reply of `turn`, once it has ended, with its stop reason in a header.
async fn whole(
    turn: StartedTurn,
    id: String,
    model: String,
    thinking: &Thinking,
) -> Result<Response, AppError> {
    let (terminal, mut pending) = until_end(turn.events, turn.cancel).await;
    match terminal {
        Some(ChatEvent::Done {
            reason,
            answer,
            stats,
        }) => {
            let calls = match reason {
                StopReason::ClientToolCalls => pending.take(),
                _ => Vec::new(),
            };
            let mut reply = message(id, model, reason, answer, &calls, &stats);
            // The model's thinking comes first, as the upstream sent it.
            let thought = thinking.take();
            reply.content.splice(0..0, thought);
            let response = Json(reply).into_response();
            Ok(with_header(response, STOP_REASON_HEADER, reason.as_str()))
        }
        Some(ChatEvent::Error {
            reason, message, ..
        }) => Err(AppError::TurnFailed { reason, message }),
        _ => Err(AppError::Internal(
            "the turn ended without a terminal event".into(),
        )),
    }
}

/// The request's sampling settings, in the ranges Anthropic takes; one buddy cannot
/// honour is refused by name.
fn sampling(body: &MessagesRequest) -> Result<Sampling, AppError> {
    if body.top_k.is_some() {
        return Err(AppError::BadRequest(
            "top_k: buddy's model servers take temperature and top_p, not top_k; leave top_k out"
                .into(),
        ));
    }
    if let Some(t) = body.temperature.filter(|t| !(0.0..=1.0).contains(t)) {
        return Err(AppError::BadRequest(format!(
            "temperature: {t} must be between 0 and 1"
        )));
    }
    if body.max_tokens == 0 {
        return Err(AppError::BadRequest(
            "max_tokens: must be at least 1".into(),
        ));
    }
    Ok(Sampling {
        temperature: body.temperature,
        top_p: body.top_p,
        max_output_tokens: Some(body.max_tokens),
        stop: body.stop_sequences.clone(),
        ..Sampling::default()
    })
}

/// What of the request buddy does not carry to the model, in words (the
/// `buddy-warning` header).
fn warnings(body: &MessagesRequest, history: &ToHistory, left_out: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if !left_out.is_empty() {
        out.push(format!(
            "tools left out (Anthropic's own, which buddy's model server does not run): {}",
            left_out.join(", ")
        ));
    }
    if body.thinking.as_ref().is_some_and(|t| t.kind != "disabled") {
        out.push("thinking is not asked of the model server".into());
    }
    let counts = [
        (
            history.thinking_blocks,
            "thinking blocks of earlier replies carried only where the request passes through",
        ),
        (history.cache_marks, "cache_control marks not carried"),
        (
            history.tool_result_images,
            "images in tool results passed as a line of text",
        ),
    ];
    for (count, what) in counts {
        if count > 0 {
            out.push(format!("{count} {what}"));
        }
    }
    let unknown: Vec<&str> = body.extra.keys().map(String::as_str).collect();
    if !unknown.is_empty() {
        out.push(format!("fields not used: {}", unknown.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(extra: serde_json::Value) -> MessagesRequest {
        let mut body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn settings_buddy_cannot_honour_are_refused_by_name() {
        let err = |extra| sampling(&request(extra)).unwrap_err().to_string();
        assert!(err(json!({"top_k": 5})).starts_with("top_k:"));
        assert!(err(json!({"temperature": 1.5})).contains("between 0 and 1"));
        assert!(err(json!({"max_tokens": 0})).contains("at least 1"));
        let ok = sampling(&request(
            json!({"temperature": 0.5, "stop_sequences": ["END"]}),
        ))
        .unwrap();
        assert_eq!((ok.max_output_tokens, ok.stop.len()), (Some(10), 1));
    }

    #[test]
    fn what_is_not_carried_is_named_in_the_warnings() {
        let body = request(json!({
            "tools": [{"name": "Bash", "input_schema": {"type": "object"}},
                      {"type": "web_search_20250305", "name": "web_search"}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "context_management": {}
        }));
        let history = to_messages(None, &body.messages).unwrap();
        let (_, left_out) = client_tools(&body.tools);
        let said = warnings(&body, &history, &left_out).join("; ");
        for part in ["web_search", "thinking", "context_management"] {
            assert!(said.contains(part), "{part}: {said}");
        }
        assert_eq!(client_tools(&body.tools).0.len(), 1);
        assert!(warnings(&request(json!({})), &history, &[]).is_empty());
    }
}
