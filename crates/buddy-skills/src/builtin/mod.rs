//! The built-in skills. The file skills are confined to one [`Sandbox`].

mod get_time;
mod list_dir;
mod read_file;
mod search_files;
mod write_file;

use std::sync::Arc;

use buddy_core::{Skill, SkillError};

pub use get_time::GetTime;
pub use list_dir::ListDir;
pub use read_file::ReadFile;
pub use search_files::SearchFiles;
pub use write_file::WriteFile;

use crate::sandbox::Sandbox;

/// Size limits of the file skills.
#[derive(Clone, Copy, Debug)]
pub struct FileLimits {
    /// Most bytes of file text one `read_file` returns.
    pub max_read_bytes: usize,
    /// Largest file `read_file` or `search_files` will open.
    pub max_file_bytes: u64,
    /// Most bytes one `write_file` may write.
    pub max_write_bytes: usize,
    /// Most entries one `list_dir` lists.
    pub max_entries: usize,
    /// Most matching lines one `search_files` returns.
    pub max_matches: usize,
}

impl Default for FileLimits {
    fn default() -> Self {
        FileLimits {
            max_read_bytes: 64 * 1024,
            max_file_bytes: 8 * 1024 * 1024,
            max_write_bytes: 1024 * 1024,
            max_entries: 500,
            max_matches: 100,
        }
    }
}

/// Names of the built-in skills.
pub const BUILTIN_NAMES: [&str; 5] = [
    "get_time",
    "read_file",
    "write_file",
    "list_dir",
    "search_files",
];

/// Every built-in skill, the file skills confined to `sandbox`.
pub fn builtin_skills(sandbox: &Sandbox, limits: FileLimits) -> Vec<Arc<dyn Skill>> {
    BUILTIN_NAMES
        .iter()
        .filter_map(|name| builtin_skill(name, sandbox, limits))
        .collect()
}

/// One built-in skill by name.
pub fn builtin_skill(name: &str, sandbox: &Sandbox, limits: FileLimits) -> Option<Arc<dyn Skill>> {
    let sandbox = sandbox.clone();
    Some(match name {
        "get_time" => Arc::new(GetTime),
        "read_file" => Arc::new(ReadFile { sandbox, limits }),
        "write_file" => Arc::new(WriteFile { sandbox, limits }),
        "list_dir" => Arc::new(ListDir { sandbox, limits }),
        "search_files" => Arc::new(SearchFiles { sandbox, limits }),
        _ => return None,
    })
}

/// A string argument that the schema already required.
fn str_arg<'a>(args: &'a serde_json::Value, key: &str) -> &'a str {
    args.get(key).and_then(|v| v.as_str()).unwrap_or_default()
}

/// Turns any displayable error into a result the model sees.
fn failed(e: impl std::fmt::Display) -> SkillError {
    SkillError::Failed(e.to_string())
}

/// True when the bytes look binary (a NUL in the first 8 KiB).
fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|b| *b == 0)
}
