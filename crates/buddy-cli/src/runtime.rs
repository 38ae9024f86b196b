//! One runtime built once from configuration: buddy.toml (or its defaults) and the
//! provider backends, and the one place that turns them into parts — the sandbox, a
//! session's provider and toolbox (MCP included), the server's backend, the store,
//! policy layering, prices, approval rules and telemetry. Commands only drive the parts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use buddy_core::{Price, Provider, Toolbox};
use buddy_engine::{
    AgentSpec, AgentSpecError, ApprovalMode, ApprovalRules, LoopPolicy, PolicyError, PolicyPatch,
    PriceTable, attach_agents,
};
use buddy_scripted::{Scenario, ScenarioTool};
use buddy_skills::{Sandbox, SandboxError};
use buddy_store::{OpenError, StoreLocation};
use buddy_telemetry::{Telemetry, TelemetryConfig, TelemetryError};

use crate::backend::{BackendBuildError, ConfiguredBackend};
use crate::config::{BuddyConfig, ConfigError};
use crate::toolbox::{ToolboxError, build_toolbox, build_toolbox_watched};

use crate::provider_kinds::{Backends, Chosen, Env, KindError, ProviderChoice, SessionWants};

/// The runtime could not make a part.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// buddy.toml does not load.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The sandbox's default, the current directory, is unreadable.
    #[error("cannot read the current directory")]
    CurrentDir(#[source] std::io::Error),
    /// The sandbox does not open; `what` names where its directory came from.
    #[error("{what}")]
    Sandbox {
        what: &'static str,
        #[source]
        source: SandboxError,
    },
    /// A provider could not be chosen or built.
    #[error(transparent)]
    Kind(#[from] KindError),
    /// The skills or MCP servers could not be set up.
    #[error(transparent)]
    Toolbox(#[from] ToolboxError),
    /// The layered policy is invalid.
    #[error("policy")]
    Policy(#[source] PolicyError),
    /// `BUDDY_*` policy variables are invalid.
    #[error(transparent)]
    EnvPolicy(PolicyError),
    /// Telemetry is misconfigured or does not start.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// The server's backend could not be built.
    #[error(transparent)]
    ServerBackend(BackendBuildError),
    /// The `[providers.NAME]` an agent names could not be built.
    #[error(
        "[providers.{provider}], which an agent declaration names, could not be built: {source}"
    )]
    AgentProvider {
        provider: String,
        #[source]
        source: buddy_core::ProviderError,
    },
    /// An `[[agents]]` declaration cannot be used.
    #[error("an agent declaration ([[agents]] in buddy.toml, or the scenario's `agents`): {0}")]
    Agents(#[source] AgentSpecError),
}

/// A `run` or `chat` session's provider with the toolbox its turns are offered.
pub struct Session {
    /// The provider's name, for traces and prices.
    pub provider_name: String,
    /// The provider turns call.
    pub provider: Arc<dyn Provider>,
    /// The skills (and MCP tools) turns are offered.
    pub toolbox: Arc<dyn Toolbox>,
    /// The model name turns ask for.
    pub model: String,
    /// The scenario the provider plays, if it plays one.
    pub scenario: Option<Scenario>,
    /// Whether buddy's list prices apply (its backend's `list_priced`).
    list_priced: bool,
}

/// buddy.toml and the provider backends, from which every part is made.
pub struct Runtime {
    config: BuddyConfig,
    backends: Backends,
}

impl Runtime {
    /// Loads `--config`, or ./buddy.toml when it exists, or the defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Self, RuntimeError> {
        let config = match explicit {
            Some(path) => BuddyConfig::load(path)?,
            None if Path::new("buddy.toml").is_file() => {
                BuddyConfig::load(Path::new("buddy.toml"))?
            }
            None => BuddyConfig::default(),
        };
        Ok(Runtime::new(config))
    }

    /// A runtime over `config` with buddy's provider backends.
    pub fn new(config: BuddyConfig) -> Self {
        Runtime {
            config,
            backends: Backends::default(),
        }
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &BuddyConfig {
        &self.config
    }

    /// The configuration, to adjust before parts are made (`serve` layers `BUDDY_*`).
    pub fn config_mut(&mut self) -> &mut BuddyConfig {
        &mut self.config
    }

    /// The provider backends.
    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// Opens the sandbox: `flag`, else `[skills] sandbox`, else the current directory;
    /// an error names which of them it came from. Returns its directory too.
    pub fn sandbox(&self, flag: Option<&Path>) -> Result<(PathBuf, Sandbox), RuntimeError> {
        let skills = &self.config.skills;
        let dir = match (flag, &skills.sandbox) {
            (Some(dir), _) => dir.to_owned(),
            (None, Some(dir)) => dir.clone(),
            (None, None) => std::env::current_dir().map_err(RuntimeError::CurrentDir)?,
        };
        let what = match (flag.is_some(), skills.sandbox.is_some()) {
            (true, _) => "--sandbox",
            (false, true) => "[skills] sandbox in buddy.toml",
            (false, false) => "the sandbox (the current directory)",
        };
        let sandbox = Sandbox::new(&dir)
            .map_err(|source| RuntimeError::Sandbox { what, source })?
            .read_hard_links(skills.read_hard_links);
        Ok((dir, sandbox))
    }

    /// The provider the command line or buddy.toml names, or the fallback.
    pub fn choose(&self, choice: &ProviderChoice) -> Result<Chosen, RuntimeError> {
        Ok(self.backends.choose(&self.config, choice)?)
    }

    /// Builds a session: the chosen provider through its kind's backend, then the
    /// toolbox (the scenario's tools when it plays one, else the configured skills;
    /// plus every `[[mcp]]` server's, started here).
    pub async fn session(
        &self,
        chosen: Chosen,
        wants: &SessionWants<'_>,
        sandbox: &Sandbox,
        env: Env<'_>,
    ) -> Result<Session, RuntimeError> {
        let backend = self.backends.get(chosen.config.kind)?;
        let built = backend.session(&chosen, wants, env)?;
        // The servers allowed to sample (`sampling = true`) ask this session's model.
        let sampler = buddy_mcp::Sampler {
            provider: Arc::clone(&built.provider),
            model: built.model.clone(),
        };
        let browser: Option<Arc<dyn buddy_mcp::Browser>> = match wants.attended {
            true => Some(Arc::new(buddy_mcp::TerminalBrowser)),
            false => None,
        };
        let toolbox = build_toolbox(
            &self.config,
            sandbox,
            built.scenario.as_ref(),
            Some(sampler),
            browser,
        )
        .await?;
        let toolbox = self.with_agents(toolbox, &built.provider, built.scenario.as_ref(), env)?;
        Ok(Session {
            provider_name: chosen.name,
            provider: built.provider,
            toolbox,
            model: built.model,
            scenario: built.scenario,
            list_priced: backend.list_priced(),
        })
    }

    /// `toolbox` with the sub-agents of buddy.toml's `[[agents]]` and the scenario's
    /// offered beside its tools; their model calls go to `provider`, or to the
    /// `[providers.NAME]` an agent names (built here, its key from `env`).
    pub fn with_agents(
        &self,
        toolbox: Arc<dyn Toolbox>,
        provider: &Arc<dyn Provider>,
        scenario: Option<&Scenario>,
        env: Env<'_>,
    ) -> Result<Arc<dyn Toolbox>, RuntimeError> {
        let declared: Vec<AgentSpec> = self
            .config
            .agents
            .iter()
            .chain(scenario.into_iter().flat_map(|s| &s.agents))
            .cloned()
            .collect();
        if declared.is_empty() {
            return Ok(toolbox);
        }
        let mut named = HashMap::new();
        for name in declared.iter().filter_map(|a| a.provider.as_ref()) {
            let (Some(config), false) = (self.config.providers.get(name), named.contains_key(name))
            else {
                continue; // unknown: AgentSet::new names it
            };
            let backend = self.backends.get(config.kind)?;
            let served = backend.served(name, config, env).map_err(|source| {
                RuntimeError::AgentProvider {
                    provider: name.clone(),
                    source,
                }
            })?;
            if let Some(built) = served {
                named.insert(name.clone(), built);
            }
        }
        attach_agents(declared, toolbox, Arc::clone(provider), named).map_err(RuntimeError::Agents)
    }

    /// The `BUDDY_<FIELD>` policy variables of `vars`, as a patch.
    pub fn env_policy<I, K, V>(&self, vars: I) -> Result<PolicyPatch, RuntimeError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        PolicyPatch::from_env(vars).map_err(RuntimeError::EnvPolicy)
    }

    /// A session's policy: defaults, buddy.toml's `[policy]` (its model patterns
    /// matched against the session's model), the scenario's own, then `overrides`.
    pub fn policy(
        &self,
        session: &Session,
        overrides: &[&PolicyPatch],
    ) -> Result<LoopPolicy, RuntimeError> {
        let scenario = session
            .scenario
            .as_ref()
            .map(|s| s.policy.clone())
            .unwrap_or_default();
        let layers: Vec<&PolicyPatch> = std::iter::once(&scenario)
            .chain(overrides.iter().copied())
            .collect();
        self.config
            .policy
            .resolve(&session.model, &layers)
            .map_err(RuntimeError::Policy)
    }

    /// Which calls wait for approval: `mode` (the command line's) or buddy.toml's
    /// `[approval]`. A scenario's stub tools touch nothing: they never wait, unless
    /// `[approval.skills]` names them (built-in skills keep their rules).
    pub fn approval(
        &self,
        session: &Session,
        mode: Option<ApprovalMode>,
        attended: bool,
    ) -> ApprovalRules {
        let mut approval = self.config.approval.rules(mode, !attended);
        if let (Some(scenario), None) = (&session.scenario, mode) {
            for tool in &scenario.tools {
                if let ScenarioTool::Stub(stub) = tool {
                    approval
                        .skills
                        .entry(stub.name.clone())
                        .or_insert(ApprovalMode::Never);
                }
            }
        }
        approval
    }

    /// Every provider's `prices` from buddy.toml, in front of buddy's built-in table.
    pub fn price_table(&self) -> PriceTable {
        let mut table = PriceTable::default();
        for (name, provider) in &self.config.providers {
            for (pattern, price) in &provider.prices {
                table.add(Some(name), pattern, *price);
            }
        }
        table
    }

    /// What the session's model charges: buddy.toml's `prices`, else the built-in list
    /// price where its backend has list prices.
    pub fn price(&self, session: &Session) -> Option<Price> {
        let table = self.price_table();
        match session.list_priced {
            true => table.price(&session.provider_name, &session.model),
            false => table.configured(&session.provider_name, &session.model),
        }
    }

    /// The table a session's sub-agents and sampling calls on other models are priced
    /// from, as its own model is (`None`: a backend without list prices, whose models cost
    /// what [`Self::price`] says).
    pub fn prices(&self, session: &Session) -> Option<Arc<PriceTable>> {
        session.list_priced.then(|| Arc::new(self.price_table()))
    }

    /// Starts telemetry when `[telemetry]` or the `OTEL_*` variables ask for it.
    pub fn telemetry(&self, env: Env<'_>) -> Result<Option<Arc<Telemetry>>, RuntimeError> {
        let resolved = TelemetryConfig::resolve(self.config.telemetry.clone(), env)?;
        Ok(match resolved {
            Some(config) => Some(Arc::new(Telemetry::start(&config)?)),
            None => None,
        })
    }

    /// Where the conversation store lives: `store` (a URL or SQLite file; else
    /// `[server] store`), else the SQLite file `db` (else `[server] db`).
    pub fn store_location(
        &self,
        store: Option<&str>,
        db: Option<&Path>,
    ) -> Result<StoreLocation, OpenError> {
        let server = &self.config.server;
        match store.or(server.store.as_deref()) {
            Some(url) => StoreLocation::parse(url),
            None => Ok(StoreLocation::Sqlite(
                db.map_or_else(|| server.db.clone(), Path::to_owned),
            )),
        }
    }

    /// The server's backend: every declared provider built through its kind's backend,
    /// every scenario as a `scripted:<name>` model, and the toolbox of HTTP providers'
    /// turns (the configured skills, plus the `[[mcp]]` servers' tools, started here).
    pub async fn server_backend(
        &self,
        sandbox: Sandbox,
        scenarios: Option<&Path>,
        env: Env<'_>,
    ) -> Result<ConfiguredBackend, RuntimeError> {
        let mcp = match self.config.mcp.is_empty() {
            true => None,
            // A server's turns use many providers: sampling requests are refused there.
            false => Some(build_toolbox_watched(&self.config, &sandbox, None, None, None).await?),
        };
        let backend =
            ConfiguredBackend::with_backends(&self.config, &self.backends, sandbox, scenarios, env)
                .map_err(RuntimeError::ServerBackend)?;
        Ok(match mcp {
            Some((toolbox, servers)) => backend
                .with_toolbox(toolbox)
                .map_err(RuntimeError::ServerBackend)?
                .with_mcp_servers(servers),
            None => backend,
        })
    }
}
