use buddy_core::{BoxFuture, Skill, SkillContext, SkillError};
use serde_json::{Value, json};

use super::{FileLimits, failed};
use crate::sandbox::Sandbox;

/// Lists a directory inside the sandbox.
pub struct ListDir {
    pub sandbox: Sandbox,
    pub limits: FileLimits,
}

impl Skill for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }

    fn description(&self) -> &str {
        "List the entries of a directory inside the workspace (default: the workspace root). Directories end with `/`."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Directory relative to the workspace; default `.`."}},
            "additionalProperties": false
        })
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let requested = args.get("path").and_then(Value::as_str).unwrap_or(".");
            let path = self.sandbox.resolve(requested).map_err(failed)?;
            let mut reader = tokio::fs::read_dir(&path)
                .await
                .map_err(|e| failed(format!("cannot list `{requested}`: {e}")))?;
            let mut entries = Vec::new();
            while let Some(entry) = reader.next_entry().await.map_err(failed)? {
                let name = entry.file_name().to_string_lossy().into_owned();
                let line = match entry.file_type().await {
                    Ok(t) if t.is_dir() => format!("{name}/"),
                    Ok(t) if t.is_symlink() => format!("{name}@"),
                    _ => {
                        let size = entry.metadata().await.map(|m| m.len()).unwrap_or(0);
                        format!("{name} ({size} bytes)")
                    }
                };
                entries.push(line);
            }
            entries.sort();
            let total = entries.len();
            if total == 0 {
                return Ok(format!("{} is empty", self.sandbox.display(&path)));
            }
            entries.truncate(self.limits.max_entries);
            let mut out = entries.join("\n");
            if total > self.limits.max_entries {
                out.push_str(&format!(
                    "\n[truncated: showing {} of {total} entries; list a subdirectory to see more]",
                    self.limits.max_entries
                ));
            }
            Ok(out)
        })
    }
}
