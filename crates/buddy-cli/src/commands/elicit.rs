//! Asking the person at the terminal a tool's question (an MCP server's elicitation):
//! the form field by field (title, description, required mark, choices, default), then
//! the answer checked against the form; a misfit is said and the form asked again.

use buddy_core::{ElicitationAnswer, enum_values};
use buddy_engine::{AnswerError, ElicitationDesk};
use serde_json::{Map, Value};

use super::terminal_line::ask;

/// Puts question `id` to the person until the desk takes an answer. End of input
/// declines; the question stops waiting (answering nothing) once `stop` says so (Ctrl-C)
/// or the question closed otherwise (its timeout, the turn's end).
pub fn answer(
    desk: &ElicitationDesk,
    id: &str,
    server: &str,
    message: &str,
    schema: &Value,
    stop: &dyn Fn() -> bool,
) {
    eprintln!("\nMCP server `{server}` asks: {message}");
    let give_up = || stop() || !desk.is_open(id);
    loop {
        let answer = fill(schema, &give_up);
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
fn fill(schema: &Value, give_up: &dyn Fn() -> bool) -> ElicitationAnswer {
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
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, field) in properties {
        let must = required.contains(&name.as_str());
        eprintln!("{}", label(name, field, must));
        loop {
            let Some(text) = ask("> ", give_up) else {
                return ElicitationAnswer::Decline;
            };
            if text.trim().is_empty() {
                if must && field.get("default").is_none() {
                    eprintln!("This field is required.");
                    continue;
                }
                break;
            }
            match parse(field, text.trim()) {
                Ok(value) => {
                    content.insert(name.clone(), value);
                    break;
                }
                Err(problem) => eprintln!("{problem}; again:"),
            }
        }
    }
    ElicitationAnswer::Accept { content }
}

/// The line that introduces a field: its title (or name), a `*` when required, its
/// description, choices and default.
fn label(name: &str, field: &Value, required: bool) -> String {
    let title = field.get("title").and_then(Value::as_str).unwrap_or(name);
    let mut line = format!("{title}{}", if required { " *" } else { "" });
    if let Some(description) = field.get("description").and_then(Value::as_str) {
        line.push_str(&format!(" — {description}"));
    }
    let kind = field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    if let Some(choices) = enum_values(field).or_else(|| field.get("items").and_then(enum_values)) {
        let names: Vec<String> = choices.iter().map(plain).collect();
        let several = if kind == "array" {
            " (several, comma-separated)"
        } else {
            ""
        };
        line.push_str(&format!(" [{}]{several}", names.join(" / ")));
    } else if kind == "boolean" {
        line.push_str(" [y/n]");
    } else if kind != "string" {
        line.push_str(&format!(" ({kind})"));
    }
    if let Some(default) = field.get("default") {
        line.push_str(&format!(" (Enter: {})", plain(default)));
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

/// A typed line as the field's value; the form check (on the desk) does the rest.
fn parse(field: &Value, text: &str) -> Result<Value, String> {
    match field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string")
    {
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
    fn a_field_is_introduced_with_what_it_takes() {
        let color = json!({"type": "string", "title": "Colour", "description": "for the card",
                           "enum": ["red", "green"], "default": "red"});
        assert_eq!(
            label("color", &color, true),
            "Colour * — for the card [red / green] (Enter: red)"
        );
        assert_eq!(label("ok", &json!({"type": "boolean"}), false), "ok [y/n]");
        assert_eq!(
            label("n", &json!({"type": "integer"}), false),
            "n (integer)"
        );
    }
}
