//! The subcommands, and the flags they share.

mod approve;
mod bench;
mod chat;
mod demo;
mod doctor;
mod drive;
mod elicit;
mod init;
mod judge;
mod mcp;
mod mcp_conformance;
mod mock_server;
mod replay;
mod run;
mod serve;
mod server_flags;
mod signals;
mod store_flags;
mod terminal_line;
mod wiring;

use std::path::PathBuf;

use anyhow::Context;
use buddy_engine::{Flag, LoopPolicy, POLICY_FIELDS, PolicyPatch};
use clap::Args;
use serde_json::Value;

pub use bench::{BenchArgs, bench};
pub use chat::{ChatArgs, chat};
pub use demo::{DemoArgs, demo};
pub use doctor::{DoctorArgs, doctor};
pub use init::{InitArgs, init};
pub use judge::{JudgeArgs, judge};
pub use mcp::{McpArgs, mcp};
pub use mock_server::{MockServerArgs, mock_server};
pub use replay::{ReplayArgs, run as replay};
pub use run::{RunArgs, run};
pub use serve::{ServeArgs, serve};

/// Flags that override the loop policy (after buddy.toml and BUDDY_* variables): one for
/// each field the policy table gives a flag (`--max-model-calls`, `--on-limit`,
/// `--no-loop-detection`, …), and `--policy FIELD=VALUE` for any field.
#[derive(Debug, Default, Clone)]
pub struct PolicyFlags {
    /// (field, value as given) for each table flag that was set, in table order.
    set: Vec<(&'static str, Value)>,
    /// `--policy FIELD=VALUE`, in the order given.
    fields: Vec<String>,
}

/// Id of `--policy`.
const POLICY_ARG: &str = "policy";

impl clap::FromArgMatches for PolicyFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = PolicyFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for field in POLICY_FIELDS {
            let value = match field.flag {
                Flag::None => None,
                Flag::Value { .. } | Flag::Choice { .. } => matches
                    .get_one::<String>(field.name)
                    .map(|raw| json_or_string(raw)),
                Flag::Switch { .. } => matches.get_flag(field.name).then_some(Value::Bool(true)),
                Flag::Negated { .. } => matches.get_flag(field.name).then_some(Value::Bool(false)),
            };
            if let Some(value) = value {
                self.set.retain(|(name, _)| *name != field.name);
                self.set.push((field.name, value));
            }
        }
        if let Some(values) = matches.get_many::<String>(POLICY_ARG) {
            self.fields = values.cloned().collect();
        }
        Ok(())
    }
}

impl clap::Args for PolicyFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction, builder::PossibleValuesParser};
        let mut cmd = cmd;
        for field in POLICY_FIELDS {
            let Some(long) = field.flag.long(field.name) else {
                continue;
            };
            // clap wants 'static names; the table's flags are made once per process.
            let long: &'static str = Box::leak(long.into_boxed_str());
            let arg = Arg::new(field.name).long(long);
            let arg = match field.flag {
                Flag::Value { value_name, help } => arg.value_name(value_name).help(help),
                Flag::Choice {
                    value_name,
                    choices,
                    help,
                } => arg
                    .value_name(value_name)
                    .value_parser(PossibleValuesParser::new(choices.iter().copied()))
                    .help(help),
                Flag::Switch { help } | Flag::Negated { help } => {
                    arg.action(ArgAction::SetTrue).help(help)
                }
                Flag::None => continue,
            };
            cmd = cmd.arg(arg);
        }
        cmd.arg(
            Arg::new(POLICY_ARG)
                .long("policy")
                .value_name("FIELD=VALUE")
                .action(ArgAction::Append)
                .help(
                    "Any policy field, as FIELD=VALUE (repeatable), e.g. --policy poll_patience=8.",
                ),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// A flag's text as JSON when it parses (`8`, `true`, `null`), else as a string.
fn json_or_string(raw: &str) -> Value {
    serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.trim().to_owned()))
}

impl PolicyFlags {
    /// The patch these flags describe, each value checked and named on error.
    pub fn to_patch(&self) -> anyhow::Result<PolicyPatch> {
        let mut patch = PolicyPatch::default();
        for (field, value) in &self.set {
            let flag = LoopPolicy::field(field)
                .and_then(|f| f.flag.long(f.name))
                .unwrap_or_else(|| (*field).to_owned());
            patch
                .set(field, value.clone())
                .with_context(|| format!("--{flag}"))?;
        }
        for field in &self.fields {
            let (key, raw) = field
                .split_once('=')
                .with_context(|| format!("--policy `{field}`: write FIELD=VALUE"))?;
            patch
                .set(key.trim(), json_or_string(raw))
                .with_context(|| format!("--policy `{field}`"))?;
        }
        Ok(patch)
    }
}

