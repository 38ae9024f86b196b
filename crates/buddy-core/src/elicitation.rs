//! Elicitation: a tool (an MCP server) asks the person for a few values mid-call. The
//! request names a flat form (`requestedSchema`); the answer accepts it with content,
//! declines or cancels. Plain data, the [`Elicitor`] trait a skill asks through, and the
//! check of an answer against its form.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::BoxFuture;

/// What a tool asks the person: a message and the form of the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElicitationRequest {
    /// Who asks (an MCP server's name).
    pub server: String,
    /// The question, in the asker's words.
    pub message: String,
    /// The form: a JSON Schema object of flat string / number / integer / boolean /
    /// enum properties (MCP's `requestedSchema`).
    pub schema: Value,
    /// The properties' names in the order the asker wrote them (`schema`'s map is
    /// sorted by key); empty when unknown. See [`form_fields`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
}

/// The fields of form `schema` in the asker's `order`: the names `order` lists first,
/// then any others in key order (a form whose order is unknown is asked by key).
pub fn form_fields<'a>(schema: &'a Value, order: &[String]) -> Vec<(&'a str, &'a Value)> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut fields: Vec<(&str, &Value)> = Vec::with_capacity(properties.len());
    let named = order.iter().map(String::as_str);
    for name in named.chain(properties.keys().map(String::as_str)) {
        if let Some((name, field)) = properties.get_key_value(name)
            && !fields.iter().any(|(seen, _)| *seen == name.as_str())
        {
            fields.push((name.as_str(), field));
        }
    }
    fields
}

/// The person's answer, as MCP's `ElicitResult` carries it (`action`, `content`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ElicitationAnswer {
    /// The form filled in (checked against the schema).
    Accept {
        #[serde(default)]
        content: Map<String, Value>,
    },
    /// The person said no; the tool goes on without the values.
    Decline,
    /// The person dismissed the question (or nobody answered in time).
    Cancel,
}

impl ElicitationAnswer {
    /// The action's name: `accept`, `decline` or `cancel`.
    pub fn action(&self) -> &'static str {
        match self {
            ElicitationAnswer::Accept { .. } => "accept",
            ElicitationAnswer::Decline => "decline",
            ElicitationAnswer::Cancel => "cancel",
        }
    }
}

/// Asks a person on behalf of one tool call; the engine hands one to every call
/// ([`crate::SkillContext::elicitor`]). `ask` always comes back: with nobody to ask, or
/// when nobody answers in time, it answers as the turn's policy says.
pub trait Elicitor: std::fmt::Debug + Send + Sync {
    /// Shows `request` and waits for the answer.
    fn ask(&self, request: ElicitationRequest) -> BoxFuture<'_, ElicitationAnswer>;
}

/// An answer's content that does not fit its form, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {problem}")]
pub struct ContentError {
    /// The property at fault (`""` for the content as a whole).
    pub field: String,
    /// What is wrong, in words a person reads.
    pub problem: String,
}

fn fault(field: &str, problem: impl Into<String>) -> ContentError {
    ContentError {
        field: field.to_owned(),
        problem: problem.into(),
    }
}

/// The answer of nobody-to-ask that takes the form's defaults (MCP's SEP-1034): accept
/// with every field's `default` when that fills the form (each required field has
/// one), else decline.
pub fn answer_with_defaults(schema: &Value) -> ElicitationAnswer {
    let defaults: Map<String, Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter_map(|(name, p)| Some((name.clone(), p.get("default")?.clone())))
                .collect()
        })
        .unwrap_or_default();
    match check_content(schema, &defaults) {
        Ok(content) => ElicitationAnswer::Accept { content },
        Err(_) => ElicitationAnswer::Decline,
    }
}

/// Checks `content` against the form `schema` and returns it with the defaults of
/// fields left out filled in: required fields present, no unknown fields, each value of
/// its type, within its enum, length, range and format.
pub fn check_content(
    schema: &Value,
    content: &Map<String, Value>,
) -> Result<Map<String, Value>, ContentError> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for name in content.keys() {
        if !properties.contains_key(name) {
            return Err(fault(name, "the form has no such field"));
        }
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut checked = Map::new();
    for (name, field) in properties {
        match content.get(name) {
            Some(value) => {
                check_value(name, field, value)?;
                checked.insert(name.clone(), value.clone());
            }
            None if required.contains(&name.as_str()) => {
                return Err(fault(name, "is required"));
            }
            None => {
                if let Some(default) = field.get("default") {
                    checked.insert(name.clone(), default.clone());
                }
            }
        }
    }
    Ok(checked)
}

