//! How a model samples and shapes its output, as a client asked: sent to the provider on
//! each model call of the turn. A provider refuses what it cannot honour — never drops it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Sampling and output settings for a turn's model calls. All unset: the provider's defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// The most tokens one reply may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Sequences that end the reply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// The shape the answer must have (structured output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
}

/// The shape a model's answer must have.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Free text (the default).
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON valid against `schema`.
    JsonSchema {
        name: String,
        schema: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

/// The most stop sequences a request may give (OpenAI's limit).
pub const MAX_STOP_SEQUENCES: usize = 4;

impl Sampling {
    /// True when nothing is set (the provider's defaults).
    pub fn is_default(&self) -> bool {
        self == &Sampling::default()
    }

    /// The settings that are set, by their wire names (`temperature`, `response_format`, …).
    pub fn set_fields(&self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        let checks = [
            (self.temperature.is_some(), "temperature"),
            (self.top_p.is_some(), "top_p"),
            (self.max_output_tokens.is_some(), "max_output_tokens"),
            (self.seed.is_some(), "seed"),
            (!self.stop.is_empty(), "stop"),
            (self.response_format.is_some(), "response_format"),
        ];
        for (set, name) in checks {
            if set {
                fields.push(name);
            }
        }
        fields
    }

    /// What is out of range, by field, in words a client can act on.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(format!("temperature = {t} must be between 0 and 2"));
        }
        if let Some(p) = self.top_p
            && !(p > 0.0 && p <= 1.0)
        {
            return Err(format!("top_p = {p} must be above 0 and at most 1"));
        }
        if self.max_output_tokens == Some(0) {
            return Err("max_output_tokens must be at least 1".into());
        }
        if self.stop.len() > MAX_STOP_SEQUENCES {
            return Err(format!(
                "stop has {} sequences; at most {MAX_STOP_SEQUENCES} are allowed",
                self.stop.len()
            ));
        }
        if self.stop.iter().any(String::is_empty) {
            return Err("stop sequences must not be empty".into());
        }
        if let Some(ResponseFormat::JsonSchema { name, schema, .. }) = &self.response_format {
            if name.is_empty() || name.len() > 64 {
                return Err(
                    "response_format: a json_schema needs a `name` of 1 to 64 characters".into(),
                );
            }
            if !schema.is_object() {
                return Err("response_format: `schema` must be a JSON Schema object".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_read_from_json_and_bad_ones_are_named() {
        let s: Sampling = serde_json::from_value(json!({
            "temperature": 0.2, "stop": ["END"],
            "response_format": {"type": "json_schema", "name": "person",
                                "schema": {"type": "object"}, "strict": true}
        }))
        .unwrap();
        assert_eq!(s.set_fields(), ["temperature", "stop", "response_format"]);
        assert!(s.validate().is_ok());
        assert!(Sampling::default().is_default());
        let hot = Sampling {
            temperature: Some(3.0),
            ..Sampling::default()
        };
        assert!(hot.validate().unwrap_err().contains("temperature = 3"));
        let many = Sampling {
            stop: vec!["a".into(); 5],
            ..Sampling::default()
        };
        assert!(many.validate().unwrap_err().contains("at most 4"));
        assert!(serde_json::from_value::<Sampling>(json!({"temprature": 1})).is_err());
    }
}
