//! What the gateway benchmark sends and how it reads the first token of a streamed
//! reply: Chat Completions (`POST …/chat/completions`, OpenAI's shape) or Anthropic's
//! Messages API (`POST …/messages`). The mock speaks only Chat Completions, so with
//! `--api messages` the gateway's latency is set beside the mock's answer to the
//! equivalent Chat Completions request (the same user message, model and `max_tokens`).

use serde_json::{Value, json};

/// The model every request names (the mock's `plain_chat` scenario).
pub const MODEL: &str = "scripted:plain_chat";
/// The user message every request carries.
pub const PROMPT: &str = "Say hello.";
/// The `max_tokens` of every request (Anthropic's API requires one).
pub const MAX_TOKENS: u32 = 256;
/// The `anthropic-version` header sent with Messages requests.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The API a gateway is measured on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI's Chat Completions, straight to the mock and through the gateway alike.
    #[default]
    ChatCompletions,
    /// Anthropic's Messages through the gateway; the mock answers the equivalent Chat
    /// Completions request.
    Messages,
}

impl Api {
    /// The path under a base URL (`…/v1`) this API is served at.
    pub fn path(self) -> &'static str {
        match self {
            Api::ChatCompletions => "/chat/completions",
            Api::Messages => "/messages",
        }
    }

    /// The request body, whole or streamed.
    pub fn body(self, stream: bool) -> Value {
        match self {
            Api::ChatCompletions => json!({
                "model": MODEL,
                "messages": [{"role": "user", "content": PROMPT}],
                "stream": stream,
            }),
            Api::Messages => json!({
                "model": MODEL,
                "max_tokens": MAX_TOKENS,
                "messages": [{"role": "user", "content": PROMPT}],
                "stream": stream,
            }),
        }
    }

    /// The Chat Completions body the mock answers as the equivalent of this API's request:
    /// the same message and model, and the same `max_tokens` when this API names one.
    pub fn direct_body(self, stream: bool) -> Value {
        let mut body = Api::ChatCompletions.body(stream);
        if self == Api::Messages {
            body["max_tokens"] = json!(MAX_TOKENS);
        }
        body
    }

    /// Headers this API's requests carry beside `content-type`.
    pub fn headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Api::ChatCompletions => &[],
            Api::Messages => &[("anthropic-version", ANTHROPIC_VERSION)],
        }
    }
}

/// Reads a server-sent event stream as it arrives until the first token of content:
/// for Chat Completions the first chunk whose `choices[].delta.content` is not empty,
/// for Messages the first `content_block_delta` event.
#[derive(Debug)]
pub struct FirstToken {
    api: Api,
    /// The bytes of the event not yet ended by a blank line.
    pending: Vec<u8>,
    found: bool,
}

impl FirstToken {
    /// A reader for `api`'s stream.
    pub fn new(api: Api) -> Self {
        FirstToken {
            api,
            pending: Vec::new(),
            found: false,
        }
    }

    /// Whether the first token has arrived, after reading `chunk` (the stream's next
    /// bytes, split anywhere). Once true, stays true and reads nothing more.
    pub fn feed(&mut self, chunk: &[u8]) -> bool {
        if self.found {
            return true;
        }
        self.pending.extend_from_slice(chunk);
        while let Some((end, skip)) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end + skip).take(end).collect();
            if self.is_token(&String::from_utf8_lossy(&event)) {
                self.found = true;
                self.pending = Vec::new();
                return true;
            }
        }
        false
    }

    /// Whether one whole event (its lines, without the blank line) carries content.
    fn is_token(&self, event: &str) -> bool {
        let mut name = None;
        let mut data = String::new();
        for line in event.lines() {
            let line = line.trim_end_matches('\r');
            if let Some(value) = field(line, "event") {
                name = Some(value.to_owned());
            } else if let Some(value) = field(line, "data") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
        }
        match self.api {
            Api::Messages => {
                name.as_deref() == Some("content_block_delta")
                    || serde_json::from_str::<Value>(&data)
                        .is_ok_and(|v| v["type"] == "content_block_delta")
            }
            Api::ChatCompletions => serde_json::from_str::<Value>(&data).is_ok_and(|v| {
                v["choices"].as_array().is_some_and(|choices| {
                    choices.iter().any(|c| {
                        c["delta"]["content"]
                            .as_str()
                            .is_some_and(|text| !text.is_empty())
                    })
                })
            }),
        }
    }
}

