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

use crate::output_cap::cap_text;
use crate::process_tree::{RUN_TAG_VAR, TreeKiller, kill_group, new_tag};

/// Most bytes of stdout kept (the result is capped again by the registry).
const MAX_STDOUT_BYTES: usize = 256 * 1024;
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
        Ok(CommandSkill { config, cwd })
    }

    /// The environment the command starts with: the baseline and the listed variables
    /// of buddy's own environment, then the declared ones.
    fn environment(&self) -> Vec<(String, String)> {
        clean_environment(&self.config.env_passthrough, &self.config.env)
    }
}

async fn read_capped(mut pipe: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let limit = u64::try_from(cap + 1).unwrap_or(u64::MAX);
    let _ = (&mut pipe).take(limit).read_to_end(&mut buf).await;
    let over = buf.len() > cap;
    buf.truncate(cap);
    (buf, over)
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
            let mut child = tokio::process::Command::new(program)
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
                .process_group(0)
                // A timeout or cancelled turn drops this future: the process must die with it.
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| {
                    SkillError::Failed(format!(
                        "`{name}` could not start `{program}`: {e}; check its `command` in buddy.toml"
                    ))
                })?;
            let pgid = child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .and_then(rustix::process::Pid::from_raw);
            let group = TreeKiller { group: pgid, tag };
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
                    Some(pipe) => read_capped(pipe, MAX_STDOUT_BYTES).await,
                    None => (Vec::new(), false),
                };
                if read.1 {
                    // More than buddy keeps: stop the command rather than wait for it.
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
            let (status, (), (stdout, stdout_over), (stderr, _)) =
                futures::join!(wait, feed, out, err);
            let status = status.map_err(|e| {
                SkillError::Failed(format!("`{name}` could not be waited for: {e}"))
            })?;
            let mut text = String::from_utf8_lossy(&stdout).into_owned();
            if stdout_over {
                text = cap_text(
                    text + " ",
                    MAX_STDOUT_BYTES,
                    "The command printed more than buddy keeps.",
                );
            }
            if !status.success() && !stdout_over {
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
