//! `SkillRegistry`: the one place tool calls are looked up, validated and run.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use buddy_core::{
    BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError, ToolCall, ToolOutcome, ToolSpec,
    Toolbox,
};
use futures::FutureExt;
use serde_json::Value;

use crate::output_cap::cap_text;
use crate::quoted_value::{QUOTED_VALUE_CHARS, Quoted, quoted_value};

/// A skill could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("a skill named `{0}` is already registered; skill names must be unique")]
    Duplicate(String),
    #[error("skill name `{0}` is invalid: use 1 to 64 letters, digits, `_` or `-`")]
    InvalidName(String),
    #[error("skill `{name}` has an invalid parameter schema: {message}")]
    InvalidSchema { name: String, message: String },
}

struct Entry {
    skill: Arc<dyn Skill>,
    validator: jsonschema::Validator,
}

/// Default time one skill call may take.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on the text of one tool result.
const DEFAULT_MAX_RESULT_BYTES: usize = 64 * 1024;
/// Most schema violations listed in one error result.
const MAX_LISTED_VIOLATIONS: usize = 5;

/// The skills a turn may use, with a compiled schema validator for each.
pub struct SkillRegistry {
    entries: Vec<Entry>,
    index: HashMap<String, usize, foldhash::fast::RandomState>,
    specs: Vec<ToolSpec>,
    default_timeout: Duration,
    max_result_bytes: usize,
}

impl Default for SkillRegistry {
    fn default() -> Self {
        SkillRegistry {
            entries: Vec::new(),
            index: HashMap::default(),
            specs: Vec::new(),
            default_timeout: DEFAULT_TIMEOUT,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }
}

impl SkillRegistry {
    /// An empty registry (a plain chat: no tools offered).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the timeout for skills that do not declare their own.
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// Sets the cap on one tool result's text.
    pub fn with_max_result_bytes(mut self, max: usize) -> Self {
        self.max_result_bytes = max;
        self
    }

    /// Adds a skill, compiling its schema; refuses duplicates and invalid schemas.
    pub fn register(&mut self, skill: Arc<dyn Skill>) -> Result<(), RegistryError> {
        let name = skill.name().to_owned();
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(RegistryError::InvalidName(name));
        }
        if self.index.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        let spec = skill.spec();
        let validator = jsonschema::validator_for(&spec.parameters).map_err(|e| {
            RegistryError::InvalidSchema {
                name: name.clone(),
                message: e.to_string(),
            }
        })?;
        self.index.insert(name, self.entries.len());
        self.entries.push(Entry { skill, validator });
        self.specs.push(spec);
        Ok(())
    }

    /// Registers every skill in `skills`.
    pub fn register_all(
        &mut self,
        skills: impl IntoIterator<Item = Arc<dyn Skill>>,
    ) -> Result<(), RegistryError> {
        skills.into_iter().try_for_each(|s| self.register(s))
    }

    /// Names of the registered skills, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.specs.iter().map(|s| s.name.as_str()).collect()
    }

    fn unknown_tool(&self, name: &str) -> ToolOutcome {
        let available = if self.specs.is_empty() {
            "none".to_owned()
        } else {
            self.names().join(", ")
        };
        ToolOutcome::error(format!(
            "unknown tool `{name}`. Available tools: {available}. Call one of these by its exact name."
        ))
    }

    fn parse_args(name: &str, raw: &str) -> Result<Value, ToolOutcome> {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        serde_json::from_str(trimmed).map_err(|e| {
            let quoted: String = trimmed.chars().take(QUOTED_VALUE_CHARS).collect();
            ToolOutcome::error(format!(
                "the arguments for `{name}` are not valid JSON ({e}): {quoted}. Send one JSON object that matches \
                 the tool's parameter schema."
            ))
        })
    }

    fn check_schema(entry: &Entry, name: &str, args: &Value) -> Result<(), ToolOutcome> {
        let violations: Vec<String> = entry
            .validator
            .iter_errors(args)
            .take(MAX_LISTED_VIOLATIONS)
            .map(|e| {
                let path = e.instance_path().to_string();
                let at = if path.is_empty() {
                    "(arguments)".to_owned()
                } else {
                    path
                };
                // A large instance is named by its start and size, never rendered whole.
                match quoted_value(e.instance()) {
                    Quoted::Whole => format!("{at}: {e}"),
                    Quoted::Cut(shown) => format!("{at}: {}", e.masked_with(shown)),
                }
            })
            .collect();
        if violations.is_empty() {
            return Ok(());
        }
        Err(ToolOutcome::error(format!(
            "invalid arguments for `{name}`: {}. The parameter schema is: {}",
            violations.join("; "),
            entry.skill.parameters()
        )))
    }
}

