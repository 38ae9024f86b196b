//! MCP servers as tool sources: each `[[mcp]]` server is started (stdio) or reached
//! (Streamable HTTP), its tools are
//! listed, and each becomes a buddy skill named `server__tool`, with its repeat
//! semantics read from the tool's annotations (overridable per tool). Results become
//! text the model reads; server errors, crashes and hangs become error results, and a
//! dead server is restarted for the next call, a bounded number of times.

mod annotations;
mod config;
mod import;
mod result;
mod skill;
mod source;
mod toolbox;

pub use annotations::semantics_of;
pub use config::{McpServerConfig, ToolOverride, Transport};
pub use import::{ImportError, Imported, SkippedServer, import_mcp_servers, to_toml};
pub use result::result_text;
pub use skill::McpSkill;
pub use source::{McpError, McpSource, McpTool, ServerState};
pub use toolbox::{McpToolbox, RegistryFactory, ToolboxError};