/// The values an enum field allows: `enum`, or `oneOf` / `anyOf` entries' `const`.
pub fn enum_values(field: &Value) -> Option<Vec<Value>> {
    if let Some(values) = field.get("enum").and_then(Value::as_array) {
        return Some(values.clone());
    }
    let options = field
        .get("oneOf")
        .or_else(|| field.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        options
            .iter()
            .filter_map(|o| o.get("const").cloned())
            .collect(),
    )
}

/// Checks one answered field `name` against its schema `field` (type, choices, length,
/// range, format, number of choices): what a form asks as each field is answered.
pub fn check_value(name: &str, field: &Value, value: &Value) -> Result<(), ContentError> {
    let kind = field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    match kind {
        "string" => {
            let Some(text) = value.as_str() else {
                return Err(fault(name, "must be a text"));
            };
            if let Some(allowed) = enum_values(field)
                && !allowed.iter().any(|a| a == value)
            {
                let names: Vec<String> = allowed.iter().map(Value::to_string).collect();
                return Err(fault(name, format!("must be one of {}", names.join(", "))));
            }
            let chars = u64::try_from(text.chars().count()).unwrap_or(u64::MAX);
            if let Some(min) = field.get("minLength").and_then(Value::as_u64)
                && chars < min
            {
                return Err(fault(name, format!("must be at least {min} characters")));
            }
            if let Some(max) = field.get("maxLength").and_then(Value::as_u64)
                && chars > max
            {
                return Err(fault(name, format!("must be at most {max} characters")));
            }
            if let Some(format) = field.get("format").and_then(Value::as_str) {
                check_format(name, format, text)?;
            }
        }
        "number" | "integer" => {
            let Some(number) = value.as_f64() else {
                return Err(fault(
                    name,
                    format!(
                        "must be a{} {kind}",
                        if kind == "integer" { "n" } else { "" }
                    ),
                ));
            };
            if kind == "integer" && !(value.is_i64() || value.is_u64()) {
                return Err(fault(name, "must be a whole number"));
            }
            if let Some(min) = field.get("minimum").and_then(Value::as_f64)
                && number < min
            {
                return Err(fault(name, format!("must be at least {min}")));
            }
            if let Some(max) = field.get("maximum").and_then(Value::as_f64)
                && number > max
            {
                return Err(fault(name, format!("must be at most {max}")));
            }
        }
        "boolean" => {
            if !value.is_boolean() {
                return Err(fault(name, "must be true or false"));
            }
        }
        "array" => {
            let Some(items) = value.as_array() else {
                return Err(fault(name, "must be a list"));
            };
            let allowed = field.get("items").and_then(enum_values);
            for item in items {
                if let Some(allowed) = &allowed
                    && !allowed.contains(item)
                {
                    return Err(fault(name, format!("{item} is not one of the choices")));
                }
            }
            let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
            if let Some(min) = field.get("minItems").and_then(Value::as_u64)
                && count < min
            {
                return Err(fault(name, format!("must have at least {min} choices")));
            }
            if let Some(max) = field.get("maxItems").and_then(Value::as_u64)
                && count > max
            {
                return Err(fault(name, format!("must have at most {max} choices")));
            }
        }
        other => {
            return Err(fault(
                name,
                format!("has a type buddy cannot ask for: {other}"),
            ));
        }
    }
    Ok(())
}

/// The string formats MCP's forms name, checked for shape (not reachability).
fn check_format(name: &str, format: &str, text: &str) -> Result<(), ContentError> {
    let ok = match format {
        "email" => text.split_once('@').is_some_and(|(user, host)| {
            !user.is_empty() && host.contains('.') && !text.contains(' ')
        }),
        "uri" => text.split_once(':').is_some_and(|(scheme, rest)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
        }),
        "date" => is_date(text),
        "date-time" => text.split_once(['T', 't']).is_some_and(|(date, time)| {
            is_date(date) && time.len() >= 8 && time.as_bytes()[2] == b':'
        }),
        _ => true,
    };
    match ok {
        true => Ok(()),
        false => Err(fault(name, format!("must be a valid {format}"))),
    }
}

