//! An agent as an operator declares it (`[[agents]]` in buddy.toml, `agents` of a server
//! request): what the calling model sees, and what the sub-agent may use.

use serde::{Deserialize, Serialize};

use crate::policy::{LoopPolicy, PolicyError, PolicyPatch};

/// The most recent messages of the calling conversation a declaration may ask to pass on.
pub const MAX_HISTORY: u32 = 20;

/// One declared sub-agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// The tool name the calling model uses (letters, digits, `_` and `-`).
    pub name: String,
    /// What the agent is for, shown to the calling model.
    pub description: String,
    /// Its system prompt.
    #[serde(default)]
    pub instructions: String,
    /// Its model (default: the calling turn's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its provider, by name (default: the calling turn's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The skills it may use, by name or glob (`fs_*`); none by default.
    #[serde(default)]
    pub skills: Vec<String>,
    /// The agents it may delegate to in turn, by name.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Its policy, over the calling turn's; its limits are a lease carved from what the
    /// calling turn has left, never more.
    #[serde(default, skip_serializing_if = "PolicyPatch::is_empty")]
    pub policy: PolicyPatch,
    /// How many of the calling conversation's latest messages it is shown (as text
    /// beside its task); 0, the default, shows none: a sub-agent starts fresh.
    #[serde(default)]
    pub history: u32,
}

/// A declaration that cannot be used, saying what to change.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AgentSpecError {
    #[error(
        "agent name `{0}` is not usable as a tool name: use 1 to 64 letters, digits, `_` or `-`"
    )]
    BadName(String),
    #[error(
        "agent `{0}` has no description: say what it is for, so the model knows when to call it"
    )]
    NoDescription(String),
    #[error("agent `{0}` is declared twice: give each agent its own name")]
    Duplicate(String),
    #[error("agent `{agent}` has the name of a skill: rename the agent")]
    ClashesWithSkill { agent: String },
    #[error(
        "agent `{agent}` lists agent `{missing}`, which is not declared: declare it or drop it from `agents`"
    )]
    UnknownAgent { agent: String, missing: String },
    #[error("agent `{agent}` asks for {asked} history messages; at most {max} may be passed on")]
    History { agent: String, asked: u32, max: u32 },
    #[error("agent `{agent}`: {source}")]
    Policy {
        agent: String,
        #[source]
        source: PolicyError,
    },
    #[error(
        "agent `{agent}` names provider `{provider}`, which is not configured: add it under [providers] or drop `provider`"
    )]
    UnknownProvider { agent: String, provider: String },
}

impl AgentSpec {
    /// Checks the declaration on its own (names of other agents are checked by the set).
    pub fn check(&self) -> Result<(), AgentSpecError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Err(AgentSpecError::BadName(self.name.clone()));
        }
        if self.description.trim().is_empty() {
            return Err(AgentSpecError::NoDescription(self.name.clone()));
        }
        if self.history > MAX_HISTORY {
            return Err(AgentSpecError::History {
                agent: self.name.clone(),
                asked: self.history,
                max: MAX_HISTORY,
            });
        }
        LoopPolicy::default()
            .apply(&self.policy)
            .map_err(|source| AgentSpecError::Policy {
                agent: self.name.clone(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> AgentSpec {
        AgentSpec {
            name: name.into(),
            description: "finds things".into(),
            ..AgentSpec::default()
        }
    }

    #[test]
    fn declarations_are_read_and_checked() {
        let toml_like = serde_json::json!({
            "name": "researcher", "description": "reads the web", "skills": ["fs_*"],
            "policy": {"max_model_calls": 6}, "history": 4
        });
        let spec: AgentSpec = serde_json::from_value(toml_like).expect("valid");
        assert_eq!(spec.check(), Ok(()));
        assert_eq!(spec.skills, vec!["fs_*".to_owned()]);
        assert!(matches!(
            named("a b").check(),
            Err(AgentSpecError::BadName(_))
        ));
        let quiet = AgentSpec {
            description: " ".into(),
            ..named("x")
        };
        assert!(matches!(
            quiet.check(),
            Err(AgentSpecError::NoDescription(_))
        ));
        let nosy = AgentSpec {
            history: 99,
            ..named("x")
        };
        assert!(matches!(nosy.check(), Err(AgentSpecError::History { .. })));
        let unknown = serde_json::from_value::<AgentSpec>(
            serde_json::json!({"name": "x", "description": "d", "tools": []}),
        );
        assert!(unknown.is_err(), "unknown fields are refused, not ignored");
    }
}
