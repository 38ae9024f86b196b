//! The server's [`Backend`] from buddy.toml: the configured providers, or — when none is
//! configured — every scripted scenario as a model (`scripted:<name>`); the `[[agents]]`
//! (and a scenario's own) offered beside the tools of every turn.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use buddy_core::{Provider, Toolbox};
use buddy_engine::{AgentSpec, PolicyPatch, attach_agents};
use buddy_server::{Backend, BackendError, Resolved};
use buddy_skills::Sandbox;

use crate::config::{BuddyConfig, SkillsConfig};
use crate::provider_kinds::{Backends, Env, ScenarioModel, scenario_models};
use crate::toolbox::build_registry;

struct HttpProvider {
    provider: Arc<dyn Provider>,
    model: Option<String>,
    /// Every model name clients may ask this provider for (the default one first).
    models: Vec<String>,
    /// Any name passes through (`any_model = true`).
    any_model: bool,
}

impl HttpProvider {
    fn serves(&self, model: &str) -> bool {
        self.any_model || self.models.iter().any(|m| m == model)
    }
}

/// Resolves `provider` / `model` of requests against buddy.toml and the scenarios.
pub struct ConfiguredBackend {
    http: BTreeMap<String, HttpProvider>,
    default_provider: Option<String>,
    scripted: BTreeMap<String, ScenarioModel>,
    skills: SkillsConfig,
    sandbox: Sandbox,
    /// The configured skills, shared by every turn of an HTTP provider.
    toolbox: Arc<dyn Toolbox>,
    /// `[[agents]]`: sub-agents offered to every turn beside its tools.
    agents: Vec<AgentSpec>,
    /// The configured providers by name, for an agent whose declaration names one.
    agent_providers: HashMap<String, Arc<dyn Provider>>,
    /// The MCP servers of `toolbox`, for the health route.
    mcp: Vec<Arc<buddy_mcp::McpSource>>,
}

/// The backend could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BackendBuildError(String);

