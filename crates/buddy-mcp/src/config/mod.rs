//! A server's `[[mcp]]` entry, and entries imported from other tools' configuration.

pub(crate) mod import;
pub(crate) mod roots;
pub(crate) mod server;