/// `args` without its top-level `null` members that `schema` does not require, or
/// `None` when it has none (then nothing is copied: the arguments may be megabytes).
fn without_null_optionals(args: Value, schema: &Value) -> Option<Value> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let droppable = |key: &str, value: &Value| value.is_null() && !required.contains(&key);
    let Value::Object(mut object) = args else {
        return None;
    };
    if !object.iter().any(|(key, value)| droppable(key, value)) {
        return None;
    }
    object.retain(|key, value| !droppable(key, value));
    Some(Value::Object(object))
}

impl Toolbox for SkillRegistry {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.index
            .get(name)
            .and_then(|i| self.entries.get(*i))
            .map(|e| e.skill.semantics())
    }

    fn is_agent(&self, name: &str) -> bool {
        self.index
            .get(name)
            .and_then(|i| self.entries.get(*i))
            .is_some_and(|e| e.skill.is_agent())
    }

    fn invoke<'a>(
        &'a self,
        call: &'a ToolCall,
        mut ctx: SkillContext,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            ctx.arguments = call.arguments.clone();
            let name = call.name.as_str();
            let Some(entry) = self.index.get(name).and_then(|i| self.entries.get(*i)) else {
                return self.unknown_tool(name);
            };
            let args = match Self::parse_args(name, &call.arguments) {
                Ok(args) => args,
                Err(outcome) => return outcome,
            };
            let args = match Self::check_schema(entry, name, &args) {
                Ok(()) => args,
                // A null given for an optional parameter the schema does not let be null
                // means "not given" (OpenAI's strict mode sends one for every optional
                // parameter; MCP's SEP-2243 omits them): left out, the call may fit.
                Err(outcome) => match without_null_optionals(args, &entry.skill.parameters()) {
                    Some(stripped) if Self::check_schema(entry, name, &stripped).is_ok() => {
                        ctx.arguments = stripped.to_string().into();
                        stripped
                    }
                    _ => return outcome,
                },
            };
            let timeout = entry.skill.timeout().unwrap_or(self.default_timeout);
            let run = AssertUnwindSafe(entry.skill.execute(args, ctx)).catch_unwind();
            match tokio::time::timeout(timeout, run).await {
                Err(_) => ToolOutcome::error(format!(
                    "`{name}` timed out after {:.1} s and was stopped. Try smaller input, or answer without it.",
                    timeout.as_secs_f64()
                )),
                Ok(Err(_panic)) => {
                    tracing::error!(skill = name, "skill panicked");
                    ToolOutcome::error(format!(
                        "`{name}` crashed (an internal error in the skill); do not retry it."
                    ))
                }
                Ok(Ok(Err(SkillError::Failed(message)))) => ToolOutcome::error(message),
                Ok(Ok(Err(SkillError::Fatal(message)))) => ToolOutcome {
                    content: message,
                    is_error: true,
                    fatal: true,
                },
                Ok(Ok(Ok(text))) => ToolOutcome::ok(cap_text(
                    text,
                    self.max_result_bytes,
                    "Ask for a smaller part if you need the rest.",
                )),
            }
        })
    }
}
