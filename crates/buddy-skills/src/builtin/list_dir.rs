use buddy_core::{BoxFuture, Skill, SkillContext, SkillError};
use serde_json::{Value, json};

use super::{FileLimits, failed};
use crate::sandbox::{RelPath, Sandbox, kind_name};
use rustix::fs::FileType;

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
            let path = RelPath::parse(requested).map_err(failed)?;
            let sandbox = self.sandbox.clone();
            let shown = path.display();
            let mut entries = tokio::task::spawn_blocking(move || list(&sandbox, &path))
                .await
                .map_err(failed)??;
            entries.sort();
            let total = entries.len();
            if total == 0 {
                return Ok(format!("{shown} is empty"));
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

/// One line per entry, read through the directory's handle; nothing is followed.
fn list(sandbox: &Sandbox, path: &RelPath) -> Result<Vec<String>, SkillError> {
    let shown = path.display();
    let dir = sandbox.open_dir(path, "list").map_err(failed)?;
    let names = crate::sandbox::entries(&dir).map_err(|e| {
        failed(format!(
            "cannot list `{shown}`: {}",
            std::io::Error::from(e)
        ))
    })?;
    Ok(names
        .into_iter()
        .map(|(name, _)| {
            let stat = sandbox.stat_in(&dir, &name);
            let name = name.to_string_lossy().into_owned();
            let Some(stat) = stat else {
                return name;
            };
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => format!("{name}/"),
                FileType::Symlink => format!("{name}@"),
                FileType::RegularFile => format!("{name} ({} bytes)", stat.st_size),
                other => format!("{name} ({})", kind_name(other)),
            }
        })
        .collect())
}
