//! Tools a client declares and runs itself: offered to the model beside the server's
//! skills, never run here — a call to one pauses the turn and goes back to the client.

use std::collections::HashSet;
use std::sync::Arc;

use buddy_core::{
    BoxFuture, RepeatSemantics, SkillContext, ToolCall, ToolOutcome, ToolSpec, Toolbox,
};

/// The server's skills plus the client's own tools, which are never run here.
pub(crate) struct WithClientTools {
    inner: Arc<dyn Toolbox>,
    client: HashSet<String>,
    specs: Vec<ToolSpec>,
}

impl Toolbox for WithClientTools {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        if self.client.contains(name) {
            return Some(RepeatSemantics::Effectful);
        }
        self.inner.semantics(name)
    }
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        self.inner.invoke(call, ctx)
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a buddy_core::RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        self.inner.resume(call, task, ctx)
    }
    fn is_external(&self, name: &str) -> bool {
        self.client.contains(name)
    }
    fn is_agent(&self, name: &str) -> bool {
        !self.client.contains(name) && self.inner.is_agent(name)
    }
}

/// The server's `toolbox` plus the client's `declared` tools. A client tool named like
/// one of the server's skills is refused: which of the two a call meant would be a guess.
pub(crate) fn with_client_tools(
    toolbox: Arc<dyn Toolbox>,
    declared: Vec<ToolSpec>,
) -> Result<Arc<dyn Toolbox>, String> {
    if declared.is_empty() {
        return Ok(toolbox);
    }
    let mut specs = toolbox.specs().to_vec();
    let mut client = HashSet::new();
    for tool in declared {
        if specs.iter().any(|s| s.name == tool.name) {
            return Err(format!(
                "the client's tool `{}` has the name of one of this server's skills, which buddy runs itself; rename the client's tool",
                tool.name
            ));
        }
        client.insert(tool.name.clone());
        specs.push(tool);
    }
    Ok(Arc::new(WithClientTools {
        inner: toolbox,
        client,
        specs,
    }))
}
