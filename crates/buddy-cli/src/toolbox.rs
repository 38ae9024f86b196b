//! Builds the skill registry a turn uses from the config and (optionally) a scenario.

use std::sync::Arc;
use std::time::Duration;

use buddy_providers::Scenario;
use buddy_skills::builtin::{FileLimits, builtin_skill};
use buddy_skills::{CommandSkill, RegistryError, Sandbox, SkillRegistry};

use crate::config::SkillsConfig;

/// The registry could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ToolboxError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("scenario `{scenario}` uses `{name}`, which is not a built-in skill")]
    UnknownBuiltin { scenario: String, name: String },
    #[error("{0}")]
    Command(String),
}

/// The registry for a turn: the scenario's tools when one is given (stubs and the
/// built-ins it names), else the configured built-ins; plus the configured command skills.
pub fn build_registry(
    skills: &SkillsConfig,
    sandbox: &Sandbox,
    scenario: Option<&Scenario>,
) -> Result<SkillRegistry, ToolboxError> {
    let mut registry = SkillRegistry::new();
    if let Some(t) = skills.timeout_secs {
        registry = registry.with_default_timeout(Duration::from_secs_f64(t));
    }
    if let Some(max) = skills.max_result_bytes {
        registry = registry.with_max_result_bytes(max);
    }
    let limits = FileLimits::default();
    match scenario {
        Some(scenario) => {
            for name in scenario.builtin_tools() {
                let skill = builtin_skill(name, sandbox, limits).ok_or_else(|| {
                    ToolboxError::UnknownBuiltin {
                        scenario: scenario.name.clone(),
                        name: name.to_owned(),
                    }
                })?;
                registry.register(skill)?;
            }
            registry.register_all(scenario.stub_skills())?;
        }
        None => {
            for name in &skills.builtin {
                if let Some(skill) = builtin_skill(name, sandbox, limits) {
                    registry.register(skill)?;
                }
            }
        }
    }
    for declared in &skills.command {
        let skill =
            CommandSkill::new(declared.clone(), sandbox.root()).map_err(ToolboxError::Command)?;
        registry.register(Arc::new(skill))?;
    }
    Ok(registry)
}
