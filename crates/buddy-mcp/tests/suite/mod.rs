//! Real MCP servers (installed, pinned, by scripts/test.sh: `mcp-server-time` from
//! PyPI into target/mcp-venv, the npm servers into clients/mcp/node_modules) and small
//! hostile ones (a server that crashes or hangs mid-call).

mod changes;
mod client_side;
mod elicitation;
mod faults;
mod oauth;
mod progress;
mod roots;
mod sdk_elicitation;
mod servers;
mod tasks_2025;
mod tolerant;
mod turn_progress;

use std::path::PathBuf;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The command of an installed server, or a failure that says how to install it.
pub fn installed(env: &str, path: PathBuf) -> String {
    assert!(
        path.exists(),
        "{} is missing: run scripts/test.sh (or scripts/mcp-servers.sh), which installs the pinned MCP servers, or set {env}",
        path.display()
    );
    path.display().to_string()
}

/// `mcp-server-time` (PyPI).
pub fn time_server() -> String {
    let path = std::env::var_os("BUDDY_MCP_TIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/mcp-venv/bin/mcp-server-time"));
    installed("BUDDY_MCP_TIME", path)
}

/// One of the npm reference servers by its bin name (`mcp-server-everything`…).
pub fn npm_server(bin: &str) -> String {
    let modules = std::env::var_os("BUDDY_MCP_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("clients/mcp/node_modules"));
    installed("BUDDY_MCP_NODE_MODULES", modules.join(".bin").join(bin))
}

/// The Python of the venv `mcp-server-time` is installed in (it has the MCP SDK).
pub fn sdk_python() -> String {
    let server = PathBuf::from(time_server());
    installed("BUDDY_MCP_TIME", server.with_file_name("python"))
}

/// A test server's script under tests/servers.
pub fn test_server(name: &str) -> String {
    repo()
        .join("crates/buddy-mcp/tests/servers")
        .join(name)
        .display()
        .to_string()
}
