//! The subcommands, and the flags they share.

mod approve;
mod bench;
mod chat;
mod demo;
mod doctor;
mod mcp;
mod run;
mod serve;
mod setup;

use std::path::PathBuf;

use anyhow::Context;
use buddy_engine::{OnLimit, PolicyPatch};
use clap::Args;
use serde_json::Value;

pub use bench::{BenchArgs, MockServerArgs, bench, mock_server};
pub use chat::{ChatArgs, chat};
pub use demo::{DemoArgs, demo};
pub use doctor::{DoctorArgs, doctor};
pub use mcp::{McpArgs, mcp};
pub use run::{RunArgs, run};
pub use serve::{ServeArgs, serve};

/// Flags that override the loop policy (after buddy.toml and BUDDY_* variables).
#[derive(Args, Debug, Default, Clone)]
pub struct PolicyFlags {
    /// Model calls per turn, the last reserved for the answer.
    #[arg(long, value_name = "N")]
    max_model_calls: Option<u32>,
    /// Tool calls per turn.
    #[arg(long, value_name = "N")]
    max_tool_calls: Option<u32>,
    /// Calls of any one skill per turn (0 = off).
    #[arg(long, value_name = "N")]
    max_calls_per_skill: Option<u32>,
    /// Consecutive failures before a skill is withdrawn.
    #[arg(long, value_name = "N")]
    max_consecutive_failures: Option<u32>,
    /// Take text at least this long beside tool calls as the final answer (0 = off).
    #[arg(long, value_name = "CHARS")]
    substantive_answer_chars: Option<usize>,
    /// Offer no tools after N model calls (0 = off).
    #[arg(long, value_name = "N")]
    withdraw_tools_after: Option<u32>,
    /// Token budget of the turn (0 = off).
    #[arg(long, value_name = "TOKENS")]
    max_turn_tokens: Option<u64>,
    /// Deadline of the turn in milliseconds (0 = off).
    #[arg(long, value_name = "MS")]
    deadline_ms: Option<u64>,
    /// What a tripped limit does: finalize (answer without tools) or error.
    #[arg(long, value_enum)]
    on_limit: Option<OnLimitArg>,
    /// Trust finish_reason "stop" even when tool calls come with it.
    #[arg(long)]
    honor_stop: bool,
    /// Offer a finish(answer) tool that ends the turn.
    #[arg(long)]
    finish_tool: bool,
    /// Turn off repetition, cycle, near-duplicate and repeated-answer detection.
    #[arg(long)]
    no_loop_detection: bool,
    /// Any policy field, as FIELD=VALUE (repeatable), e.g. --policy poll_patience=8.
    #[arg(long = "policy", value_name = "FIELD=VALUE")]
    fields: Vec<String>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum OnLimitArg {
    Finalize,
    Error,
}

impl PolicyFlags {
    /// The patch these flags describe, each value checked and named on error.
    pub fn to_patch(&self) -> anyhow::Result<PolicyPatch> {
        let mut patch = PolicyPatch::default();
        let mut set = |field: &str, value: Value| {
            patch
                .set(field, value)
                .with_context(|| format!("--{}", field.replace('_', "-")))
        };
        if let Some(v) = self.max_model_calls {
            set("max_model_calls", v.into())?;
        }
        if let Some(v) = self.max_tool_calls {
            set("max_tool_calls", v.into())?;
        }
        if let Some(v) = self.max_calls_per_skill {
            set("max_calls_per_skill", v.into())?;
        }
        if let Some(v) = self.max_consecutive_failures {
            set("max_consecutive_failures", v.into())?;
        }
        if let Some(v) = self.substantive_answer_chars {
            set("substantive_answer_chars", v.into())?;
        }
        if let Some(v) = self.withdraw_tools_after {
            set("withdraw_tools_after", v.into())?;
        }
        if let Some(v) = self.max_turn_tokens {
            set("max_turn_tokens", v.into())?;
        }
        if let Some(v) = self.deadline_ms {
            set("deadline_ms", v.into())?;
        }
        if let Some(v) = self.on_limit {
            let on = match v {
                OnLimitArg::Finalize => OnLimit::Finalize,
                OnLimitArg::Error => OnLimit::Error,
            };
            set("on_limit", serde_json::to_value(on)?)?;
        }
        if self.honor_stop {
            set("honor_stop", true.into())?;
        }
        if self.finish_tool {
            set("finish_tool", true.into())?;
        }
        if self.no_loop_detection {
            set("loop_detection", false.into())?;
        }
        for field in &self.fields {
            let (key, raw) = field
                .split_once('=')
                .with_context(|| format!("--policy `{field}`: write FIELD=VALUE"))?;
            let value = serde_json::from_str(raw.trim())
                .unwrap_or_else(|_| Value::String(raw.trim().to_owned()));
            patch
                .set(key.trim(), value)
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
}

/// Flags shared by `run` and `chat`.
#[derive(Args, Debug, Clone)]
pub struct TurnArgs {
    #[command(flatten)]
    target: ProviderFlags,
    /// Scenario file for the scripted model (default: the built-in offline assistant).
    #[arg(long, value_name = "FILE")]
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
