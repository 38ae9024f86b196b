//! The one path from configuration to a running engine, for every command: config,
//! provider, sandbox, toolbox, policy, prices and telemetry. Driving a turn is `drive`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use buddy_cli::config::{BuddyConfig, SkillsConfig};
use buddy_cli::toolbox::build_toolbox;
use buddy_core::{Message, Price, Provider};
use buddy_engine::{ApprovalRules, Engine, LoopPolicy, PolicyPatch, PriceTable};
use buddy_providers::{ProviderConfig, ProviderKind};
use buddy_scripted::library::default_scenario;
use buddy_scripted::{Scenario, ScenarioTool, ScriptedProvider};
use buddy_skills::Sandbox;
use buddy_telemetry::{Telemetry, TelemetryConfig};

use super::{ProviderFlags, TurnArgs};

/// Everything a turn needs, built from the command line, buddy.toml and the environment.
pub struct Setup {
    pub engine: Arc<Engine>,
    pub model: String,
    pub policy: LoopPolicy,
    /// Which calls wait for approval (attended: asked on the terminal).
    pub approval: ApprovalRules,
    pub history: Vec<Message>,
    /// The scenario the scripted model plays, if it is the provider.
    pub scenario: Option<Scenario>,
    /// What the model charges (buddy.toml's `prices`, else the built-in list price).
    pub price: Option<Price>,
    /// The provider's name, for traces.
    pub provider: String,
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

/// Starts telemetry when `[telemetry]` or the `OTEL_*` variables ask for it.
pub fn start_telemetry(config: &BuddyConfig) -> anyhow::Result<Option<Arc<Telemetry>>> {
    let resolved =
        TelemetryConfig::resolve(config.telemetry.clone(), |var| std::env::var(var).ok())?;
    Ok(match resolved {
        Some(config) => Some(Arc::new(Telemetry::start(&config)?)),
        None => None,
    })
}

/// Every provider's `prices` from buddy.toml, in front of buddy's built-in table.
pub fn price_table(config: &BuddyConfig) -> PriceTable {
    let mut table = PriceTable::default();
    for (name, provider) in &config.providers {
        for (pattern, price) in &provider.prices {
            table.add(Some(name), pattern, *price);
        }
    }
    table
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

/// Builds the engine and policy for `run` / `chat`; `attended` when a person at the
/// terminal can answer approval questions.
pub async fn setup(
    config_path: Option<&Path>,
    args: &TurnArgs,
    attended: bool,
) -> anyhow::Result<Setup> {
    let config = load_config(config_path)?;
    let (_, sandbox) = open_sandbox(args.sandbox.as_deref(), &config.skills)?;
    let (name, chosen) = choose_provider(&config, &args.target)?;
    let (provider, toolbox, model, scenario): (Arc<dyn Provider>, _, String, Option<Scenario>) =
        match chosen.kind {
            ProviderKind::Scripted => {
                if let (Some(model), None) = (&args.model, &args.target.provider)
                    && config.default_provider.is_none()
                {
                    eprintln!(
                        "buddy: --model {model} names no provider, so buddy's built-in scripted model answers \
                         (under that name); pass --provider (openai, anthropic or one in buddy.toml) to call {model}"
                    );
                }
                let scenario = match args.scenario.as_ref().or(chosen.scenario.as_ref()) {
                    Some(path) => Scenario::load(path)?,
                    None => default_scenario()?,
                };
                let toolbox = build_toolbox(&config, &sandbox, Some(&scenario)).await?;
                let model = args
                    .model
                    .clone()
                    .unwrap_or_else(|| format!("scripted:{}", scenario.name));
                let provider = Arc::new(ScriptedProvider::new(Arc::new(scenario.clone())));
                (provider, toolbox, model, Some(scenario))
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
                let toolbox = build_toolbox(&config, &sandbox, None).await?;
                (provider, toolbox, model, None)
            }
        };
    let scenario_patch = scenario
        .as_ref()
        .map(|s| s.policy.clone())
        .unwrap_or_default();
    let env_patch = PolicyPatch::from_env(std::env::vars())?;
    let flag_patch = args.policy.to_patch()?;
    let policy = config
        .policy
        .resolve(&model, &[&scenario_patch, &env_patch, &flag_patch])
        .context("policy")?;
    let engine = Arc::new(Engine::new(provider, toolbox));
    let mut approval = config
        .approval
        .rules(args.approval.map(Into::into), !attended);
    // A scenario's stub tools touch nothing: they never wait for a person's yes, unless
    // buddy.toml's [approval.skills] names them (built-in skills keep their rules).
    if let (Some(scenario), None) = (&scenario, args.approval) {
        for tool in &scenario.tools {
            if let ScenarioTool::Stub(stub) = tool {
                approval
                    .skills
                    .entry(stub.name.clone())
                    .or_insert(buddy_engine::ApprovalMode::Never);
            }
        }
    }
    let system = args
        .system
        .clone()
        .or_else(|| scenario.as_ref().and_then(|s| s.system.clone()));
    // The scripted model costs nothing unless buddy.toml prices it, whatever name it
    // answers under (`--model gpt-4o` must not bill it at gpt-4o's list price).
    let price = match chosen.kind {
        ProviderKind::Scripted => price_table(&config).configured(&name, &model),
        _ => price_table(&config).price(&name, &model),
    };
    Ok(Setup {
        engine,
        price,
        telemetry: start_telemetry(&config)?,
        provider: name,
        model,
        policy,
        approval,
        history: system.map(Message::system).into_iter().collect(),
        scenario,
    })
}
