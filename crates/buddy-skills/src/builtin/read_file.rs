use buddy_core::{BoxFuture, Skill, SkillContext, SkillError};
use serde_json::{Value, json};

use super::{FileLimits, failed, looks_binary, str_arg};
use crate::output_cap::cap_text;
use crate::sandbox::Sandbox;

/// Reads a text file inside the sandbox, optionally a range of lines.
pub struct ReadFile {
    pub sandbox: Sandbox,
    pub limits: FileLimits,
}

impl Skill for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file inside the workspace. Optional start_line (1-based) and max_lines read a part of it."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "File path relative to the workspace."},
                "start_line": {"type": "integer", "minimum": 1},
                "max_lines": {"type": "integer", "minimum": 1}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let requested = str_arg(&args, "path");
            let path = self.sandbox.resolve(requested).map_err(failed)?;
            let meta = tokio::fs::metadata(&path)
                .await
                .map_err(|e| failed(format!("cannot read `{requested}`: {e}")))?;
            if meta.is_dir() {
                return Err(failed(format!(
                    "`{requested}` is a directory; use list_dir to see what it holds"
                )));
            }
            if meta.len() > self.limits.max_file_bytes {
                return Err(failed(format!(
                    "`{requested}` is {} bytes; read_file opens files up to {} bytes",
                    meta.len(),
                    self.limits.max_file_bytes
                )));
            }
            let bytes = tokio::fs::read(&path)
                .await
                .map_err(|e| failed(format!("cannot read `{requested}`: {e}")))?;
            if looks_binary(&bytes) {
                return Err(failed(format!(
                    "`{requested}` is a binary file ({} bytes); read_file reads text only",
                    bytes.len()
                )));
            }
            let text = String::from_utf8_lossy(&bytes);
            let start = args.get("start_line").and_then(Value::as_u64).unwrap_or(1);
            let max = args.get("max_lines").and_then(Value::as_u64);
            let selected = if start == 1 && max.is_none() {
                text.into_owned()
            } else {
                let skip = usize::try_from(start - 1).unwrap_or(usize::MAX);
                let take = max.map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(usize::MAX));
                let lines: Vec<&str> = text.lines().skip(skip).take(take).collect();
                if lines.is_empty() {
                    return Err(failed(format!(
                        "`{requested}` has {} lines; start_line {start} is past the end",
                        text.lines().count()
                    )));
                }
                lines.join("\n")
            };
            Ok(cap_text(
                selected,
                self.limits.max_read_bytes,
                "Read the rest with start_line and max_lines.",
            ))
        })
    }
}
