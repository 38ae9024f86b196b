//! Command skills: tools declared in `buddy.toml` that run a program with the call's
//! arguments as JSON on stdin. Its stdout is the result; a non-zero exit is an error
//! result. This is how users add tools without writing Rust.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::privileges::ChildPrivileges;
use crate::process_tree::{RUN_TAG_VAR, TreeKiller, kill_group, new_tag};

/// Most bytes of stdout kept, its first and last halves (the result is capped again by
/// the registry).
const MAX_STDOUT_BYTES: usize = 256 * 1024;
/// Most bytes of stdout read before the command is stopped as a runaway (only its first
/// and last [`MAX_STDOUT_BYTES`] / 2 are kept while it streams).
const MAX_STDOUT_READ: usize = 8 * 1024 * 1024;
/// Most bytes of stderr quoted in an error result.
const MAX_STDERR_BYTES: usize = 4 * 1024;
/// Timeout when the declaration gives none.
const DEFAULT_TIMEOUT_SECS: f64 = 30.0;

/// One `[[skills.command]]` entry of `buddy.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSkillConfig {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments; default: an object with any properties.
    #[serde(default = "any_object")]
    pub parameters: Value,
    /// Default `observed`: a repeat runs and counts as a loop only if its result is
    /// unchanged. Declare `effectful` for a command that must never run twice, `pure`
    /// for one whose repeats may be answered from the earlier result.
    #[serde(default)]
    pub semantics: RepeatSemantics,
    /// The program and its arguments, e.g. `["python3", "tools/weather.py"]`.
    pub command: Vec<String>,
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// Environment variables set for the command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of buddy's own environment the command may see, beyond the baseline
    /// (`PATH`, `HOME`, `LANG`, `LC_ALL`, `LC_CTYPE`, `TZ`, `TMPDIR`). Nothing else of
    /// buddy's environment (API keys included) reaches a command unless listed here.
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// Working directory, relative to the sandbox directory (default: the sandbox
    /// directory itself); it must stay inside the sandbox.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

/// Variables of buddy's environment every command gets: what programs need to run.
pub const BASELINE_ENV: [&str; 7] = ["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"];

/// The whole environment of a program buddy starts (a command skill, an MCP server):
/// the baseline of buddy's own, the variables `passthrough` names, then `env`. Nothing
/// else of buddy's environment — API keys included — reaches it.
pub fn clean_environment<'a>(
    passthrough: &[String],
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<(String, String)> {
    let passed = |name: &str| BASELINE_ENV.contains(&name) || passthrough.iter().any(|p| p == name);
    let mut vars: Vec<(String, String)> =
        std::env::vars().filter(|(name, _)| passed(name)).collect();
    vars.extend(env.into_iter().map(|(k, v)| (k.clone(), v.clone())));
    vars
}

fn any_object() -> Value {
    serde_json::json!({"type": "object"})
}

/// A skill that runs an external command.
pub struct CommandSkill {
    config: CommandSkillConfig,
    cwd: PathBuf,
    privileges: ChildPrivileges,
}

impl CommandSkill {
    /// A command skill run in `sandbox` (its working directory is the sandbox root, or
    /// the declared `cwd` inside it).
    pub fn new(config: CommandSkillConfig, sandbox: &Path) -> Result<Self, String> {
        if config.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(format!(
                "command skill `{}`: `command` must name a program to run",
                config.name
            ));
        }
        if let Some(t) = config.timeout_secs
            && !(t > 0.0 && t <= 3600.0)
        {
            return Err(format!(
                "command skill `{}`: timeout_secs must be in (0, 3600], got {t}",
                config.name
            ));
        }
        let root = sandbox.canonicalize().map_err(|e| {
            format!(
                "command skill `{}`: the sandbox directory `{}` cannot be used: {e}",
                config.name,
                sandbox.display()
            )
        })?;
        let cwd = match &config.cwd {
            None => root.clone(),
            Some(dir) => {
                let joined = root.join(dir);
                let real = joined.canonicalize().map_err(|e| {
                    format!(
                        "command skill `{}`: cwd `{}` cannot be used: {e}",
                        config.name,
                        dir.display()
                    )
                })?;
                if !real.starts_with(&root) {
                    return Err(format!(
                        "command skill `{}`: cwd `{}` is outside the sandbox `{}`; give a directory inside it",
                        config.name,
                        dir.display(),
                        root.display()
                    ));
                }
                real
            }
        };
        Ok(CommandSkill {
            config,
            cwd,
            privileges: ChildPrivileges::for_run_as(None),
        })
    }

    /// Runs the command with `privileges` (from `[skills] run_as`) instead of the
    /// default: as buddy's user, without capabilities when that is root.
    pub fn with_privileges(mut self, privileges: ChildPrivileges) -> Self {
        self.privileges = privileges;
        self
    }

    /// The environment the command starts with: the baseline and the listed variables
    /// of buddy's own environment, then the declared ones.
    fn environment(&self) -> Vec<(String, String)> {
        clean_environment(&self.config.env_passthrough, &self.config.env)
    }
}

