//! Canonical tool arguments, so `{"b":1,"a":2}` and `{ "a": 2, "b": 1 }` are the same call.
//!
//! What the guards keep of a call is bounded whatever its size: canonical text longer
//! than [`CANONICAL_MAX`] bytes is kept as its digest, and only argument strings short
//! enough to be echoed in a result are kept for echo removal.

use std::io::Write;

use serde_json::Value;

use super::noise::{FNV_START, fnv};

/// Canonical text longer than this is kept as `#<hash>:<bytes>`.
pub const CANONICAL_MAX: usize = 4096;
/// Argument strings longer than this are not kept for echo removal (a result is cut far
/// shorter than a string this long could be echoed in).
const ECHO_MAX_BYTES: usize = 16 * 1024;
/// Most argument strings kept for echo removal.
const ECHO_MAX_STRINGS: usize = 64;

/// The arguments parsed, when they are JSON.
pub fn parse(raw: &str) -> Option<Value> {
    serde_json::from_str(raw.trim()).ok()
}

/// The arguments as compact JSON with object keys sorted at every level (bounded, see
/// the module).
///
/// Empty arguments mean `{}`; text that is not JSON is kept as given (trimmed), so a
/// malformed call repeated verbatim is still recognised as a repeat.
pub fn canonical_args(raw: &str) -> String {
    canonical_of(raw, parse(raw).as_ref())
}

/// [`canonical_args`] of arguments already parsed (`value`: `None` when not JSON).
pub fn canonical_of(raw: &str, value: Option<&Value>) -> String {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return "{}".to_owned();
    }
    let mut sink = Sink::default();
    match value {
        Some(value) => write_canonical(value, &mut sink),
        None => sink.put(trimmed.as_bytes()),
    }
    sink.finish()
}

/// The string values inside the arguments (at any depth), longest first: what a result
/// that merely echoes the request would contain. Bounded (see the module).
pub fn strings_of(value: Option<&Value>, min_chars: usize) -> Vec<String> {
    fn collect(value: &Value, min_chars: usize, out: &mut Vec<String>) {
        match value {
            Value::String(s)
                if out.len() < ECHO_MAX_STRINGS
                    && s.len() <= ECHO_MAX_BYTES
                    && s.trim().chars().count() >= min_chars =>
            {
                out.push(s.clone());
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, min_chars, out)),
            Value::Object(map) => map.values().for_each(|v| collect(v, min_chars, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(value) = value {
        collect(value, min_chars, &mut out);
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

/// Canonical text as it is written: kept while short, hashed throughout.
struct Sink {
    text: Vec<u8>,
    hash: u64,
    bytes: usize,
    long: bool,
}

impl Default for Sink {
    fn default() -> Self {
        Sink {
            text: Vec::new(),
            hash: FNV_START,
            bytes: 0,
            long: false,
        }
    }
}

impl Sink {
    fn put(&mut self, bytes: &[u8]) {
        self.hash = fnv(self.hash, bytes);
        self.bytes += bytes.len();
        if self.long {
            return;
        }
        if self.text.len() + bytes.len() > CANONICAL_MAX {
            self.long = true;
            self.text = Vec::new();
        } else {
            self.text.extend_from_slice(bytes);
        }
    }

    fn finish(self) -> String {
        if self.long {
            format!("#{:016x}:{}", self.hash, self.bytes)
        } else {
            String::from_utf8_lossy(&self.text).into_owned()
        }
    }
}

// serde_json writes through `write_all`; the trait's default loops over `write`.
impl Write for Sink {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.put(bytes);
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.put(bytes);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn write_canonical(value: &Value, out: &mut Sink) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.put(b"{");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                let _ = serde_json::to_writer(&mut *out, key);
                out.put(b":");
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.put(b"}");
        }
        Value::Array(items) => {
            out.put(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_canonical(item, out);
            }
            out.put(b"]");
        }
        // Written straight into the sink: a long string is never copied whole.
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::canonical_args;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        assert_eq!(
            canonical_args(r#"{ "b": 1, "a": {"y": [1, 2], "x": null} }"#),
            r#"{"a":{"x":null,"y":[1,2]},"b":1}"#
        );
        assert_eq!(canonical_args("  "), "{}");
        assert_eq!(canonical_args("{}"), "{}");
        assert_eq!(canonical_args("{oops"), "{oops");
    }

    #[test]
    fn long_arguments_are_kept_as_a_digest_that_still_tells_calls_apart() {
        let long = |c: &str| format!(r#"{{"text": "{}"}}"#, c.repeat(10_000));
        let (a, b) = (canonical_args(&long("a")), canonical_args(&long("b")));
        assert!(a.starts_with('#') && a.len() < 64, "{a}");
        assert_ne!(a, b);
        // Key order and white space still do not matter.
        let spaced = format!(r#"{{ "text" : "{}" , "n": 1 }}"#, "a".repeat(10_000));
        let ordered = format!(r#"{{"n":1,"text":"{}"}}"#, "a".repeat(10_000));
        assert_eq!(canonical_args(&spaced), canonical_args(&ordered));
        // A string too long to be echoed in a result is not kept for echo removal.
        let longer = format!(r#"{{"text": "{}", "path": "a.txt"}}"#, "a".repeat(20_000));
        let kept = super::strings_of(super::parse(&longer).as_ref(), 2);
        assert_eq!(kept, ["a.txt"]);
    }
}
