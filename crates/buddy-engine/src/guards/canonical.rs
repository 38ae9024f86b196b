//! Canonical tool arguments, so `{"b":1,"a":2}` and `{ "a": 2, "b": 1 }` are the same call.

use serde_json::Value;

/// The arguments as compact JSON with object keys sorted at every level.
///
/// Empty arguments mean `{}`; text that is not JSON is kept as given (trimmed), so a
/// malformed call repeated verbatim is still recognised as a repeat.
pub fn canonical_args(raw: &str) -> String {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return "{}".to_owned();
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => {
            let mut out = String::with_capacity(trimmed.len());
            write_canonical(&value, &mut out);
            out
        }
        Err(_) => trimmed.to_owned(),
    }
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
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
}
