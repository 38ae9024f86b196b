//! Tools a client declares and runs itself: offered to the model beside the server's
//! skills, never run here — a call to one pauses the turn and goes back to the client.

use std::sync::Arc;

use buddy_core::{ToolSpec, ToolTable, Toolbox};

/// The server's `toolbox` plus the client's `declared` tools, as one table that follows
/// the server's tools when they change (an MCP server's new list). A client tool named
/// like one of the server's skills is refused: which of the two a call meant would be a
/// guess.
pub(crate) fn with_client_tools(
    toolbox: Arc<dyn Toolbox>,
    declared: Vec<ToolSpec>,
) -> Result<Arc<dyn Toolbox>, String> {
    if declared.is_empty() {
        return Ok(toolbox);
    }
    let table = ToolTable::builder()
        .toolbox(Arc::clone(&toolbox))
        .client_tools(declared)
        .build_now()
        .map_err(|clash| match toolbox.semantics(&clash.name) {
            Some(_) => format!(
                "the client's tool `{}` has the name of one of this server's skills, which buddy runs itself; rename the client's tool",
                clash.name
            ),
            None => format!(
                "the client declares two tools named `{}`; give each tool its own name",
                clash.name
            ),
        })?;
    Ok(Arc::new(table))
}