impl ConfiguredBackend {
    /// Builds every configured provider (keys from `env`) and loads the scenarios in
    /// `scenarios_dir` on top of the built-in ones (embedded in the binary).
    pub fn new(
        config: &BuddyConfig,
        sandbox: Sandbox,
        scenarios_dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, BackendBuildError> {
        Self::with_backends(config, &Backends::default(), sandbox, scenarios_dir, env)
    }

    /// [`ConfiguredBackend::new`] with each declared provider built by its kind's
    /// backend in `backends` (a kind the server offers another way adds no provider).
    pub fn with_backends(
        config: &BuddyConfig,
        backends: &Backends,
        sandbox: Sandbox,
        scenarios_dir: Option<&Path>,
        env: Env<'_>,
    ) -> Result<Self, BackendBuildError> {
        let err = |e: &dyn std::fmt::Display| BackendBuildError(e.to_string());
        let mut http = BTreeMap::new();
        for (name, declared) in &config.providers {
            let backend = backends.get(declared.kind).map_err(|e| err(&e))?;
            let Some(provider) = backend.served(name, declared, env).map_err(|e| err(&e))? else {
                continue;
            };
            http.insert(
                name.clone(),
                HttpProvider {
                    provider,
                    model: declared.model.clone(),
                    models: declared
                        .model
                        .iter()
                        .chain(&declared.models)
                        .cloned()
                        .collect(),
                    any_model: declared.any_model,
                },
            );
        }
        // A scenarios directory adds its own and replaces built-ins of the same name.
        let scripted = scenario_models(scenarios_dir).map_err(|e| err(&e))?;
        let toolbox: Arc<dyn Toolbox> =
            Arc::new(build_registry(&config.skills, &sandbox, None).map_err(|e| err(&e))?);
        let agent_providers = http
            .iter()
            .map(|(name, p)| (name.clone(), Arc::clone(&p.provider)))
            .collect();
        let backend = ConfiguredBackend {
            http,
            default_provider: config.default_provider.clone(),
            scripted,
            skills: config.skills.clone(),
            sandbox,
            toolbox,
            agents: config.agents.clone(),
            agent_providers,
            mcp: Vec::new(),
        };
        backend.check_agents()?;
        Ok(backend)
    }

    /// Offers `toolbox` (the configured skills plus the MCP servers' tools) to the turns
    /// of HTTP providers instead of the configured skills alone.
    pub fn with_toolbox(mut self, toolbox: Arc<dyn Toolbox>) -> Result<Self, BackendBuildError> {
        self.toolbox = toolbox;
        self.check_agents()?;
        Ok(self)
    }

    /// Reports the health of `servers` (the MCP servers of the toolbox) at `/v1/health`.
    pub fn with_mcp_servers(mut self, servers: Vec<Arc<buddy_mcp::McpSource>>) -> Self {
        self.mcp = servers;
        self
    }

    /// Refuses, at start, `[[agents]]` that no turn of an HTTP provider could be offered
    /// (a bad name, an unknown agent or provider, a clash with a skill).
    fn check_agents(&self) -> Result<(), BackendBuildError> {
        match self.http.values().next() {
            Some(first) => self
                .with_agents(Arc::clone(&self.toolbox), &first.provider, &[])
                .map(drop)
                .map_err(|e| {
                    BackendBuildError(format!(
                        "an agent declaration ([[agents]] in buddy.toml): {e}"
                    ))
                }),
            None => Ok(()),
        }
    }

    /// `toolbox` with the `[[agents]]` and `more` (a scenario's own) offered beside its
    /// tools; their model calls go to `provider`, or to the configured one they name.
    fn with_agents(
        &self,
        toolbox: Arc<dyn Toolbox>,
        provider: &Arc<dyn Provider>,
        more: &[AgentSpec],
    ) -> Result<Arc<dyn Toolbox>, BackendError> {
        let declared = self.agents.iter().chain(more).cloned().collect();
        attach_agents(
            declared,
            toolbox,
            Arc::clone(provider),
            self.agent_providers.clone(),
        )
        .map_err(|e| BackendError(e.to_string()))
    }

    fn scripted(&self, name: &str) -> Result<Resolved, BackendError> {
        let model = self.scripted.get(name).ok_or_else(|| {
            BackendError(format!(
                "no scripted scenario named `{name}`; GET /v1/models lists the models this server has"
            ))
        })?;
        // Stub tools count their calls: every turn gets fresh ones.
        let registry = build_registry(&self.skills, &self.sandbox, Some(&model.scenario))
            .map_err(|e| BackendError(e.to_string()))?;
        let provider = Arc::clone(&model.provider) as Arc<dyn Provider>;
        let toolbox = self.with_agents(Arc::new(registry), &provider, &model.scenario.agents)?;
        Ok(Resolved {
            provider,
            toolbox,
            model: format!("scripted:{name}"),
            policy: model.scenario.policy.clone(),
            system: model.scenario.system.clone(),
            clock: model.scenario.wait_clock(),
        })
    }

    fn http(&self, name: &str, model: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = self.http.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.http.keys().map(String::as_str).collect();
            BackendError(format!(
                "no provider named `{name}`; configured: [{}]",
                known.join(", ")
            ))
        })?;
        let model = model
            .map(str::to_owned)
            .or_else(|| provider.model.clone())
            .ok_or_else(|| {
                BackendError(format!(
                    "provider `{name}` has no default model: name one in `model`"
                ))
            })?;
        if !provider.serves(&model) {
            return Err(BackendError(format!(
                "unknown model `{model}` for provider `{name}`; known: [{}]. GET /v1/models lists them \
                 (an operator adds names with `models = [...]`, or lets any through with \
                 `any_model = true`, under [providers.{name}])",
                provider.models.join(", ")
            )));
        }
        Ok(Resolved {
            toolbox: self.with_agents(Arc::clone(&self.toolbox), &provider.provider, &[])?,
            provider: Arc::clone(&provider.provider),
            model,
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

impl Backend for ConfiguredBackend {
    fn mcp_servers(&self) -> Vec<Arc<buddy_mcp::McpSource>> {
        self.mcp.clone()
    }

    fn models(&self) -> Vec<String> {
        if self.http.is_empty() {
            return self
                .scripted
                .keys()
                .map(|n| format!("scripted:{n}"))
                .collect();
        }
        let mut models: Vec<String> = self
            .http
            .values()
            .flat_map(|p| p.models.iter().cloned())
            .collect();
        models.sort();
        models.dedup();
        models
    }

    fn resolve(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Resolved, BackendError> {
        match (provider, model) {
            (Some("scripted"), model) => self
                .scripted(model.map_or("offline_assistant", |m| m.trim_start_matches("scripted:"))),
            (Some(name), model) => self.http(name, model),
            (None, Some(model)) => {
                if let Some(name) = model.strip_prefix("scripted:") {
                    return self.scripted(name);
                }
                if let Some((name, _)) = self
                    .http
                    .iter()
                    .find(|(_, p)| p.models.iter().any(|m| m == model))
                {
                    return self.http(name, Some(model));
                }
                match &self.default_provider {
                    Some(name) if self.http.contains_key(name) => self.http(name, Some(model)),
                    _ if self.scripted.contains_key(model) => self.scripted(model),
                    _ => Err(BackendError(format!(
                        "unknown model `{model}`; GET /v1/models lists the models this server has"
                    ))),
                }
            }
            (None, None) => match &self.default_provider {
                Some(name) if self.http.contains_key(name) => self.http(name, None),
                _ => self.scripted("offline_assistant"),
            },
        }
    }
}
