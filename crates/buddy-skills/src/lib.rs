//! buddy-skills: the tools a model can call, and the registry that runs them safely.
//!
//! [`SkillRegistry`] validates every call's arguments against the skill's JSON Schema
//! before running it, bounds it with a timeout, caps its output, and turns every
//! failure (unknown tool, malformed JSON, schema violation, timeout, skill error,
//! even a panic) into an error result the model can read.

pub mod builtin;
#[cfg(target_os = "linux")]
mod call_reaper;
mod command;
mod output_cap;
mod privileges;
mod process_tree;
mod quoted_value;
mod registry;
mod sandbox;

pub use command::{BASELINE_ENV, CommandSkill, CommandSkillConfig, clean_environment};
pub use output_cap::cap_text;
pub use privileges::{ChildPrivileges, RunAs, RunAsError};
pub use process_tree::hide_own_environment;
pub use registry::{RegistryError, SkillRegistry};
pub use sandbox::{Resolution, Sandbox, SandboxError};
