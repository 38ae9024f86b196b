use std::path::PathBuf;

use buddy_core::{BoxFuture, Skill, SkillContext, SkillError};
use serde_json::{Value, json};

use super::{FileLimits, failed, looks_binary, str_arg};
use crate::sandbox::Sandbox;

/// Longest matching line quoted in a result.
const MAX_LINE_CHARS: usize = 200;

/// Substring search across the text files under a directory of the sandbox.
pub struct SearchFiles {
    pub sandbox: Sandbox,
    pub limits: FileLimits,
}

impl Skill for SearchFiles {
    fn name(&self) -> &str {
        "search_files"
    }

    fn description(&self) -> &str {
        "Find lines containing a text (substring, not regex) in the workspace's text files. Returns path:line: text."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "path": {"type": "string", "description": "Directory to search, relative to the workspace; default `.`."},
                "ignore_case": {"type": "boolean", "default": false}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let query = str_arg(&args, "query").to_owned();
            let requested = args
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or(".")
                .to_owned();
            let ignore_case = args
                .get("ignore_case")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let start = self.sandbox.resolve(&requested).map_err(failed)?;
            let sandbox = self.sandbox.clone();
            let limits = self.limits;
            tokio::task::spawn_blocking(move || {
                search(&sandbox, start, &query, ignore_case, limits)
            })
            .await
            .map_err(failed)?
        })
    }
}

fn search(
    sandbox: &Sandbox,
    start: PathBuf,
    query: &str,
    ignore_case: bool,
    limits: FileLimits,
) -> Result<String, SkillError> {
    let needle = if ignore_case {
        query.to_lowercase()
    } else {
        query.to_owned()
    };
    let mut matches = Vec::new();
    let mut more = false;
    let mut skipped_large = 0usize;
    let mut stack = vec![start];
    'walk: while let Some(path) = stack.pop() {
        // Symlinks are never followed: they could lead out of the sandbox.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            let Ok(read) = std::fs::read_dir(&path) else {
                continue;
            };
            let mut children: Vec<PathBuf> =
                read.filter_map(|e| e.ok().map(|e| e.path())).collect();
            children.sort_by(|a, b| b.cmp(a));
            stack.extend(children);
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        if meta.len() > limits.max_file_bytes {
            skipped_large += 1;
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if looks_binary(&bytes) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            let hit = if ignore_case {
                line.to_lowercase().contains(&needle)
            } else {
                line.contains(&needle)
            };
            if !hit {
                continue;
            }
            if matches.len() == limits.max_matches {
                more = true;
                break 'walk;
            }
            let quoted: String = line.trim().chars().take(MAX_LINE_CHARS).collect();
            matches.push(format!("{}:{}: {quoted}", sandbox.display(&path), i + 1));
        }
    }
    let mut out = if matches.is_empty() {
        format!("no matches for `{query}`")
    } else {
        matches.join("\n")
    };
    if more {
        out.push_str(&format!(
            "\n[truncated: showing the first {} matches; search a subdirectory or a longer text]",
            limits.max_matches
        ));
    }
    if skipped_large > 0 {
        out.push_str(&format!(
            "\n[{skipped_large} file(s) over {} bytes were not searched]",
            limits.max_file_bytes
        ));
    }
    Ok(out)
}
