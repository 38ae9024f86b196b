//! Command skills: tools declared in `buddy.toml` that run a program with the call's
//! arguments as JSON on stdin. Its stdout is the result; a non-zero exit is an error
//! result. This is how users add tools without writing Rust.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::output_cap::cap_text;

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
    /// Extra environment variables for the command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory; default: the sandbox directory.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
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
    /// A command skill; `default_cwd` is used when the declaration names no `cwd`.
    pub fn new(config: CommandSkillConfig, default_cwd: PathBuf) -> Result<Self, String> {
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
        let cwd = config.cwd.clone().unwrap_or(default_cwd);
        Ok(CommandSkill { config, cwd })
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
            let mut child = tokio::process::Command::new(program)
                .args(rest)
                .envs(&self.config.env)
                .env("BUDDY_CALL_ID", &ctx.call_id)
                .env("BUDDY_SKILL", name)
                .current_dir(&self.cwd)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                // A timeout or cancelled turn drops this future: the process must die with it.
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| {
                    SkillError::Failed(format!(
                        "`{name}` could not start `{program}`: {e}; check its `command` in buddy.toml"
                    ))
                })?;
            let input = serde_json::to_vec(&args).unwrap_or_default();
            let stdin = child.stdin.take();
            let stdout = child.stdout.take();
            let stderr = child.stderr.take();
            let feed = async move {
                if let Some(mut stdin) = stdin {
                    // A command that ignores its input may close stdin early; that is fine.
                    let _ = stdin.write_all(&input).await;
                }
            };
            let out = async move {
                match stdout {
                    Some(pipe) => read_capped(pipe, MAX_STDOUT_BYTES).await,
                    None => (Vec::new(), false),
                }
            };
            let err = async move {
                match stderr {
                    Some(pipe) => read_capped(pipe, MAX_STDERR_BYTES).await,
                    None => (Vec::new(), false),
                }
            };
            let ((), (stdout, stdout_over), (stderr, _)) = futures::join!(feed, out, err);
            if stdout_over {
                let _ = child.start_kill();
            }
            let status = child.wait().await.map_err(|e| {
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
