//! Wiring shared by `run` and `chat`: config, provider, sandbox, registry, policy.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use buddy_cli::DEFAULT_SCENARIO;
use buddy_cli::config::{BuddyConfig, SkillsConfig};
use buddy_cli::printer::Printer;
use buddy_cli::toolbox::build_registry;
use buddy_core::{Message, Provider};
use buddy_engine::{CancellationToken, Engine, LoopPolicy, PolicyPatch, TurnOutcome, TurnRequest};
use buddy_providers::{ProviderConfig, ProviderKind, Scenario, ScriptedProvider};
use buddy_skills::Sandbox;

use super::{ProviderFlags, TurnArgs};

/// Everything a turn needs, built from the command line, buddy.toml and the environment.
pub struct Setup {
    pub engine: Arc<Engine>,
    pub model: String,
    pub policy: LoopPolicy,
    pub history: Vec<Message>,
    /// The scenario the scripted model plays, if it is the provider.
    pub scenario: Option<Scenario>,
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

/// The provider named on the command line or in buddy.toml, or the scripted model,
/// with the command line's overrides applied.
pub fn choose_provider(
    config: &BuddyConfig,
    args: &ProviderFlags,
) -> anyhow::Result<(String, ProviderConfig)> {
    let Some(name) = args
        .provider
        .clone()
        .or_else(|| config.default_provider.clone())
    else {
        return Ok((
            "scripted".to_owned(),
            ProviderConfig::of_kind(ProviderKind::Scripted),
        ));
    };
    let mut chosen = match (config.providers.get(&name), ProviderKind::parse(&name)) {
        (Some(declared), _) => declared.clone(),
        (None, Some(kind)) => ProviderConfig::of_kind(kind),
        (None, None) => {
            let known: Vec<&str> = config.providers.keys().map(String::as_str).collect();
            let declared = if known.is_empty() {
                "no buddy.toml declares any provider".to_owned()
            } else {
                format!("buddy.toml declares [{}]", known.join(", "))
            };
            bail!(
                "no provider named `{name}`: {declared}; name one of those or a kind: openai, anthropic, scripted"
            );
        }
    };
    if let Some(url) = &args.base_url {
        chosen.base_url = Some(url.clone());
    }
    if args.no_stream {
        chosen.stream = false;
    }
    chosen.compat.tool_choice_auto |= args.tool_choice_auto;
    chosen.compat.no_stream_options |= args.no_stream_options;
    chosen.compat.assistant_content_empty_string |= args.assistant_content_empty_string;
    Ok((name, chosen))
}

/// Names where the sandbox directory came from, for its error: the flag, buddy.toml, or
/// the current directory.
fn sandbox_source(from_flag: bool, from_config: bool) -> &'static str {
    match (from_flag, from_config) {
        (true, _) => "--sandbox",
        (false, true) => "[skills] sandbox in buddy.toml",
        (false, false) => "the sandbox (the current directory)",
    }
}

/// Opens the sandbox: `--sandbox`, else `[skills] sandbox`, else the current directory;
/// an error names which of them it came from. Returns its directory too.
pub fn open_sandbox(
    flag: Option<&Path>,
    skills: &SkillsConfig,
) -> anyhow::Result<(PathBuf, Sandbox)> {
    let dir = match (flag, &skills.sandbox) {
        (Some(dir), _) => dir.to_owned(),
        (None, Some(dir)) => dir.clone(),
        (None, None) => std::env::current_dir().context("cannot read the current directory")?,
    };
    let sandbox = Sandbox::new(&dir)
        .context(sandbox_source(flag.is_some(), skills.sandbox.is_some()))?
        .read_hard_links(skills.read_hard_links);
    Ok((dir, sandbox))
}

/// Builds the engine and policy for `run` / `chat`.
pub fn setup(config_path: Option<&Path>, args: &TurnArgs) -> anyhow::Result<Setup> {
    let config = load_config(config_path)?;
    let (_, sandbox) = open_sandbox(args.sandbox.as_deref(), &config.skills)?;
    let (name, chosen) = choose_provider(&config, &args.target)?;
    let (provider, registry, model, scenario): (Arc<dyn Provider>, _, String, Option<Scenario>) =
        match chosen.kind {
            ProviderKind::Scripted => {
                let scenario = match args.scenario.as_ref().or(chosen.scenario.as_ref()) {
                    Some(path) => Scenario::load(path)?,
                    None => Scenario::parse(DEFAULT_SCENARIO, "built-in offline_assistant")?,
                };
                let registry = build_registry(&config.skills, &sandbox, Some(&scenario))?;
                let model = args
                    .model
                    .clone()
                    .unwrap_or_else(|| format!("scripted:{}", scenario.name));
                let provider = Arc::new(ScriptedProvider::new(Arc::new(scenario.clone())));
                (provider, registry, model, Some(scenario))
            }
            kind => {
                if args.scenario.is_some() {
                    bail!(
                        "--scenario plays the scripted model; it cannot be combined with the {kind:?} provider `{name}`"
                    );
                }
                let model = args.model.clone().or_else(|| chosen.model.clone()).with_context(|| {
                format!("provider `{name}` needs a model: pass --model or set `model` under [providers.{name}]")
            })?;
                let provider = chosen.build_http(&name, &|var| std::env::var(var).ok())?;
                let registry = build_registry(&config.skills, &sandbox, None)?;
                (provider, registry, model, None)
            }
        };
    let scenario_patch = match &scenario {
        Some(s) => PolicyPatch::from_map(s.policy.clone())
            .with_context(|| format!("scenario `{}` policy", s.name))?,
        None => PolicyPatch::default(),
    };
    let env_patch = PolicyPatch::from_env(std::env::vars())?;
    let flag_patch = args.policy.to_patch()?;
    let policy = config
        .policy
        .resolve(&model, &[&scenario_patch, &env_patch, &flag_patch])
        .context("policy")?;
    let engine = Arc::new(Engine::new(provider, Arc::new(registry)));
    let system = args
        .system
        .clone()
        .or_else(|| scenario.as_ref().and_then(|s| s.system.clone()));
    Ok(Setup {
        engine,
        model,
        policy,
        history: system.map(Message::system).into_iter().collect(),
        scenario,
    })
}

/// Ctrl-C, listened for from the moment this is called: a handler registered lazily (on
/// first poll) would let an early Ctrl-C kill the process instead of cancelling the turn.
pub fn interrupt() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        let mut signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("cannot listen for Ctrl-C")?;
        Ok(async move {
            signal.recv().await;
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

/// Runs one turn, printing its events as they come; Ctrl-C cancels it (the turn still
/// ends with its terminal event).
pub async fn drive_turn(
    engine: &Arc<Engine>,
    request: TurnRequest,
    json: bool,
) -> anyhow::Result<TurnOutcome> {
    let cancel: CancellationToken = request.cancel.clone();
    let ctrl_c = interrupt()?;
    tokio::pin!(ctrl_c);
    let (mut events, handle) = engine.spawn(request);
    let mut printer = Printer::new(json, std::io::stdout(), std::io::stderr());
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
