use serde::{Deserialize, Serialize};

use crate::Arguments;

/// One entry of a conversation, in a provider-neutral form.
///
/// Tool calls and their results stay structured (never flattened into user text) so
/// each provider can render them in its native shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions for the model; never trimmed away.
    System { content: String },
    /// What the user said, and the images and files sent with it.
    User {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
    },
    /// A model reply: optional text and any tool calls it asked for.
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, tied to it by `tool_call_id`.
    Tool {
        tool_call_id: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// buddy's own note to the model (calls left, a loop warning), kept apart from tool
    /// results so their bytes reach the model unchanged. Providers send it as user text.
    Note { content: String },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
            attachments: Vec::new(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// A tool result for `tool_call_id`.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Message::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
            is_error,
        }
    }

    /// How every note buddy writes to the model begins, so that a note sent over a wire
    /// that has no note role (as user text) can be recognised again. Impersonal: a model
    /// must not read a note as someone to answer.
    pub const NOTE_MARK: &'static str = "[system note]";

    /// The mark notes had before (`[buddy]`), still read back as a note.
    pub const LEGACY_NOTE_MARK: &'static str = "[buddy]";

    /// True when `text` is one of buddy's notes as a wire carries it (marked).
    pub fn is_note_text(text: &str) -> bool {
        text.starts_with(Self::NOTE_MARK) || text.starts_with(Self::LEGACY_NOTE_MARK)
    }

    /// A note from buddy to the model.
    pub fn note(content: impl Into<String>) -> Self {
        Message::Note {
            content: content.into(),
        }
    }

    /// A user message with images or files.
    pub fn user_with(content: impl Into<String>, attachments: Vec<Attachment>) -> Self {
        Message::User {
            content: content.into(),
            attachments,
        }
    }

    /// The images and files sent with the message (only a user message has any).
    pub fn attachments(&self) -> &[Attachment] {
        match self {
            Message::User { attachments, .. } => attachments,
            _ => &[],
        }
    }

    /// True for a user message.
    pub fn is_user(&self) -> bool {
        matches!(self, Message::User { .. })
    }

    /// The text of the message, if it has any (tool results count as text).
    pub fn text(&self) -> Option<&str> {
        match self {
            Message::System { content }
            | Message::User { content, .. }
            | Message::Note { content }
            | Message::Tool { content, .. } => Some(content),
            Message::Assistant { content, .. } => content.as_deref(),
        }
    }
}

/// An image or a file a user sent with a message; it goes to providers that take them
/// (a provider that cannot is refused with a clear error, never sent text alone).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Attachment {
    /// An image: an `https:` URL, or a `data:image/…;base64,…` URL.
    Image {
        url: String,
        /// `low`, `high` or `auto`, where the provider has it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A file (a PDF, typically) as a `data:…;base64,…` URL.
    File {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
        data: String,
    },
}

impl Attachment {
    /// Tokens an attachment is counted as when buddy fits a request to the model's
    /// window (providers count images by size; this is a round, cautious figure).
    pub const TOKENS: usize = 1_000;

    /// Whether buddy may pass it on: an image by an `https:` URL to a public host or a
    /// well-formed `data:image/…;base64,…` URL; a file as a well-formed `data:` URL.
    pub fn check(&self) -> Result<(), crate::AttachmentUrlError> {
        match self {
            Attachment::Image { url, .. } => crate::check_image_url(url),
            Attachment::File { data, .. } => crate::check_file_data(data),
        }
    }

    /// The attachment as buddy passes it on, when it may: an image's URL as the WHATWG
    /// parse reads it (the host checked as read, so the model server gets what was
    /// checked, never another spelling of it); a file unchanged.
    pub fn checked(self) -> Result<Self, crate::AttachmentUrlError> {
        match self {
            Attachment::Image { url, detail } => Ok(Attachment::Image {
                url: crate::canonical_image_url(&url)?,
                detail,
            }),
            Attachment::File { data, filename } => {
                crate::check_file_data(&data)?;
                Ok(Attachment::File { filename, data })
            }
        }
    }

    /// Why an image's `https:` URL must not be passed on (its host local or private as
    /// the WHATWG parse reads it), in words; `None` for a URL that may, and for `data:`
    /// URLs and files (checked whole when they came in).
    pub fn url_refusal(&self) -> Option<String> {
        match self {
            Attachment::Image { url, .. } if Self::data_parts(url).is_none() => {
                crate::canonical_image_url(url)
                    .err()
                    .map(|e| format!("image: {e}"))
            }
            _ => None,
        }
    }

    /// The media type and base64 data of a `data:` URL (`None` for another URL).
    pub fn data_parts(url: &str) -> Option<(&str, &str)> {
        let rest = url.strip_prefix("data:")?;
        let (media, data) = rest.split_once(";base64,")?;
        Some((media, data))
    }
}

/// A tool call as the model asked for it; `arguments` is the raw JSON text it sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Arguments,
}

impl ToolCall {
    /// A tool call from its parts.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Arguments>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A tool offered to the model: its name, what it does, and a JSON Schema of its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_json() {
        let msgs = vec![
            Message::system("be brief"),
            Message::user("hi"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("c1", "get_time", "{}")],
            },
            Message::tool_result("c1", "12:00", false),
            Message::assistant("It is noon."),
        ];
        let json = serde_json::to_string(&msgs).unwrap();
        let back: Vec<Message> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, msgs);
        assert!(json.contains(r#""role":"tool","tool_call_id":"c1""#));
    }
}
