use buddy_core::{BoxFuture, Skill, SkillContext, SkillError};
use serde_json::{Value, json};

use super::{FileLimits, failed, looks_binary, str_arg};
use crate::output_cap::cap_text;
use crate::sandbox::{RelPath, Sandbox, SandboxError};

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
            let path = RelPath::parse(requested).map_err(failed)?;
            let sandbox = self.sandbox.clone();
            let max = self.limits.max_file_bytes;
            let bytes = tokio::task::spawn_blocking(move || read_bounded(&sandbox, &path, max))
                .await
                .map_err(failed)??;
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
                "Read the lines cut with start_line and max_lines.",
            ))
        })
    }
}

/// The whole file, opened by handle and read up to `max` bytes (a file that grows past
/// `max` while it is read is refused like one that was already too large).
fn read_bounded(sandbox: &Sandbox, path: &RelPath, max: u64) -> Result<Vec<u8>, SkillError> {
    use std::io::Read;
    let shown = path.display();
    let opened = sandbox.open_read(path, "read").map_err(|e| match e {
        SandboxError::IsDirectory(_) => failed(format!(
            "`{shown}` is a directory; use list_dir to see what it holds"
        )),
        other => failed(other),
    })?;
    let too_large = |len: u64| {
        failed(format!(
            "`{shown}` is {len} bytes; read_file opens files up to {max} bytes"
        ))
    };
    if opened.len > max {
        return Err(too_large(opened.len));
    }
    let mut bytes = Vec::new();
    opened
        .file
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| failed(format!("cannot read `{shown}`: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}
