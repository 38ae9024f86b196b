//! MCP servers as tool sources: each `[[mcp]]` server is started (stdio) or reached
//! (Streamable HTTP), its tools are
//! listed, and each becomes a buddy skill named `server__tool`, with its repeat
//! semantics read from the tool's annotations (overridable per tool). Results become
//! text the model reads; server errors, crashes and hangs become error results, and a
//! dead server is restarted for the next call, a bounded number of times. A server's
//! resources are offered to the model through one `server__read_resource` skill, its
//! prompts to people through `buddy mcp prompt`; the sandbox is offered as its roots.

mod auth;
mod client;
mod config;
mod requests;
mod tools;

pub use auth::{Browser, FileCredentialStore, HeadlessBrowser, OAuthConfig, TerminalBrowser};
pub use client::catalog::{CatalogError, McpPrompt, McpPromptArgument, McpResource};
pub use client::result::result_text;
pub use client::source::health::{LeftOutTool, McpHealth};
pub use client::source::{McpError, McpSource, McpTool, ServerState};
pub use config::import::{ImportError, Imported, SkippedServer, import_mcp_servers, to_toml};
pub use config::roots::{Root, Roots};
pub use config::server::{McpServerConfig, ToolOverride, Transport};
pub use requests::handler::file_uri;
pub use requests::sampling::{Sampler, SamplingUse};
pub use tools::annotations::semantics_of;
pub use tools::resource_skill::ResourceSkill;
pub use tools::skill::McpSkill;
pub use tools::toolbox::{McpToolbox, McpTools, RegistryFactory, ToolboxError};