/// The value of an SSE field line `name: value` (one optional space after the colon).
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(name)?.strip_prefix(':')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// Where the first event in `bytes` ends (the blank line: `\n\n` or `\r\n\r\n`) and how
/// many bytes the blank line takes.
fn event_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_body_is_anthropics_shape() {
        let body = Api::Messages.body(true);
        assert_eq!(body["model"], MODEL);
        assert_eq!(body["max_tokens"], MAX_TOKENS);
        assert_eq!(body["stream"], true);
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["messages"][0]["content"], PROMPT);
        assert_eq!(body.as_object().map(|o| o.len()), Some(4));
        assert_eq!(Api::Messages.body(false)["stream"], false);
        assert_eq!(Api::Messages.path(), "/messages");
        assert_eq!(
            Api::Messages.headers(),
            &[("anthropic-version", ANTHROPIC_VERSION)]
        );
    }

    #[test]
    fn the_direct_body_is_the_equivalent_chat_request() {
        let direct = Api::Messages.direct_body(false);
        assert_eq!(direct["messages"], Api::Messages.body(false)["messages"]);
        assert_eq!(direct["max_tokens"], MAX_TOKENS);
        assert_eq!(direct["stream"], false);
        // Chat Completions alone is measured as before: no max_tokens, no extra header.
        let chat = Api::ChatCompletions.direct_body(true);
        assert_eq!(chat, Api::ChatCompletions.body(true));
        assert!(chat.get("max_tokens").is_none());
        assert!(Api::ChatCompletions.headers().is_empty());
        assert_eq!(Api::ChatCompletions.path(), "/chat/completions");
    }

    const ANTHROPIC_STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\n\
        event: ping\ndata: {\"type\":\"ping\"}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

    /// The byte offset after which `reader` first says the token has come, feeding
    /// `stream` in pieces of `size` bytes.
    fn found_after(mut reader: FirstToken, stream: &str, size: usize) -> Option<usize> {
        let bytes = stream.as_bytes();
        let mut offset = 0;
        for piece in bytes.chunks(size) {
            offset += piece.len();
            if reader.feed(piece) {
                return Some(offset);
            }
        }
        None
    }

    #[test]
    fn messages_first_token_is_the_first_content_block_delta() {
        let delta_end = ANTHROPIC_STREAM
            .find("Hello\"}}\n\n")
            .map(|i| i + "Hello\"}}\n\n".len());
        // Whole, byte by byte, and in odd pieces: found exactly when the delta's event ends.
        assert_eq!(
            found_after(FirstToken::new(Api::Messages), ANTHROPIC_STREAM, 1),
            delta_end
        );
        for size in [7, 64, 4096] {
            let at = found_after(FirstToken::new(Api::Messages), ANTHROPIC_STREAM, size);
            assert!(at.is_some() && at >= delta_end, "{size}: {at:?}");
        }
        // CRLF line endings, and a data line with no space after the colon.
        let crlf = ANTHROPIC_STREAM.replace('\n', "\r\n");
        assert!(found_after(FirstToken::new(Api::Messages), &crlf, 3).is_some());
        let bare = "data:{\"type\":\"content_block_delta\"}\n\n";
        assert!(found_after(FirstToken::new(Api::Messages), bare, 5).is_some());
    }

    #[test]
    fn a_stream_without_content_has_no_first_token() {
        let before = &ANTHROPIC_STREAM[..ANTHROPIC_STREAM
            .find("event: content_block_delta")
            .unwrap_or(0)];
        assert_eq!(found_after(FirstToken::new(Api::Messages), before, 1), None);
        // An event not yet ended by its blank line is not read yet.
        let unended = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n";
        assert_eq!(
            found_after(FirstToken::new(Api::Messages), unended, 4),
            None
        );
        // Garbage, an error event and a Chat Completions stream are no Messages token.
        let error = "event: error\ndata: {\"type\":\"error\"}\n\nnot an event\n\n";
        assert_eq!(found_after(FirstToken::new(Api::Messages), error, 2), None);
        let chat = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
        assert_eq!(found_after(FirstToken::new(Api::Messages), chat, 9), None);
    }

    #[test]
    fn chat_first_token_is_the_first_non_empty_content_delta() {
        let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
            data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n\
            data: [DONE]\n\n";
        let first = stream.find("\n\n").map(|i| i + 2).unwrap_or(0);
        let at = found_after(FirstToken::new(Api::ChatCompletions), stream, 1);
        assert!(at.is_some_and(|at| at > first), "{at:?}");
        let none = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: [DONE]\n\n";
        assert_eq!(
            found_after(FirstToken::new(Api::ChatCompletions), none, 3),
            None
        );
        // Once found it stays found, whatever follows.
        let mut reader = FirstToken::new(Api::ChatCompletions);
        assert!(reader.feed(stream.as_bytes()));
        assert!(reader.feed(b"garbage"));
    }
}
