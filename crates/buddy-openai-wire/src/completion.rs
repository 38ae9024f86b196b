//! A Chat Completions answer as a server writes it: whole (`chat.completion`) or in
//! chunks (`chat.completion.chunk`). Written by `buddy serve`'s endpoint and by
//! `buddy mock-server`; read back by the OpenAI provider (which borrows, on its hot path).

use buddy_core::Arguments;
use serde::Serialize;

use super::details::BuddyDetails;

/// A whole answer.
#[derive(Debug, Serialize)]
pub struct ChatCompletion<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub choices: Vec<Choice>,
    pub usage: ChatUsage,
    /// buddy's own extension: why the turn ended and what it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buddy: Option<BuddyDetails>,
}

impl<'a> ChatCompletion<'a> {
    /// The answer of one choice.
    pub fn new(
        id: &'a str,
        created: u64,
        model: &'a str,
        choice: Choice,
        usage: ChatUsage,
    ) -> Self {
        ChatCompletion {
            id,
            object: "chat.completion",
            created,
            model,
            choices: vec![choice],
            usage,
            buddy: None,
        }
    }
}

/// The one choice of an answer.
#[derive(Debug, Serialize)]
pub struct Choice {
    pub index: u32,
    pub message: AssistantMessage,
    pub finish_reason: &'static str,
    pub logprobs: Option<()>,
}

impl Choice {
    /// The message, ended for `finish_reason`.
    pub fn new(message: AssistantMessage, finish_reason: &'static str) -> Self {
        Choice {
            index: 0,
            message,
            finish_reason,
            logprobs: None,
        }
    }
}

/// The assistant's message: its text (null when it only calls tools) and calls.
#[derive(Debug, Serialize)]
pub struct AssistantMessage {
    pub role: &'static str,
    pub content: Option<String>,
    pub refusal: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<OutputToolCall>,
}

impl AssistantMessage {
    /// A message of `text` (none when empty) and `tool_calls`.
    pub fn new(text: String, tool_calls: Vec<OutputToolCall>) -> Self {
        AssistantMessage {
            role: "assistant",
            content: (!text.is_empty()).then_some(text),
            refusal: None,
            tool_calls,
        }
    }
}

/// A tool call, whole or (in a chunk) a piece of one: `index` in chunks, `id`, `type`
/// and `name` on its first piece.
#[derive(Debug, Serialize)]
pub struct OutputToolCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: OutputFunction,
}

impl OutputToolCall {
    /// A whole call (`index` is set in chunks only).
    pub fn whole(index: Option<usize>, id: &str, name: &str, arguments: Arguments) -> Self {
        OutputToolCall {
            index,
            id: Some(id.to_owned()),
            kind: Some("function"),
            function: OutputFunction {
                name: Some(name.to_owned()),
                arguments,
            },
        }
    }

    /// A later piece of call `index`'s arguments.
    pub fn piece(index: usize, arguments: &str) -> Self {
        OutputToolCall {
            index: Some(index),
            id: None,
            kind: None,
            function: OutputFunction {
                name: None,
                arguments: arguments.into(),
            },
        }
    }
}

/// The function of a call.
#[derive(Debug, Serialize)]
pub struct OutputFunction {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub arguments: Arguments,
}

/// Token counts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ChatUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl ChatUsage {
    /// The usage of `input` and `output` tokens.
    pub fn new(input: u64, output: u64) -> Self {
        ChatUsage {
            prompt_tokens: input,
            completion_tokens: output,
            total_tokens: input + output,
        }
    }
}

/// One chunk of a streamed answer.
#[derive(Debug, Serialize)]
pub struct Chunk<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub choices: Vec<ChunkChoice>,
    /// Absent unless the request asked for usage; then null on every chunk but the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<ChatUsage>>,
}

impl<'a> Chunk<'a> {
    /// A chunk of one choice's `delta` (`finish_reason` on the last).
    pub fn new(
        id: &'a str,
        created: u64,
        model: &'a str,
        delta: Delta,
        finish_reason: Option<&'static str>,
    ) -> Self {
        Chunk {
            id,
            object: "chat.completion.chunk",
            created,
            model,
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason,
            }],
            usage: None,
        }
    }

    /// The last chunk of a stream that reports usage: no choices.
    pub fn usage(id: &'a str, created: u64, model: &'a str, usage: ChatUsage) -> Self {
        Chunk {
            choices: Vec::new(),
            usage: Some(Some(usage)),
            ..Chunk::new(id, created, model, Delta::default(), None)
        }
    }
}

/// A chunk's choice.
#[derive(Debug, Serialize)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub finish_reason: Option<&'static str>,
}

/// What a chunk adds: the role (first chunk), text, or pieces of tool calls.
#[derive(Debug, Default, Serialize)]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<OutputToolCall>,
}

impl Delta {
    /// The first chunk's: the role and empty text.
    pub fn opening() -> Self {
        Delta {
            role: Some("assistant"),
            content: Some(String::new()),
            tool_calls: Vec::new(),
        }
    }

    /// A piece of text.
    pub fn text(text: String) -> Self {
        Delta {
            content: Some(text),
            ..Delta::default()
        }
    }

    /// Pieces of tool calls.
    pub fn calls(tool_calls: Vec<OutputToolCall>) -> Self {
        Delta {
            tool_calls,
            ..Delta::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chunks_and_answers_are_in_the_apis_shapes() {
        let opening = Chunk::new("c1", 7, "m", Delta::opening(), None);
        assert_eq!(
            serde_json::to_value(&opening).unwrap(),
            json!({"id": "c1", "object": "chat.completion.chunk", "created": 7, "model": "m",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
        );
        let with_usage = Chunk {
            usage: Some(None),
            ..Chunk::new("c1", 7, "m", Delta::default(), Some("stop"))
        };
        assert!(serde_json::to_value(&with_usage).unwrap()["usage"].is_null());
        let last = serde_json::to_value(Chunk::usage("c1", 7, "m", ChatUsage::new(3, 4))).unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["total_tokens"], 7);
        let piece = serde_json::to_value(OutputToolCall::piece(1, "{\"a\"")).unwrap();
        assert_eq!(
            piece,
            json!({"index": 1, "function": {"arguments": "{\"a\""}})
        );

        let call = OutputToolCall::whole(None, "call_1", "f", "{}".into());
        let answer = ChatCompletion::new(
            "c2",
            0,
            "m",
            Choice::new(
                AssistantMessage::new(String::new(), vec![call]),
                "tool_calls",
            ),
            ChatUsage::new(1, 2),
        );
        let answer = serde_json::to_value(&answer).unwrap();
        assert!(answer["choices"][0]["message"]["content"].is_null());
        assert_eq!(
            answer["choices"][0]["message"]["tool_calls"][0],
            json!({"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}})
        );
        assert!(answer.get("buddy").is_none());
    }
}
