//! A server's resources as one skill, `server__read_resource`: its description lists
//! the resources the server offers, so the model can read the one it needs by URI.

use std::sync::Arc;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde_json::{Value, json};

use crate::client::catalog::McpResource;
use crate::client::source::McpSource;

/// Resources named in the skill's description; the rest are counted.
const LISTED_IN_DESCRIPTION: usize = 30;

/// Reads a resource of one MCP server by URI.
pub struct ResourceSkill {
    source: Arc<McpSource>,
    name: String,
    description: String,
}

impl ResourceSkill {
    /// The skill for `source`, whose resources are `resources` (not empty).
    pub fn new(source: Arc<McpSource>, resources: &[McpResource]) -> Self {
        let config = source.config();
        let mut description = format!(
            "Reads a resource of the MCP server `{}` by its URI and returns its text. Its resources:",
            config.name
        );
        for resource in resources.iter().take(LISTED_IN_DESCRIPTION) {
            description.push_str(&format!("\n- {}", resource.uri));
            if !resource.name.is_empty() {
                description.push_str(&format!(" ({})", resource.name));
            }
            if !resource.description.is_empty() {
                description.push_str(&format!(": {}", resource.description));
            }
        }
        if resources.len() > LISTED_IN_DESCRIPTION {
            description.push_str(&format!(
                "\n… and {} more",
                resources.len() - LISTED_IN_DESCRIPTION
            ));
        }
        ResourceSkill {
            name: config.skill_name("read_resource"),
            source,
            description,
        }
    }
}

impl Skill for ResourceSkill {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI, as listed"}},
            "required": ["uri"],
            "additionalProperties": false
        })
    }

    fn semantics(&self) -> RepeatSemantics {
        // A resource may change between reads: a repeat is judged by its result.
        RepeatSemantics::Observed
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs_f64(
            self.source.config().call_timeout_secs + 5.0,
        ))
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let uri = args.get("uri").and_then(Value::as_str).unwrap_or_default();
            self.source
                .read_resource(uri)
                .await
                .map_err(|e| SkillError::Failed(e.to_string()))
        })
    }
}
