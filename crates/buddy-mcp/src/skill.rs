//! An MCP tool as a buddy skill.

use std::sync::Arc;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde_json::Value;

use crate::annotations::semantics_of;
use crate::source::{McpError, McpSource, McpTool};

/// One tool of one MCP server, offered to the model as `prefix__tool`.
pub struct McpSkill {
    source: Arc<McpSource>,
    name: String,
    tool: McpTool,
    semantics: RepeatSemantics,
}

impl McpSkill {
    /// Starts `source` and returns a skill per tool it lists.
    pub async fn all(source: Arc<McpSource>) -> Result<Vec<Arc<dyn Skill>>, McpError> {
        let tools = source.start().await?;
        Ok(tools
            .into_iter()
            .map(|tool| Arc::new(McpSkill::new(Arc::clone(&source), tool)) as Arc<dyn Skill>)
            .collect())
    }

    /// The skill for `tool` of `source`.
    pub fn new(source: Arc<McpSource>, tool: McpTool) -> Self {
        let config = source.config();
        let semantics = config
            .tools
            .get(&tool.name)
            .and_then(|o| o.semantics)
            .unwrap_or_else(|| semantics_of(tool.annotations.as_ref()));
        McpSkill {
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

impl Skill for McpSkill {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.tool.description
    }

    fn parameters(&self) -> Value {
        self.tool.input_schema.clone()
    }

    fn semantics(&self) -> RepeatSemantics {
        self.semantics
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        // The source bounds the call itself (and restarts a hung server); this is a
        // backstop a little past that.
        Some(std::time::Duration::from_secs_f64(
            self.source.config().call_timeout_secs + 5.0,
        ))
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            self.source
                .call_traced(&self.tool.name, args, ctx.traceparent.as_deref())
                .await
        })
    }
}
