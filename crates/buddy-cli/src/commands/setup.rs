//! Wiring shared by `run` and `chat`: config, scenario, sandbox, registry, policy.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use buddy_cli::DEFAULT_SCENARIO;
use buddy_cli::config::BuddyConfig;
use buddy_cli::printer::Printer;
use buddy_cli::toolbox::build_registry;
use buddy_core::Message;
use buddy_engine::{CancellationToken, Engine, LoopPolicy, PolicyPatch, TurnOutcome, TurnRequest};
use buddy_providers::{Scenario, ScriptedProvider};
use buddy_skills::Sandbox;

use super::TurnArgs;

/// Everything a turn needs, built from the command line, buddy.toml and the environment.
pub struct Setup {
    pub engine: Arc<Engine>,
    pub model: String,
    pub policy: LoopPolicy,
    pub history: Vec<Message>,
    pub scenario: Scenario,
}

/// Loads `--config`, or ./buddy.toml when it exists, or the defaults.
pub fn load_config(explicit: Option<&Path>) -> anyhow::Result<BuddyConfig> {
    match explicit {
        Some(path) => Ok(BuddyConfig::load(path)?),
        None if Path::new("buddy.toml").is_file() => {
            Ok(BuddyConfig::load(Path::new("buddy.toml"))?)
        }
        None => Ok(BuddyConfig::default()),
    }
}

/// Builds the engine and policy for `run` / `chat`.
pub fn setup(config_path: Option<&Path>, args: &TurnArgs) -> anyhow::Result<Setup> {
    let config = load_config(config_path)?;
    let scenario = match &args.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::parse(DEFAULT_SCENARIO, "built-in offline_assistant")?,
    };
    let sandbox_dir = match (&args.sandbox, &config.skills.sandbox) {
        (Some(dir), _) | (None, Some(dir)) => dir.clone(),
        (None, None) => std::env::current_dir().context("cannot read the current directory")?,
    };
    let sandbox = Sandbox::new(&sandbox_dir).context("--sandbox")?;
    let registry = build_registry(&config.skills, &sandbox, Some(&scenario))?;
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| format!("scripted:{}", scenario.name));
    let scenario_patch = PolicyPatch::from_map(scenario.policy.clone())
        .with_context(|| format!("scenario `{}` policy", scenario.name))?;
    let env_patch = PolicyPatch::from_env(std::env::vars())?;
    let flag_patch = args.policy.to_patch()?;
    let policy = config
        .policy
        .resolve(&model, &[&scenario_patch, &env_patch, &flag_patch])
        .context("policy")?;
    let provider = ScriptedProvider::new(Arc::new(scenario.clone()));
    let engine = Arc::new(Engine::new(Arc::new(provider), Arc::new(registry)));
    let system = args.system.clone().or_else(|| scenario.system.clone());
    Ok(Setup {
        engine,
        model,
        policy,
        history: system.map(Message::system).into_iter().collect(),
        scenario,
    })
}

/// Runs one turn, printing its events as they come; Ctrl-C cancels it (the turn still
/// ends with its terminal event).
pub async fn drive_turn(
    engine: &Arc<Engine>,
    request: TurnRequest,
    json: bool,
) -> anyhow::Result<TurnOutcome> {
    let cancel: CancellationToken = request.cancel.clone();
    let (mut events, handle) = engine.spawn(request);
    let mut printer = Printer::new(json, std::io::stdout(), std::io::stderr());
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => printer.print(&event),
                None => break,
            },
            _ = &mut ctrl_c, if !cancel.is_cancelled() => cancel.cancel(),
        }
    }
    Ok(handle.await?)
}