/// Makes `command` start under a call reaper (Linux, see `call_reaper`) and then take
/// `privileges`; says whether it has a reaper.
#[allow(unsafe_code)]
fn start_reaped(command: &mut tokio::process::Command, privileges: ChildPrivileges) -> bool {
    #[cfg(target_os = "linux")]
    {
        let buddy_group = rustix::process::getpgrp().as_raw_nonzero().get();
        // SAFETY: runs in the forked child before exec; `split` and `enter` make only
        // async-signal-safe system calls (see them).
        unsafe {
            command.pre_exec(move || {
                crate::call_reaper::split(buddy_group)?;
                privileges.enter()
            });
        }
        true
    }
    #[cfg(not(target_os = "linux"))]
    {
        privileges.apply(command);
        false
    }
}

/// Reads `pipe` to its end or `cap` bytes, whichever comes first; says whether there was more.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let limit = u64::try_from(cap + 1).unwrap_or(u64::MAX);
    let _ = (&mut pipe).take(limit).read_to_end(&mut buf).await;
    let over = buf.len() > cap;
    buf.truncate(cap);
    (buf, over)
}

/// What a command printed, as buddy keeps it: all of it when it fits in `keep` bytes,
/// else its first and last `keep / 2` bytes (the middle dropped as it streams, so the
/// last lines — where a build or a test run puts its error — survive).
#[derive(Debug, Default, PartialEq, Eq)]
struct Printed {
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Bytes read in all, and newlines among those dropped.
    total: usize,
    dropped_lines: usize,
    /// The command printed more than `limit` bytes and was stopped.
    runaway: bool,
}

impl Printed {
    /// The text the model reads, with a marker where the middle was cut.
    fn text(&self) -> String {
        let head = String::from_utf8_lossy(&self.head);
        let tail = String::from_utf8_lossy(&self.tail);
        let kept = self.head.len() + self.tail.len();
        if kept == self.total && !self.runaway {
            return format!("{head}{tail}");
        }
        let first_line = head.matches('\n').count() + 1;
        let stopped = if self.runaway {
            " The command printed without end and was stopped."
        } else {
            ""
        };
        format!(
            "{head}\n[truncated: {} of {} bytes of output cut here (lines {first_line}-{}); the first {} and \
             the last {} bytes are shown.{stopped} The command printed more than buddy keeps: print less, or \
             write the output to a file and read the part you need.]\n{tail}",
            self.total - kept,
            self.total,
            first_line + self.dropped_lines,
            self.head.len(),
            self.tail.len()
        )
    }
}

/// Reads `pipe` to its end (or `limit` bytes, then stops), keeping its first `keep / 2`
/// bytes and its last bytes up to `keep` in all.
async fn read_head_tail(mut pipe: impl AsyncRead + Unpin, keep: usize, limit: usize) -> Printed {
    let half = keep / 2;
    let room = keep - half;
    let mut printed = Printed::default();
    let mut chunk = vec![0u8; 64 * 1024];
    // Drops the start of the tail so that at most `room` bytes are left, counting lines.
    let trim = |printed: &mut Printed| {
        if printed.tail.len() > room {
            let drop = printed.tail.len() - room;
            printed.dropped_lines += printed.tail[..drop].iter().filter(|b| **b == b'\n').count();
            printed.tail.drain(..drop);
        }
    };
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut bytes = &chunk[..n];
        printed.total += n;
        if printed.head.len() < half {
            let take = bytes.len().min(half - printed.head.len());
            printed.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        printed.tail.extend_from_slice(bytes);
        // Trimmed now and then, not on every read: one copy per `room` bytes read.
        if printed.tail.len() > 2 * room {
            trim(&mut printed);
        }
        if printed.total > limit {
            printed.runaway = true;
            break;
        }
    }
    trim(&mut printed);
    printed
}

impl Skill for CommandSkill {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn description(&self) -> &str {
        &self.config.description
    }

    fn parameters(&self) -> Value {
        self.config.parameters.clone()
    }

