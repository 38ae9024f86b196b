//! A `run` or `chat` session from the command line: its flags handed to the runtime,
//! which makes every part (`buddy_cli::runtime`). Driving a turn is `drive`.

use std::path::Path;
use std::sync::Arc;

use buddy_cli::provider_kinds::{ProviderChoice, SessionWants};
use buddy_cli::runtime::Runtime;
use buddy_core::{Message, Price};
use buddy_engine::{ApprovalRules, Engine, LoopPolicy};
use buddy_scripted::Scenario;
use buddy_telemetry::Telemetry;

use super::{ProviderFlags, TurnArgs};

/// Everything a turn needs, built from the command line, buddy.toml and the environment.
pub struct Setup {
    pub engine: Arc<Engine>,
    pub model: String,
    /// The directory the file skills are confined to (named in the startup line).
    pub sandbox_dir: std::path::PathBuf,
    pub policy: LoopPolicy,
    /// Which calls wait for approval (attended: asked on the terminal).
    pub approval: ApprovalRules,
    /// A person at the terminal answers the tools' questions (MCP elicitation); else
    /// the policy's `unattended_elicitation` does.
    pub attended: bool,
    pub history: Vec<Message>,
    /// The scenario the scripted model plays, if it is the provider.
    pub scenario: Option<Scenario>,
    /// What the model charges (buddy.toml's `prices`, else the built-in list price).
    pub price: Option<Price>,
    /// The same lookup for sub-agents and sampling calls on other models.
    pub prices: Option<Arc<buddy_engine::PriceTable>>,
    /// The provider's name, for traces.
    pub provider: String,
    /// The provider itself: traces name who serves it (`Provider::served_by`).
    pub serving: Arc<dyn buddy_core::Provider>,
    /// Where the turns' spans go, when telemetry is on.
    pub telemetry: Option<Arc<Telemetry>>,
}

impl Setup {
    /// Sends the spans still waiting (before the command exits).
    pub async fn flush_telemetry(&self) {
        if let Some(telemetry) = &self.telemetry {
            telemetry.shutdown().await;
        }
    }
}

/// Reads the process environment (the runtime takes the source as an argument).
pub fn process_env(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

impl ProviderFlags {
    /// The flags as the runtime takes them.
    pub fn choice(&self) -> ProviderChoice {
        ProviderChoice {
            provider: self.provider.clone(),
            base_url: self.base_url.clone(),
            no_stream: self.no_stream,
            tool_choice_auto: self.tool_choice_auto,
            no_stream_options: self.no_stream_options,
            assistant_content_empty_string: self.assistant_content_empty_string,
            output_limit_field: self.output_limit_field,
        }
    }
}

/// Warns on stderr about each server of an `mcp_import` file that buddy cannot run
/// (legacy SSE…), saying why; the other servers run.
pub fn warn_skipped_mcp(runtime: &Runtime) {
    for skipped in &runtime.config().mcp_skipped {
        eprintln!("buddy: warning: {skipped}");
    }
}

/// Builds the engine and policy for `run` / `chat`; `attended` when a person at the
/// terminal can answer approval questions.
pub async fn setup(
    config_path: Option<&Path>,
    args: &TurnArgs,
    attended: bool,
) -> anyhow::Result<Setup> {
    let runtime = Runtime::load(config_path)?;
    warn_skipped_mcp(&runtime);
    let (sandbox_dir, sandbox) = runtime.sandbox(args.sandbox.as_deref())?;
    let chosen = runtime.choose(&args.target.choice())?;
    let wants = SessionWants {
        model: args.model.as_deref(),
        scenario: args.scenario.as_deref(),
        named: args.target.provider.is_some() || runtime.config().default_provider.is_some(),
        notify: &|note| eprintln!("{note}"),
        attended,
    };
    let session = runtime
        .session(chosen, &wants, &sandbox, &process_env)
        .await?;
    let env_patch = runtime.env_policy(std::env::vars())?;
    let flag_patch = args.policy.to_patch()?;
    let policy = runtime.policy(&session, &[&env_patch, &flag_patch])?;
    let approval = runtime.approval(&session, args.approval.map(Into::into), attended);
    let system = args
        .system
        .clone()
        .or_else(|| session.scenario.as_ref().and_then(|s| s.system.clone()));
    let price = runtime.price(&session);
    let prices = runtime.prices(&session);
    Ok(Setup {
        engine: Arc::new(Engine::new(
            Arc::clone(&session.provider),
            Arc::clone(&session.toolbox),
        )),
        price,
        prices,
        serving: Arc::clone(&session.provider),
        telemetry: runtime.telemetry(&process_env)?,
        provider: session.provider_name,
        model: session.model,
        sandbox_dir,
        policy,
        approval,
        attended,
        history: system.map(Message::system).into_iter().collect(),
        scenario: session.scenario,
    })
}