/// Which provider a command uses and how to reach it (each overrides buddy.toml).
#[derive(Args, Debug, Clone, Default)]
pub struct ProviderFlags {
    /// Provider: a [providers.NAME] of buddy.toml, or a kind: openai, anthropic, scripted
    /// (default: default_provider in buddy.toml, else the scripted model).
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,
    /// Base URL of an HTTP provider, e.g. http://127.0.0.1:8080/v1 (overrides buddy.toml).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Make plain (non-streaming) requests: for servers that cannot stream tool calls.
    #[arg(long)]
    no_stream: bool,
    /// Send tool_choice "auto" whenever tools are offered (llama-cpp-python ignores tools without it).
    #[arg(long)]
    tool_choice_auto: bool,
    /// Leave out stream_options (for servers that refuse unknown fields).
    #[arg(long)]
    no_stream_options: bool,
    /// Send content "" instead of null on assistant messages that only call tools.
    #[arg(long)]
    assistant_content_empty_string: bool,
    /// The request field of the output limit: max_completion_tokens (OpenAI, Azure OpenAI)
    /// or max_tokens (other compatible servers); default by base URL.
    #[arg(long, value_name = "FIELD", value_parser = parse_output_limit_field)]
    output_limit_field: Option<buddy_providers::OutputLimitField>,
}

/// `--output-limit-field`'s value.
fn parse_output_limit_field(value: &str) -> Result<buddy_providers::OutputLimitField, String> {
    match value {
        "max_tokens" => Ok(buddy_providers::OutputLimitField::MaxTokens),
        "max_completion_tokens" => Ok(buddy_providers::OutputLimitField::MaxCompletionTokens),
        _ => Err("expected max_tokens or max_completion_tokens".to_owned()),
    }
}

/// Flags shared by `run` and `chat`.
#[derive(Args, Debug, Clone)]
pub struct TurnArgs {
    #[command(flatten)]
    target: ProviderFlags,
    /// Scenario for the scripted model: a file, or a built-in scenario by name when no
    /// such file exists (`--scenario ab_cycle`); default: the built-in offline assistant.
    #[arg(long, value_name = "FILE|NAME")]
    scenario: Option<PathBuf>,
    /// Directory the file skills are confined to (default: config, else the current directory).
    #[arg(long, value_name = "DIR")]
    sandbox: Option<PathBuf>,
    /// Model name (required for HTTP providers without a `model` in buddy.toml; also
    /// selects per-model policy patterns).
    #[arg(long)]
    model: Option<String>,
    /// System prompt.
    #[arg(long)]
    system: Option<String>,
    /// Which tool calls wait for your yes, for every skill (default: [approval] in
    /// buddy.toml, else `destructive`). A run with no terminal to ask refuses them.
    #[arg(long, value_enum, value_name = "MODE")]
    approval: Option<ApprovalFlag>,
    #[command(flatten)]
    policy: PolicyFlags,
}

/// `--approval`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ApprovalFlag {
    /// Run every call without asking.
    Never,
    /// Ask about every call.
    Always,
    /// Ask about calls with side effects (write_file, destructive MCP tools).
    Destructive,
}

impl From<ApprovalFlag> for buddy_engine::ApprovalMode {
    fn from(flag: ApprovalFlag) -> Self {
        match flag {
            ApprovalFlag::Never => buddy_engine::ApprovalMode::Never,
            ApprovalFlag::Always => buddy_engine::ApprovalMode::Always,
            ApprovalFlag::Destructive => buddy_engine::ApprovalMode::Destructive,
        }
    }
}

/// Makes glibc serve every allocation of 256 KiB or more from a mapping of its own,
/// unmapped when freed. By default glibc raises that threshold after the first large
/// free (up to 32 MiB), and from then on a turn's megabytes of tool-call arguments come
/// from the heap: their copies stay resident after the turn (`serve`) and each new one
/// adds to the peak (`run`).
#[allow(unsafe_code)]
pub(crate) fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator tunable; it takes plain integers and is
    // called once, before the command allocates anything large.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}
