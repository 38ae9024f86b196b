use std::ffi::OsString;
use std::os::fd::OwnedFd;

use buddy_core::{BoxFuture, Skill, SkillContext, SkillError};
use serde_json::{Value, json};

use super::{FileLimits, failed, looks_binary, str_arg};
use crate::sandbox::{RelPath, Sandbox};
use rustix::fs::FileType;

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
            let start = RelPath::parse(&requested).map_err(failed)?;
            let sandbox = self.sandbox.clone();
            let limits = self.limits;
            tokio::task::spawn_blocking(move || {
                search(&sandbox, &start, &query, ignore_case, limits)
            })
            .await
            .map_err(failed)?
        })
    }
}

/// One open directory of the walk and the entries of it still to visit.
struct Frame {
    dir: OwnedFd,
    rel: RelPath,
    entries: std::vec::IntoIter<(OsString, FileType)>,
}

/// Deepest directory nesting searched (each level holds one open handle).
const MAX_DEPTH: usize = 64;

fn search(
    sandbox: &Sandbox,
    start: &RelPath,
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
    let mut skipped = Skipped::default();
    let root = sandbox.open_dir(start, "search").map_err(failed)?;
    let first = crate::sandbox::entries(&root).map_err(|e| failed(std::io::Error::from(e)))?;
    // The walk descends by handle and never follows a symlink: every child is opened
    // with O_NOFOLLOW relative to its parent's handle.
    let mut stack = vec![Frame {
        dir: root,
        rel: start.clone(),
        entries: first.into_iter(),
    }];
    'walk: loop {
        let depth = stack.len();
        let Some(frame) = stack.last_mut() else {
            break;
        };
        let Some((name, kind)) = frame.entries.next() else {
            stack.pop();
            continue;
        };
        let rel = frame.rel.join(&name);
        let kind = match kind {
            FileType::Unknown => sandbox
                .stat_in(&frame.dir, &name)
                .map_or(FileType::Unknown, |s| FileType::from_raw_mode(s.st_mode)),
            known => known,
        };
        match kind {
            FileType::Directory => {
                if name == ".git" {
                    continue;
                }
                if depth >= MAX_DEPTH {
                    skipped.deep += 1;
                    continue;
                }
                let Some(dir) = sandbox.child(&frame.dir, &name, true) else {
                    continue;
                };
                let Ok(entries) = crate::sandbox::entries(&dir) else {
                    continue;
                };
                stack.push(Frame {
                    dir,
                    rel,
                    entries: entries.into_iter(),
                });
            }
            FileType::RegularFile => {
                let Some(text) = read_text(sandbox, &frame.dir, &name, limits, &mut skipped) else {
                    continue;
                };
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
                    matches.push(format!("{}:{}: {quoted}", rel.display(), i + 1));
                }
            }
            // Symlinks, FIFOs, sockets and devices are never opened.
            _ => {}
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
    if skipped.large > 0 {
        out.push_str(&format!(
            "\n[{} file(s) over {} bytes were not searched]",
            skipped.large, limits.max_file_bytes
        ));
    }
    if skipped.linked > 0 {
        out.push_str(&format!(
            "\n[{} hard-linked file(s) were not searched: they may be files outside the sandbox]",
            skipped.linked
        ));
    }
    if skipped.deep > 0 {
        out.push_str(&format!(
            "\n[{} directorie(s) nested deeper than {MAX_DEPTH} levels were not searched]",
            skipped.deep
        ));
    }
    Ok(out)
}

/// Files the walk passed over, counted for the note at the end.
#[derive(Default)]
struct Skipped {
    large: usize,
    linked: usize,
    deep: usize,
}

/// A child file's text, opened by handle without following links and read up to the
/// size limit; `None` for anything that is not a small, single-link, text file.
fn read_text(
    sandbox: &Sandbox,
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    limits: FileLimits,
    skipped: &mut Skipped,
) -> Option<String> {
    use std::io::Read;
    let fd = sandbox.child(dir, name, false)?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    if !sandbox.readable(&stat) {
        if crate::sandbox::links(&stat) > 1 {
            skipped.linked += 1;
        }
        return None;
    }
    let max = limits.max_file_bytes;
    if u64::try_from(stat.st_size).unwrap_or(u64::MAX) > max {
        skipped.large += 1;
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > max {
        skipped.large += 1;
        return None;
    }
    if looks_binary(&bytes) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}
