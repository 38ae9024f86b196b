//! An MCP tool as a buddy skill.

use std::sync::Arc;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde_json::Value;

use crate::client::source::{McpError, McpSource, McpTool};
use crate::tools::annotations::semantics_of;
use crate::tools::resource_skill::ResourceSkill;

/// Longest output schema written into a tool's description; a longer one is named only.
const OUTPUT_SCHEMA_IN_DESCRIPTION: usize = 2048;

/// One tool of one MCP server, offered to the model as `prefix__tool`.
pub struct McpSkill {
    source: Arc<McpSource>,
    name: String,
    tool: McpTool,
    semantics: RepeatSemantics,
    description: String,
    /// The tool's output schema, compiled (none when it declares none, or one that
    /// cannot be compiled: its results are then passed unchecked).
    output: Option<jsonschema::Validator>,
}

impl McpSkill {
    /// Starts `source` and returns a skill per tool it lists, and `read_resource` when
    /// it offers resources. A tool whose input schema cannot be compiled (a `$ref` to
    /// a network URI: buddy never fetches one) is left out with a warning, and noted
    /// on the source, so the server's other tools still come in.
    pub async fn all(source: Arc<McpSource>) -> Result<Vec<Arc<dyn Skill>>, McpError> {
        let tools = source.start().await?;
        let mut left_out = Vec::new();
        let mut skills: Vec<Arc<dyn Skill>> = Vec::new();
        for tool in tools {
            if let Some(why) = source.unservable(&tool.name) {
                left_out.push((tool.name.clone(), why));
                continue;
            }
            if let Err(e) = jsonschema::validator_for(&tool.input_schema) {
                tracing::warn!(server = %source.config().name, tool = %tool.name, error = %e, "MCP tool left out: its input schema cannot be used");
                left_out.push((
                    tool.name.clone(),
                    format!("its input schema cannot be used: {e}"),
                ));
                continue;
            }
            skills.push(Arc::new(McpSkill::new(Arc::clone(&source), tool)));
        }
        source.set_left_out(left_out);
        match source.list_resources().await {
            Ok(resources) if !resources.is_empty() => {
                let skill = ResourceSkill::new(Arc::clone(&source), &resources);
                if skills.iter().all(|s| s.name() != skill.name()) {
                    skills.push(Arc::new(skill));
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(server = %source.config().name, error = %e, "an MCP server's resources could not be listed; they are not offered")
            }
        }
        Ok(skills)
    }

    /// The skill for `tool` of `source`.
    pub fn new(source: Arc<McpSource>, tool: McpTool) -> Self {
        let config = source.config();
        let semantics = config
            .tools
            .get(&tool.name)
            .and_then(|o| o.semantics)
            .unwrap_or_else(|| semantics_of(tool.annotations.as_ref()));
        let description = describe(&tool);
        let output = tool
            .output_schema
            .as_ref()
            .and_then(|schema| jsonschema::validator_for(schema).ok());
        McpSkill {
            description,
            output,
            name: config.skill_name(&tool.name),
            source,
            tool,
            semantics,
        }
    }

    /// The tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.tool.name
    }
}

/// The tool's description, and what its result holds when it declares an output
/// schema: the model reads `structuredContent` as JSON, so it is told that JSON's shape.
fn describe(tool: &McpTool) -> String {
    let Some(schema) = &tool.output_schema else {
        return tool.description.clone();
    };
    let schema = schema.to_string();
    let shape = if schema.len() <= OUTPUT_SCHEMA_IN_DESCRIPTION {
        format!("Its result is JSON matching this schema: {schema}")
    } else {
        "Its result is JSON (the tool declares an output schema).".to_owned()
    };
    if tool.description.is_empty() {
        shape
    } else {
        format!("{}\n\n{shape}", tool.description)
    }
}

impl Skill for McpSkill {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.tool.input_schema.clone()
    }

    fn semantics(&self) -> RepeatSemantics {
        self.semantics
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        // The source bounds the call itself (and restarts a hung server), and a call the
        // server turns into a task by `task_timeout_secs`; this is a backstop past both.
        let config = self.source.config();
        Some(std::time::Duration::from_secs_f64(
            config.call_timeout_secs + config.task_timeout_secs + 5.0,
        ))
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            self.source
                .call_checked(
                    &self.tool.name,
                    args,
                    ctx.traceparent.as_deref(),
                    self.output.as_ref(),
                    crate::requests::caller::Caller::of(&ctx),
                )
                .await
        })
    }
}
