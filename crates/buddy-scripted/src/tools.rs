//! The tools a scenario declares: its stub tools and the built-in skills it names.

use std::sync::Arc;

use buddy_core::Skill;
use buddy_skills::Sandbox;
use buddy_skills::builtin::{FileLimits, builtin_skill};

use crate::scenario::Scenario;

/// A scenario names a built-in skill buddy does not have.
#[derive(Debug, thiserror::Error)]
#[error("scenario `{scenario}` uses `{name}`, which is not a built-in skill")]
pub struct UnknownBuiltin {
    pub scenario: String,
    pub name: String,
}

/// Fresh instances of the scenario's tools: the built-ins it names (confined to
/// `sandbox`), then its stubs.
pub fn scenario_skills(
    scenario: &Scenario,
    sandbox: &Sandbox,
) -> Result<Vec<Arc<dyn Skill>>, UnknownBuiltin> {
    let mut skills = Vec::new();
    for name in scenario.builtin_tools() {
        let skill =
            builtin_skill(name, sandbox, FileLimits::default()).ok_or_else(|| UnknownBuiltin {
                scenario: scenario.name.clone(),
                name: name.to_owned(),
            })?;
        skills.push(skill);
    }
    skills.extend(scenario.stub_skills());
    Ok(skills)
}
