//! Asking the person at the terminal a tool's question (an MCP server's elicitation):
//! the form field by field in the order the server wrote it (title, description,
//! required mark, numbered choices, default), each answer checked at once and only that
//! field asked again when it does not fit; Enter takes a field's default.

use buddy_core::{ElicitationAnswer, ElicitationRequest, check_value, enum_values, form_fields};
use buddy_engine::{AnswerError, ElicitationDesk};
use serde_json::{Map, Value};

use super::terminal_line::ask;

/// Puts question `id` to the person until the desk takes an answer. End of input
/// declines; the question stops waiting (answering nothing) once `stop` says so (Ctrl-C)
/// or the question closed otherwise (its timeout, the turn's end).
pub fn answer(
    desk: &ElicitationDesk,
    id: &str,
    request: &ElicitationRequest,
    stop: &dyn Fn() -> bool,
) {
    eprintln!(
        "\nMCP server `{}` asks: {}",
        request.server, request.message
    );
    let give_up = || stop() || !desk.is_open(id);
    loop {
        let answer = fill(request, &give_up);
        if give_up() {
            eprintln!();
            return;
        }
        match desk.answer(id, answer) {
            Ok(()) => return,
            Err(AnswerError::Invalid(e)) => eprintln!("That does not fit the form: {e}. Again:"),
            // Answered by its timeout or a cancelled turn meanwhile: nothing to do.
            Err(_) => return,
        }
    }
}

/// One pass over the form: accept with the fields filled in, decline or cancel.
fn fill(request: &ElicitationRequest, give_up: &dyn Fn() -> bool) -> ElicitationAnswer {
    loop {
        let Some(choice) = ask("[a]nswer / [d]ecline / [c]ancel: ", give_up) else {
            return ElicitationAnswer::Decline;
        };
        match choice.trim().to_lowercase().as_str() {
            "a" | "answer" => break,
            "d" | "decline" => return ElicitationAnswer::Decline,
            "c" | "cancel" => return ElicitationAnswer::Cancel,
            _ => eprintln!("Answer a, d or c."),
        }
    }
    let required: Vec<&str> = request
        .schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, field) in form_fields(&request.schema, &request.order) {
        let must = required.contains(&name);
        eprintln!("{}", label(name, field, must));
        match ask_field(name, field, must, give_up) {
            Asked::Value(value) => {
                content.insert(name.to_owned(), value);
            }
            Asked::Skipped => {}
            Asked::Gone => return ElicitationAnswer::Decline,
        }
    }
    ElicitationAnswer::Accept { content }
}

/// What asking one field came to.
enum Asked {
    /// A value that fits the field.
    Value(Value),
    /// An optional field without a default left empty.
    Skipped,
    /// End of input, or the question was given up.
    Gone,
}

/// Asks field `name` until its answer fits: an empty line takes its default (or skips
/// an optional field); a misfit is said and only this field asked again.
fn ask_field(name: &str, field: &Value, must: bool, give_up: &dyn Fn() -> bool) -> Asked {
    loop {
        let Some(text) = ask("> ", give_up) else {
            return Asked::Gone;
        };
        let text = text.trim();
        let value = match (text.is_empty(), field.get("default")) {
            (true, Some(default)) => default.clone(),
            (true, None) if must => {
                eprintln!("This field is required; again:");
                continue;
            }
            (true, None) => return Asked::Skipped,
            (false, _) => match parse(field, text) {
                Ok(value) => value,
                Err(problem) => {
                    eprintln!("{problem}; again:");
                    continue;
                }
            },
        };
        match check_value(name, field, &value) {
            Ok(()) => return Asked::Value(value),
            Err(e) => eprintln!("{}: {}; again:", title(name, field), e.problem),
        }
    }
}

/// A field's title, or its name.
fn title<'a>(name: &'a str, field: &'a Value) -> &'a str {
    field.get("title").and_then(Value::as_str).unwrap_or(name)
}