    fn semantics(&self) -> RepeatSemantics {
        self.config.semantics
    }

    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs_f64(
            self.config.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
        ))
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let name = &self.config.name;
            let (program, rest) =
                self.config.command.split_first().ok_or_else(|| {
                    SkillError::Failed(format!("`{name}` has no command configured"))
                })?;
            let tag = new_tag();
            let mut command = tokio::process::Command::new(program);
            command
                .args(rest)
                .env_clear()
                .envs(self.environment())
                .env("BUDDY_CALL_ID", &ctx.call_id)
                .env(RUN_TAG_VAR, &tag)
                .env("BUDDY_SKILL", name)
                .current_dir(&self.cwd)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                // Its own process group, so that everything it starts can be killed at once.
                .process_group(0);
            // A timeout or cancelled turn drops this future: the whole tree must die with
            // it. With a reaper, `TreeKiller` tells the reaper (killing it would let the
            // tree escape to init); without, the process is killed.
            let reaped = start_reaped(&mut command, self.privileges);
            command.kill_on_drop(!reaped);
            let mut child = command.spawn().map_err(|e| {
                SkillError::Failed(format!(
                    "`{name}` could not start `{program}`: {e}; check its `command` in buddy.toml"
                ))
            })?;
            let pgid = child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .and_then(rustix::process::Pid::from_raw);
            let reaper = pgid.filter(|_| reaped).and_then(|pid| {
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
            });
            let group = TreeKiller {
                group: pgid,
                tag,
                reaper,
            };
            // The text the model sent (already checked against the schema), shared: long
            // arguments are not encoded a second time.
            let input = if ctx.arguments.trim().is_empty() {
                buddy_core::Arguments::from(serde_json::to_string(&args).unwrap_or_default())
            } else {
                drop(args);
                ctx.arguments.clone()
            };
            let stdin = child.stdin.take();
            let stdout = child.stdout.take();
            let stderr = child.stderr.take();
            let feed = async move {
                if let Some(mut stdin) = stdin {
                    // A command that ignores its input may close stdin early; that is fine.
                    let _ = stdin.write_all(input.as_bytes()).await;
                }
            };
            let out = async move {
                let read = match stdout {
                    Some(pipe) => read_head_tail(pipe, MAX_STDOUT_BYTES, MAX_STDOUT_READ).await,
                    None => Printed::default(),
                };
                if read.runaway {
                    // A runaway printer: stop the command rather than wait for it.
                    kill_group(pgid);
                }
                read
            };
            let err = async move {
                match stderr {
                    Some(pipe) => read_capped(pipe, MAX_STDERR_BYTES).await,
                    None => (Vec::new(), false),
                }
            };
            // When the command itself ends, whatever it left running is killed (in its
            // group or not, see `process_tree`), which also closes the pipes those
            // children held open.
            let wait = async {
                let status = child.wait().await;
                drop(group);
                status
            };
            let (status, (), stdout, (stderr, _)) = futures::join!(wait, feed, out, err);
            let status = status.map_err(|e| {
                SkillError::Failed(format!("`{name}` could not be waited for: {e}"))
            })?;
            let text = stdout.text();
            if !status.success() && !stdout.runaway {
                let code = status
                    .code()
                    .map_or_else(|| "a signal".to_owned(), |c| c.to_string());
                let stderr = String::from_utf8_lossy(&stderr);
                let detail = if stderr.trim().is_empty() {
                    text.trim()
                } else {
                    stderr.trim()
                };
                return Err(SkillError::Failed(format!(
                    "`{name}` failed (exit status {code}): {detail}"
                )));
            }
            Ok(text)
        })
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn long_output_keeps_its_head_and_its_last_lines() {
        let mut out = "warning: unused\n".repeat(40_000);
        out.push_str("error: the build failed at the very end\n");
        let printed = super::read_head_tail(out.as_bytes(), 1000, usize::MAX).await;
        assert_eq!(printed.total, out.len());
        assert_eq!(printed.head.len() + printed.tail.len(), 1000);
        assert!(!printed.runaway);
        let text = printed.text();
        assert!(text.starts_with("warning: unused\n"));
        assert!(
            text.ends_with("error: the build failed at the very end\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "[truncated: {} of {} bytes of output cut here (lines 32-",
                out.len() - 1000,
                out.len()
            )),
            "{text}"
        );
        let short = super::read_head_tail("all of it\n".as_bytes(), 1000, usize::MAX).await;
        assert_eq!(short.text(), "all of it\n");
    }

    #[tokio::test]
    async fn a_runaway_printer_is_cut_at_the_limit() {
        let endless = vec![b'y'; 10_000];
        let printed = super::read_head_tail(&endless[..], 100, 5_000).await;
        assert!(printed.runaway && printed.total > 5_000);
        assert!(
            printed
                .text()
                .contains("printed without end and was stopped")
        );
    }
}
