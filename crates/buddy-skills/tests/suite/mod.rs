//! buddy-skills integration tests through the public API: the registry as a `Toolbox`.

mod command;
mod files;
mod races;
mod registry;
mod special;

use std::sync::Arc;

use buddy_core::{SkillContext, ToolCall, ToolOutcome, Toolbox};
use buddy_skills::builtin::{FileLimits, builtin_skills};
use buddy_skills::{Sandbox, SkillRegistry};

/// Invokes `name` with raw argument text.
pub async fn invoke(registry: &SkillRegistry, name: &str, args: &str) -> ToolOutcome {
    let call = ToolCall::new("call_1", name, args);
    registry
        .invoke(
            &call,
            SkillContext {
                call_id: "call_1".into(),
                arguments: args.into(),
                ..SkillContext::default()
            },
        )
        .await
}

/// A registry of the built-ins over a fresh temporary sandbox.
pub fn builtins(limits: FileLimits) -> (tempfile::TempDir, SkillRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(dir.path()).unwrap();
    let mut registry = SkillRegistry::new();
    registry
        .register_all(builtin_skills(&sandbox, limits))
        .unwrap();
    (dir, registry)
}

/// Keeps `Arc` in scope for the modules.
pub type SkillArc = Arc<dyn buddy_core::Skill>;
