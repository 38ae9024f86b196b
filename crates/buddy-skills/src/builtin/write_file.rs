use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde_json::{Value, json};

use super::{FileLimits, failed, str_arg};
use crate::sandbox::{RelPath, Sandbox, SandboxError};

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
            let path = RelPath::parse(requested).map_err(failed)?;
            let sandbox = self.sandbox.clone();
            let bytes = content.as_bytes().to_vec();
            let shown = path.display();
            tokio::task::spawn_blocking(move || write(&sandbox, &path, &bytes, append))
                .await
                .map_err(failed)??;
            let verb = if append { "appended" } else { "wrote" };
            Ok(format!("{verb} {} bytes to {shown}", content.len()))
        })
    }
}

/// Opens the file by handle beneath the root (refusing special and hard-linked files
/// before anything is changed), then truncates unless appending, and writes.
fn write(sandbox: &Sandbox, path: &RelPath, bytes: &[u8], append: bool) -> Result<(), SkillError> {
    use std::io::Write;
    let shown = path.display();
    let opened = sandbox.open_write(path, append).map_err(|e| match e {
        SandboxError::IsDirectory(_) => {
            failed(format!("`{shown}` is a directory; give a file path"))
        }
        other => failed(other),
    })?;
    let mut file = opened.file;
    if !append {
        file.set_len(0)
            .map_err(|e| failed(format!("cannot truncate `{shown}`: {e}")))?;
    }
    file.write_all(bytes)
        .map_err(|e| failed(format!("cannot write `{shown}`: {e}")))?;
    Ok(())
}
