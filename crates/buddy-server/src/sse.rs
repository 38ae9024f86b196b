//! Server-sent events as buddy writes them: every frame encoded once, into a buffer of
//! exactly its size (an event can carry megabytes of tool-call arguments; a growing
//! buffer would hold twice that), and a comment every 15 s of a quiet stream so proxies
//! keep it open.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Serialize;

/// How long a stream may be quiet before a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// `event: NAME` (when named) and `data: JSON` of `data`, as one frame. Compact JSON has
/// no line breaks, so it is one data line.
pub(crate) fn json_frame(name: Option<&str>, data: &impl Serialize) -> Bytes {
    let head = match name {
        Some(name) => format!("event: {name}\ndata: "),
        None => "data: ".to_owned(),
    };
    let Ok(len) = buddy_core::json_len(data) else {
        return text_frame(Some("error"), "unencodable event");
    };
    let mut out = Vec::with_capacity(head.len() + len + 2);
    out.extend_from_slice(head.as_bytes());
    if serde_json::to_writer(&mut out, data).is_err() {
        return text_frame(Some("error"), "unencodable event");
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// A numbered frame (`id: SEQ`) of an event already in JSON, as a client reattaching
/// with `Last-Event-ID` expects.
pub(crate) fn numbered_frame(seq: u64, name: &str, json: &str) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + name.len() + 40);
    out.extend_from_slice(format!("id: {seq}\nevent: {name}\ndata: ").as_bytes());
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// A numbered frame of `data`'s JSON, written straight into a buffer of its size (no
/// JSON text of its own first: a call's arguments can be megabytes).
pub(crate) fn numbered_json_frame(seq: u64, name: &str, data: &impl Serialize) -> Bytes {
    let head = format!("id: {seq}\nevent: {name}\ndata: ");
    let Ok(len) = buddy_core::json_len(data) else {
        return numbered_frame(seq, name, "{}");
    };
    let mut out = Vec::with_capacity(head.len() + len + 2);
    out.extend_from_slice(head.as_bytes());
    if serde_json::to_writer(&mut out, data).is_err() {
        return numbered_frame(seq, name, "{}");
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// A frame of plain text (`[DONE]`); each line of it is a data line.
pub(crate) fn text_frame(name: Option<&str>, data: &str) -> Bytes {
    let mut out = String::new();
    if let Some(name) = name {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

enum Item {
    Frame(Bytes),
    Quiet,
    End,
}

/// A `text/event-stream` response of `frames`, with keep-alive comments while it is quiet.
pub(crate) fn respond(frames: impl Stream<Item = Bytes> + Send + 'static) -> Response {
    let frames = frames
        .map(Item::Frame)
        .chain(futures::stream::once(async { Item::End }));
    let start = tokio::time::Instant::now() + KEEP_ALIVE;
    let quiet = futures::stream::unfold(
        tokio::time::interval_at(start, KEEP_ALIVE),
        |mut every| async move {
            every.tick().await;
            Some((Item::Quiet, every))
        },
    );
    let body = futures::stream::select(frames, quiet)
        .take_while(|item| std::future::ready(!matches!(item, Item::End)))
        .map(|item| {
            Ok::<_, std::convert::Infallible>(match item {
                Item::Frame(bytes) => bytes,
                _ => Bytes::from_static(b":\n\n"),
            })
        });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_the_sse_format_in_buffers_of_their_size() {
        let frame = json_frame(Some("done"), &serde_json::json!({"a": "x\ny"}));
        assert_eq!(&frame[..], b"event: done\ndata: {\"a\":\"x\\ny\"}\n\n");
        let plain = json_frame(None, &serde_json::json!([1]));
        assert_eq!(&plain[..], b"data: [1]\n\n");
        assert_eq!(&text_frame(None, "[DONE]")[..], b"data: [DONE]\n\n");
        assert_eq!(
            &text_frame(Some("x"), "a\nb")[..],
            b"event: x\ndata: a\ndata: b\n\n"
        );
    }
}