/// The field's choices with the words shown for each: a single choice's (`enum`,
/// `oneOf` / `anyOf` of `const`), or a multi-select's (`items`).
fn choices(field: &Value) -> Option<Vec<(Value, String)>> {
    let (values, options) = match enum_values(field) {
        Some(values) => (values, field),
        None => {
            let items = field.get("items")?;
            (enum_values(items)?, items)
        }
    };
    let titles: Vec<Option<String>> = match options.get("enumNames").and_then(Value::as_array) {
        Some(names) => names
            .iter()
            .map(|n| n.as_str().map(str::to_owned))
            .collect(),
        None => options
            .get("oneOf")
            .or_else(|| options.get("anyOf"))
            .and_then(Value::as_array)
            .map(|o| {
                o.iter()
                    .filter(|o| o.get("const").is_some())
                    .map(|o| o.get("title").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    };
    Some(
        values
            .into_iter()
            .enumerate()
            .map(|(i, value)| {
                let shown = titles
                    .get(i)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| plain(&value));
                (value, shown)
            })
            .collect(),
    )
}

fn kind(field: &Value) -> &str {
    field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string")
}

/// The line that introduces a field: its title (or name), a `*` when required, its
/// description, numbered choices (several for a multi-select) and default.
fn label(name: &str, field: &Value, required: bool) -> String {
    let mut line = format!("{}{}", title(name, field), if required { " *" } else { "" });
    if let Some(description) = field.get("description").and_then(Value::as_str) {
        line.push_str(&format!(" — {description}"));
    }
    let kind = kind(field);
    if let Some(choices) = choices(field) {
        let numbered: Vec<String> = choices
            .iter()
            .enumerate()
            .map(|(i, (_, shown))| format!("{} {shown}", i + 1))
            .collect();
        line.push_str(&format!(" [{}]", numbered.join(" / ")));
        if kind == "array" {
            line.push_str(" (any of them: numbers or names, comma-separated)");
        }
    } else if kind == "boolean" {
        line.push_str(" [y/n]");
    } else if kind != "string" {
        line.push_str(&format!(" ({kind})"));
    }
    if let Some(default) = field.get("default") {
        let shown = match default {
            Value::Bool(true) => "y".to_owned(),
            Value::Bool(false) => "n".to_owned(),
            Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(", "),
            other => plain(other),
        };
        line.push_str(&format!(" (Enter: {shown})"));
    }
    line
}

/// A JSON value as a person writes it (strings without quotes).
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The choice a typed word names: its number in the list (from 1), its value or its
/// shown words (either case).
fn pick(choices: &[(Value, String)], word: &str) -> Result<Value, String> {
    if let Ok(n) = word.parse::<usize>()
        && let Some((value, _)) = n.checked_sub(1).and_then(|i| choices.get(i))
    {
        return Ok(value.clone());
    }
    choices
        .iter()
        .find(|(value, shown)| {
            plain(value).eq_ignore_ascii_case(word) || shown.eq_ignore_ascii_case(word)
        })
        .map(|(value, _)| value.clone())
        .ok_or_else(|| {
            format!(
                "`{word}` is not one of the choices (1 to {})",
                choices.len()
            )
        })
}

/// A typed line as the field's value (a choice by number or name); the field's own
/// check ([`check_value`]) does the rest.
fn parse(field: &Value, text: &str) -> Result<Value, String> {
    let kind = kind(field);
    if let Some(choices) = choices(field) {
        if kind == "array" {
            return text
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(|w| pick(&choices, w))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array);
        }
        if kind == "string" {
            return pick(&choices, text);
        }
    }
    match kind {
        "integer" => text
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "a whole number, please".to_owned()),
        "number" => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| "a number, please".to_owned()),
        "boolean" => match text.to_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("y or n, please".to_owned()),
        },
        "array" => Ok(Value::Array(
            text.split(',')
                .map(|s| Value::String(s.trim().to_owned()))
                .filter(|v| v.as_str() != Some(""))
                .collect(),
        )),
        _ => Ok(Value::String(text.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_become_values_of_the_fields_type() {
        assert_eq!(parse(&json!({"type": "integer"}), "36"), Ok(json!(36)));
        assert!(parse(&json!({"type": "integer"}), "3.5").is_err());
        assert_eq!(parse(&json!({"type": "number"}), "3.5"), Ok(json!(3.5)));
        assert_eq!(parse(&json!({"type": "boolean"}), "Y"), Ok(json!(true)));
        assert!(parse(&json!({"type": "boolean"}), "maybe").is_err());
        assert_eq!(parse(&json!({"type": "string"}), "Ada"), Ok(json!("Ada")));
        assert_eq!(
            parse(&json!({"type": "array"}), "red, green"),
            Ok(json!(["red", "green"]))
        );
    }

    #[test]
    fn choices_are_picked_by_number_or_name() {
        let plan = json!({"type": "string", "enum": ["basic", "pro"]});
        assert_eq!(parse(&plan, "2"), Ok(json!("pro")));
        assert_eq!(parse(&plan, "Basic"), Ok(json!("basic")));
        assert_eq!(
            parse(&plan, "3"),
            Err("`3` is not one of the choices (1 to 2)".to_owned())
        );
        let topics = json!({"type": "array",
            "items": {"anyOf": [{"const": "news", "title": "News"}, {"const": "offers", "title": "Offers"}]}});
        assert_eq!(parse(&topics, "2, news"), Ok(json!(["offers", "news"])));
        assert_eq!(parse(&topics, "OFFERS"), Ok(json!(["offers"])));
        assert_eq!(parse(&topics, ""), Ok(json!([])));
        assert!(parse(&topics, "1, sport").is_err());
        let legacy = json!({"type": "array", "items": {"enum": ["a", "b"]}});
        assert_eq!(parse(&legacy, "1,2"), Ok(json!(["a", "b"])));
    }

    #[test]
    fn a_field_is_introduced_with_what_it_takes() {
        let color = json!({"type": "string", "title": "Colour", "description": "for the card",
                           "enum": ["red", "green"], "default": "red"});
        assert_eq!(
            label("color", &color, true),
            "Colour * — for the card [1 red / 2 green] (Enter: red)"
        );
        let topics = json!({"type": "array", "title": "Topics", "default": ["news"],
            "items": {"anyOf": [{"const": "news", "title": "News"}, {"const": "offers", "title": "Offers"}]}});
        assert_eq!(
            label("topics", &topics, false),
            "Topics [1 News / 2 Offers] (any of them: numbers or names, comma-separated) (Enter: news)"
        );
        assert_eq!(
            label("ok", &json!({"type": "boolean", "default": false}), false),
            "ok [y/n] (Enter: n)"
        );
        assert_eq!(label("ok", &json!({"type": "boolean"}), false), "ok [y/n]");
        assert_eq!(
            label("n", &json!({"type": "integer"}), false),
            "n (integer)"
        );
    }
}
