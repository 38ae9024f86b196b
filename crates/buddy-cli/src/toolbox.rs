//! Builds the skill registry a turn uses from the config and (optionally) a scenario.

use std::sync::Arc;
use std::time::Duration;

use buddy_scripted::Scenario;
use buddy_scripted::tools::scenario_skills;
use buddy_skills::builtin::{FileLimits, builtin_skill};
use buddy_skills::{ChildPrivileges, CommandSkill, RegistryError, Sandbox, SkillRegistry};

use buddy_core::{Skill, Toolbox};
use buddy_mcp::{McpSource, McpToolbox, RegistryFactory, Sampler};

use crate::config::{BuddyConfig, SkillsConfig};

/// The registry could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ToolboxError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    UnknownBuiltin(#[from] buddy_scripted::tools::UnknownBuiltin),
    #[error("{0}")]
    Command(String),
    #[error(transparent)]
    Mcp(#[from] buddy_mcp::ToolboxError),
}

/// The registry for a turn: the scenario's tools when one is given (stubs and the
/// built-ins it names), else the configured built-ins; plus the configured command skills.
pub fn build_registry(
    skills: &SkillsConfig,
    sandbox: &Sandbox,
    scenario: Option<&Scenario>,
) -> Result<SkillRegistry, ToolboxError> {
    let mut registry = registry_factory(skills)();
    registry.register_all(build_skills(skills, sandbox, scenario)?)?;
    Ok(registry)
}

/// The toolbox for turns: [`build_registry`]'s skills, plus the tools of every `[[mcp]]`
/// server (started here, at once; a required one that cannot start is an error naming
/// it, another is named on stderr and joins when it comes up). Each server is offered
/// its roots (its `roots`; the sandbox is one choice); `sampler` answers the sampling requests
/// of the servers whose entry says `sampling = true` (none: they are refused);
/// `browser` sends a person to authorize an HTTP server that asks for OAuth (none:
/// unattended, the server's error says to run `buddy mcp login`).
pub async fn build_toolbox(
    config: &BuddyConfig,
    sandbox: &Sandbox,
    scenario: Option<&Scenario>,
    sampler: Option<Sampler>,
    browser: Option<Arc<dyn buddy_mcp::Browser>>,
) -> Result<Arc<dyn Toolbox>, ToolboxError> {
    build_toolbox_watched(config, sandbox, scenario, sampler, browser)
        .await
        .map(|(toolbox, _)| toolbox)
}

/// [`build_toolbox`], and its MCP servers, whose health `buddy serve` reports.
pub async fn build_toolbox_watched(
    config: &BuddyConfig,
    sandbox: &Sandbox,
    scenario: Option<&Scenario>,
    sampler: Option<Sampler>,
    browser: Option<Arc<dyn buddy_mcp::Browser>>,
) -> Result<(Arc<dyn Toolbox>, Vec<Arc<McpSource>>), ToolboxError> {
    if config.mcp.is_empty() {
        let registry = build_registry(&config.skills, sandbox, scenario)?;
        return Ok((Arc::new(registry), Vec::new()));
    }
    let sources = config
        .mcp
        .iter()
        .cloned()
        .map(|mut server| {
            server.sandbox = Some(sandbox.root().to_path_buf());
            let source = McpSource::new(server);
            if let Some(sampler) = &sampler {
                source.set_sampler(sampler.clone());
            }
            if let Some(browser) = &browser {
                source.set_browser(Arc::clone(browser));
            }
            source
        })
        .collect();
    let base = Arc::new(build_registry(&config.skills, sandbox, scenario)?);
    let toolbox = McpToolbox::start(base, sources, registry_factory(&config.skills)).await?;
    for source in toolbox.sources() {
        if let buddy_mcp::ServerState::Down(why) = source.state() {
            eprintln!(
                "buddy: MCP server `{}` is not running, its tools are left out for now (tried again in the background): {why}",
                source.config().name
            );
        }
    }
    let sources = toolbox.sources().to_vec();
    Ok((Arc::new(toolbox.into_table()), sources))
}

/// Makes empty registries with the `[skills]` settings (timeout, result cap).
pub fn registry_factory(skills: &SkillsConfig) -> RegistryFactory {
    let timeout = skills.timeout_secs;
    let max_result = skills.max_result_bytes;
    Box::new(move || {
        let mut registry = SkillRegistry::new();
        if let Some(t) = timeout {
            registry = registry.with_default_timeout(Duration::from_secs_f64(t));
        }
        if let Some(max) = max_result {
            registry = registry.with_max_result_bytes(max);
        }
        registry
    })
}

/// buddy's own skills for a turn (see [`build_registry`]).
pub fn build_skills(
    skills: &SkillsConfig,
    sandbox: &Sandbox,
    scenario: Option<&Scenario>,
) -> Result<Vec<Arc<dyn Skill>>, ToolboxError> {
    let mut registry: Vec<Arc<dyn Skill>> = Vec::new();
    let limits = FileLimits::default();
    match scenario {
        Some(scenario) => registry.extend(scenario_skills(scenario, sandbox)?),
        None => {
            for name in &skills.builtin {
                if let Some(skill) = builtin_skill(name, sandbox, limits) {
                    registry.push(skill);
                }
            }
        }
    }
    for declared in &skills.command {
        let skill = CommandSkill::new(declared.clone(), sandbox.root())
            .map_err(ToolboxError::Command)?
            .with_privileges(ChildPrivileges::for_run_as(skills.run_as.as_ref()));
        registry.push(Arc::new(skill));
    }
    Ok(registry)
}
