//! A small, bounded Server-Sent Events decoder.
//!
//! Handles LF, CRLF and lone CR line endings (also split across chunks), multi-line
//! `data:`, `event:` names, comment lines (`: keep-alive`), a last event with no
//! blank line after it (`finish`), and refuses lines longer than a bound so a broken
//! server cannot make buddy buffer without limit.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, if any (`error`, `message_start`, …).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The byte stream is not valid SSE.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE line is longer than {max} bytes; the stream is not a valid event stream")]
    LineTooLong { max: usize },
    #[error("an SSE line is not valid UTF-8")]
    InvalidUtf8,
    #[error(
        "one server-sent event is larger than the limit (max_event_bytes = {max}); the stream is not a valid event stream"
    )]
    EventTooLarge { max: usize },
}

/// Default bound on one line: big enough for a whole tool call sent in one piece.
pub const DEFAULT_MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// An incremental SSE decoder: push bytes as they arrive, collect events.
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
    after_cr: bool,
    max_line: usize,
    max_event: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::new(DEFAULT_MAX_LINE_BYTES)
    }
}

impl SseDecoder {
    /// A decoder refusing lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        Self::bounded(max_line, max_line)
    }

    /// A decoder refusing lines longer than `max_line` and events (their `data` lines
    /// together) larger than `max_event` bytes.
    pub fn bounded(max_line: usize, max_event: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            event: None,
            data: String::new(),
            has_data: false,
            after_cr: false,
            max_line,
            max_event,
        }
    }

    /// Bytes of the event under way (its data so far and a partial line that is not a
    /// comment): a large event still arriving is progress even before it completes.
    pub fn pending_bytes(&self) -> usize {
        let line = match self.line.first() {
            Some(b':') => 0,
            _ => self.line.len(),
        };
        line + self.data.len()
    }

    /// Decodes `bytes`, appending every completed event to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match memchr::memchr2(b'\n', b'\r', rest) {
                // A whole line inside this chunk is read where it lies, without a copy.
                Some(end) if self.line.is_empty() => {
                    if end > self.max_line {
                        return Err(SseError::LineTooLong { max: self.max_line });
                    }
                    self.after_cr = rest[end] == b'\r';
                    self.read_line(&rest[..end], out)?;
                    rest = &rest[end + 1..];
                }
                Some(end) => {
                    self.append(&rest[..end])?;
                    self.after_cr = rest[end] == b'\r';
                    self.end_line(out)?;
                    rest = &rest[end + 1..];
                }
                None => {
                    self.append(rest)?;
                    rest = &[];
                }
            }
        }
        Ok(())
    }

    /// Ends the stream: a last line and a last event without their terminators still count.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            self.end_line(out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > self.max_line {
            return Err(SseError::LineTooLong { max: self.max_line });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// Reads the line gathered across chunks, keeping its allocation for the next one.
    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut line = std::mem::take(&mut self.line);
        let read = self.read_line(&line, out);
        line.clear();
        self.line = line;
        read
    }

    /// One complete line, without its terminator.
    fn read_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        let text = std::str::from_utf8(line).map_err(|_| SseError::InvalidUtf8)?;
        if text.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "data" => {
                if self.data.len() + value.len() + 1 > self.max_event {
                    return Err(SseError::EventTooLarge {
                        max: self.max_event,
                    });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
        }
        self.event = None;
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut d = SseDecoder::new(64);
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out)?;
        }
        d.finish(&mut out)?;
        Ok(out)
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn data_lines_without_a_blank_line_between_are_bounded_as_one_event() {
        let mut decoder = SseDecoder::bounded(1024, 4096);
        let mut out = Vec::new();
        let line = format!("data: {}\n", "x".repeat(1000));
        let mut error = None;
        for _ in 0..10 {
            if let Err(e) = decoder.push(line.as_bytes(), &mut out) {
                error = Some(e);
                break;
            }
        }
        assert_eq!(error, Some(SseError::EventTooLarge { max: 4096 }));
        assert!(out.is_empty());
    }

    #[test]
    fn decodes_the_forms_real_servers_send() {
        let body = b": OPENROUTER PROCESSING\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: error\ndata: line one\ndata:line two\n\nid: 7\nretry: 10\ndata: [DONE]\n\ndata: last without blank line";
        assert_eq!(
            decode(&[body]).unwrap(),
            vec![
                ev(None, "{\"a\":1}"),
                ev(Some("error"), "line one\nline two"),
                ev(None, "[DONE]"),
                ev(None, "last without blank line"),
            ]
        );
    }

    #[test]
    fn lone_cr_and_crlf_split_across_chunks_are_one_line_end() {
        assert_eq!(
            decode(&[b"data: a\r", b"\n\r", b"\ndata: b\r\r"]).unwrap(),
            vec![ev(None, "a"), ev(None, "b")]
        );
    }

    #[test]
    fn an_event_name_without_data_is_not_dispatched() {
        assert_eq!(
            decode(&[b"event: ping\n\ndata: x\n\n"]).unwrap(),
            vec![ev(None, "x")]
        );
    }

    #[test]
    fn overlong_lines_and_bad_utf8_are_errors() {
        assert_eq!(
            decode(&[&[b'x'; 65]]),
            Err(SseError::LineTooLong { max: 64 })
        );
        assert_eq!(decode(&[b"data: \xff\xfe\n\n"]), Err(SseError::InvalidUtf8));
    }

    fn encode(events: &[(Option<String>, Vec<String>)], crlf: bool) -> Vec<u8> {
        let nl = if crlf { "\r\n" } else { "\n" };
        let mut s = String::new();
        for (name, lines) in events {
            s.push_str(&format!(": comment{nl}"));
            if let Some(name) = name {
                s.push_str(&format!("event: {name}{nl}"));
            }
            for line in lines {
                s.push_str(&format!("data: {line}{nl}"));
            }
            s.push_str(nl);
        }
        s.into_bytes()
    }

    proptest! {
        /// However the bytes are split into chunks, the same events come out.
        #[test]
        fn chunk_boundaries_never_change_the_events(
            events in prop::collection::vec(
                (prop::option::of("[a-z_]{1,8}"), prop::collection::vec("[ -~é€]{0,20}", 1..3)),
                0..6,
            ),
            crlf in any::<bool>(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let bytes = encode(&events, crlf);
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&bytes[last..p]);
                last = p;
            }
            chunks.push(&bytes[last..]);
            let mut d = SseDecoder::default();
            let mut out = Vec::new();
            for c in chunks {
                d.push(c, &mut out).unwrap();
            }
            d.finish(&mut out).unwrap();
            let expected: Vec<SseEvent> = events
                .iter()
                .map(|(name, lines)| SseEvent { event: name.clone(), data: lines.join("\n") })
                .collect();
            prop_assert_eq!(out, expected);
        }

        /// Arbitrary bytes never panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let mut d = SseDecoder::new(128);
            let mut out = Vec::new();
            let _ = d.push(&bytes, &mut out).and_then(|()| d.finish(&mut out));
        }
    }
}
