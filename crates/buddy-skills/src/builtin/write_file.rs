use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::{FileLimits, failed, str_arg};
use crate::sandbox::Sandbox;

/// Writes (or appends to) a text file inside the sandbox, creating parent directories.
pub struct WriteFile {
    pub sandbox: Sandbox,
    pub limits: FileLimits,
}

impl Skill for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Write text to a file inside the workspace, replacing it (or appending when append is true). Creates parent directories."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "File path relative to the workspace."},
                "content": {"type": "string"},
                "append": {"type": "boolean", "default": false}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    fn semantics(&self) -> RepeatSemantics {
        RepeatSemantics::Effectful
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let requested = str_arg(&args, "path");
            let content = str_arg(&args, "content");
            let append = args.get("append").and_then(Value::as_bool).unwrap_or(false);
            if content.len() > self.limits.max_write_bytes {
                return Err(failed(format!(
                    "content is {} bytes; write_file writes at most {} bytes per call",
                    content.len(),
                    self.limits.max_write_bytes
                )));
            }
            let path = self.sandbox.resolve(requested).map_err(failed)?;
            if path == self.sandbox.root()
                || tokio::fs::metadata(&path).await.is_ok_and(|m| m.is_dir())
            {
                return Err(failed(format!(
                    "`{requested}` is a directory; give a file path"
                )));
            }
            if let Some(parent) = path.parent() {
                tokio::fs::create_dir_all(parent).await.map_err(|e| {
                    failed(format!(
                        "cannot create the directory for `{requested}`: {e}"
                    ))
                })?;
            }
            let mut file = tokio::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(&path)
                .await
                .map_err(|e| failed(format!("cannot open `{requested}` for writing: {e}")))?;
            file.write_all(content.as_bytes())
                .await
                .map_err(|e| failed(format!("cannot write `{requested}`: {e}")))?;
            file.flush().await.map_err(failed)?;
            let verb = if append { "appended" } else { "wrote" };
            Ok(format!(
                "{verb} {} bytes to {}",
                content.len(),
                self.sandbox.display(&path)
            ))
        })
    }
}
