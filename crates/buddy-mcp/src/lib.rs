//! MCP servers as tool sources: each `[[mcp]]` server is started (stdio) or reached
//! (Streamable HTTP), its tools are
//! listed, and each becomes a buddy skill named `server__tool`, with its repeat
//! semantics read from the tool's annotations (overridable per tool). Results become
//! text the model reads; server errors, crashes and hangs become error results, and a
//! dead server is restarted for the next call, a bounded number of times. A server's
//! resources are offered to the model through one `server__read_resource` skill, its
//! prompts to people through `buddy mcp prompt`; the sandbox is offered as its roots.

mod annotations;
mod auth;
mod call;
mod caller;
mod catalog;
mod config;
mod elicit;
mod handler;
mod import;
mod progress;
mod resource_skill;
mod result;
mod resume;
mod sampling;
mod skill;
mod source;
mod task;
mod toolbox;

pub use annotations::semantics_of;
pub use auth::{Browser, FileCredentialStore, HeadlessBrowser, OAuthConfig, TerminalBrowser};
pub use catalog::{CatalogError, McpPrompt, McpPromptArgument, McpResource};
pub use config::{McpServerConfig, ToolOverride, Transport};
pub use handler::file_uri;
pub use import::{ImportError, Imported, SkippedServer, import_mcp_servers, to_toml};
pub use resource_skill::ResourceSkill;
pub use result::result_text;
pub use sampling::{Sampler, SamplingUse};
pub use skill::McpSkill;
pub use source::{McpError, McpSource, McpTool, ServerState};
pub use toolbox::{McpToolbox, McpTools, RegistryFactory, ToolboxError};