/// `YYYY-MM-DD` with a month 01–12 and a day 01–31.
fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let [year, month, day] = parts.as_slice() else {
        return false;
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    digits(year, 4)
        && digits(month, 2)
        && digits(day, 2)
        && (1..=12).contains(&month.parse::<u8>().unwrap_or(0))
        && (1..=31).contains(&day.parse::<u8>().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_defaults_answer_accepts_a_form_its_defaults_fill_and_declines_one_they_do_not() {
        let filled = json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "note": {"type": "string"}}});
        assert_eq!(
            answer_with_defaults(&filled),
            ElicitationAnswer::Accept {
                content: json!({"name": "Ada", "age": 36})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
            }
        );
        let missing = json!({"type": "object", "required": ["note"], "properties": {
            "note": {"type": "string"}}});
        assert_eq!(answer_with_defaults(&missing), ElicitationAnswer::Decline);
    }

    fn form() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 1},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "color": {"type": "string", "enum": ["red", "green"]},
                "email": {"type": "string", "format": "email"},
                "subscribe": {"type": "boolean", "default": false}
            },
            "required": ["name", "age"]
        })
    }

    fn content(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_fitting_answer_passes_with_defaults_filled_in() {
        let checked = check_content(
            &form(),
            &content(json!({"name": "Ada", "age": 36, "color": "red"})),
        )
        .unwrap();
        assert_eq!(
            Value::Object(checked),
            json!({"name": "Ada", "age": 36, "color": "red", "subscribe": false})
        );
    }

    #[test]
    fn each_misfit_names_its_field() {
        let cases = [
            (json!({"age": 3}), "name", "is required"),
            (
                json!({"name": "A", "age": 3.5}),
                "age",
                "must be a whole number",
            ),
            (
                json!({"name": "A", "age": 200}),
                "age",
                "must be at most 150",
            ),
            (
                json!({"name": "A", "age": "3"}),
                "age",
                "must be an integer",
            ),
            (
                json!({"name": "A", "age": 3, "color": "blue"}),
                "color",
                "must be one of \"red\", \"green\"",
            ),
            (
                json!({"name": "A", "age": 3, "email": "nope"}),
                "email",
                "must be a valid email",
            ),
            (
                json!({"name": "A", "age": 3, "subscribe": "yes"}),
                "subscribe",
                "must be true or false",
            ),
            (
                json!({"name": "", "age": 3}),
                "name",
                "must be at least 1 characters",
            ),
            (
                json!({"name": "A", "age": 3, "extra": 1}),
                "extra",
                "the form has no such field",
            ),
        ];
        for (given, field, problem) in cases {
            assert_eq!(
                check_content(&form(), &content(given.clone())),
                Err(fault(field, problem)),
                "{given}"
            );
        }
    }

    #[test]
    fn answers_read_as_mcp_writes_them() {
        let accept: ElicitationAnswer =
            serde_json::from_value(json!({"action": "accept", "content": {"a": 1}})).unwrap();
        assert_eq!(
            accept,
            ElicitationAnswer::Accept {
                content: content(json!({"a": 1}))
            }
        );
        assert_eq!(
            serde_json::to_value(ElicitationAnswer::Decline).unwrap(),
            json!({"action": "decline"})
        );
        assert!(serde_json::from_value::<ElicitationAnswer>(json!({"action": "maybe"})).is_err());
    }

    #[test]
    fn fields_come_in_the_askers_order_then_any_others_by_key() {
        let schema = form();
        let names = |order: &[&str]| -> Vec<String> {
            let order: Vec<String> = order.iter().map(|s| (*s).to_owned()).collect();
            form_fields(&schema, &order)
                .into_iter()
                .map(|(name, _)| name.to_owned())
                .collect()
        };
        let declared = ["name", "subscribe", "age", "email", "color"];
        assert_eq!(names(&declared), declared);
        // Unknown or repeated names are skipped; fields the order leaves out follow by key.
        assert_eq!(
            names(&["subscribe", "nope", "subscribe", "name"]),
            ["subscribe", "name", "age", "color", "email"]
        );
        assert_eq!(names(&[]), ["age", "color", "email", "name", "subscribe"]);
        assert!(form_fields(&json!({"type": "object"}), &[]).is_empty());
    }

    #[test]
    fn a_multi_select_takes_only_its_choices_within_its_counts() {
        let field = json!({"type": "array", "minItems": 1, "maxItems": 2,
            "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b"}, {"const": "c"}]}});
        assert!(check_value("f", &field, &json!(["a", "c"])).is_ok());
        assert_eq!(
            check_value("f", &field, &json!([])),
            Err(fault("f", "must have at least 1 choices"))
        );
        assert_eq!(
            check_value("f", &field, &json!(["a", "b", "c"])),
            Err(fault("f", "must have at most 2 choices"))
        );
        assert_eq!(
            check_value("f", &field, &json!(["d"])),
            Err(fault("f", "\"d\" is not one of the choices"))
        );
        assert_eq!(
            check_value("f", &field, &json!("a")),
            Err(fault("f", "must be a list"))
        );
    }

    #[test]
    fn dates_and_uris_are_checked_for_shape() {
        assert!(check_format("d", "date", "2026-07-28").is_ok());
        assert!(check_format("d", "date", "2026-13-01").is_err());
        assert!(check_format("d", "date-time", "2026-07-28T10:00:00Z").is_ok());
        assert!(check_format("u", "uri", "https://example.com").is_ok());
        assert!(check_format("u", "uri", "not a uri").is_err());
    }
}
