//! `buddy doctor`'s look at `[[agents]]`: each declaration checked as a turn would use
//! it — its own fields and limits, the provider and model its calls go to, the skills and
//! agents it names — with what to change, before a turn finds out.

use std::collections::{BTreeMap, HashSet};

use buddy_engine::{AgentSpec, glob_match};
use buddy_providers::ProviderConfig;

/// One agent's findings: nothing when it is usable as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentFindings {
    /// The agent's name.
    pub name: String,
    /// What must change, each in words that say how.
    pub problems: Vec<String>,
}

/// What the agents may use: the tools of this configuration (skills and the MCP
/// servers' tools that started) and the MCP servers that did not start (their tools are
/// not known, so names under them are not judged).
#[derive(Debug, Default)]
pub struct Known<'a> {
    /// Every tool name a turn would be offered.
    pub tools: Vec<&'a str>,
    /// MCP servers whose tools could not be listed.
    pub unlisted_servers: Vec<&'a str>,
}

/// Checks every declaration of `agents` against `providers` and `known`.
pub fn check_agents(
    agents: &[AgentSpec],
    providers: &BTreeMap<String, ProviderConfig>,
    known: &Known<'_>,
) -> Vec<AgentFindings> {
    let declared: HashSet<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    let mut seen = HashSet::new();
    agents
        .iter()
        .map(|agent| {
            let mut problems = Vec::new();
            if let Err(e) = agent.check() {
                problems.push(e.to_string());
            }
            if !seen.insert(agent.name.as_str()) {
                problems.push(format!(
                    "agent `{}` is declared twice: give each agent its own name",
                    agent.name
                ));
            }
            if known.tools.contains(&agent.name.as_str()) {
                problems.push(format!(
                    "agent `{}` has the name of a skill: rename the agent",
                    agent.name
                ));
            }
            problems.extend(provider_problem(agent, providers));
            problems.extend(skill_problems(agent, known));
            for other in &agent.agents {
                if other == &agent.name {
                    problems.push(format!(
                        "agent `{}` lists itself in `agents`: an agent may not start itself (every such call is refused); drop it",
                        agent.name
                    ));
                } else if !declared.contains(other.as_str()) {
                    problems.push(format!(
                        "agent `{}` lists agent `{other}`, which is not declared: declare it or drop it from `agents`",
                        agent.name
                    ));
                }
            }
            AgentFindings {
                name: agent.name.clone(),
                problems,
            }
        })
        .collect()
}

/// The provider an agent names: configured, and told which model to run.
fn provider_problem(
    agent: &AgentSpec,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Option<String> {
    let name = agent.provider.as_ref()?;
    let Some(config) = providers.get(name) else {
        return Some(format!(
            "agent `{}` names provider `{name}`, which is not configured: add it under [providers] or drop `provider`",
            agent.name
        ));
    };
    if agent.model.is_some() {
        return None;
    }
    // Its calls carry the calling turn's model name unless it names its own.
    let hint = config
        .model
        .as_deref()
        .map(|m| format!(" (`model = \"{m}\"`, the provider's)"))
        .unwrap_or_default();
    Some(format!(
        "agent `{}` runs on provider `{name}` without a `model`: its calls would ask `{name}` for the calling turn's model; set `model`{hint}",
        agent.name
    ))
}

/// The skills an agent names (names or globs): each must match a tool this
/// configuration offers, or belong to an MCP server whose tools are not known.
fn skill_problems(agent: &AgentSpec, known: &Known<'_>) -> Vec<String> {
    agent
        .skills
        .iter()
        .filter(|pattern| !known.tools.iter().any(|tool| glob_match(pattern, tool)))
        .filter(|pattern| {
            !known
                .unlisted_servers
                .iter()
                .any(|server| pattern.starts_with(&format!("{server}__")))
        })
        .map(|pattern| {
            format!(
                "agent `{}` may use `{pattern}`, which names no skill or tool here ({}): fix the name or drop it",
                agent.name,
                match known.tools.as_slice() {
                    [] => "there are none".to_owned(),
                    tools => format!("there are {}", tools.join(", ")),
                }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str) -> AgentSpec {
        AgentSpec {
            name: name.into(),
            description: "does a part".into(),
            ..AgentSpec::default()
        }
    }

    fn providers() -> BTreeMap<String, ProviderConfig> {
        let mut local = ProviderConfig::of_kind(buddy_providers::ProviderKind::Openai);
        local.model = Some("small".into());
        BTreeMap::from([("local".to_owned(), local)])
    }

    #[test]
    fn a_usable_declaration_has_nothing_to_say() {
        let reader = AgentSpec {
            skills: vec!["read_*".into(), "notes__search".into()],
            agents: vec!["helper".into()],
            provider: Some("local".into()),
            model: Some("small".into()),
            ..agent("reader")
        };
        let known = Known {
            tools: vec!["read_file", "list_dir"],
            unlisted_servers: vec!["notes"],
        };
        let found = check_agents(&[reader, agent("helper")], &providers(), &known);
        assert!(found.iter().all(|f| f.problems.is_empty()), "{found:?}");
    }

    #[test]
    fn each_problem_is_named_with_what_to_change() {
        let bad = AgentSpec {
            skills: vec!["grep".into()],
            agents: vec!["bad".into(), "ghost".into()],
            provider: Some("local".into()),
            ..agent("bad")
        };
        let nowhere = AgentSpec {
            provider: Some("nowhere".into()),
            ..agent("list_dir")
        };
        let quiet = AgentSpec {
            description: " ".into(),
            ..agent("quiet")
        };
        let known = Known {
            tools: vec!["read_file", "list_dir"],
            unlisted_servers: vec![],
        };
        let found = check_agents(&[bad, nowhere, quiet], &providers(), &known);
        let said = |i: usize| found[i].problems.join("\n");
        assert!(
            said(0).contains("without a `model`") && said(0).contains("model = \"small\""),
            "{}",
            said(0)
        );
        assert!(
            said(0).contains(
                "`grep`, which names no skill or tool here (there are read_file, list_dir)"
            ),
            "{}",
            said(0)
        );
        assert!(said(0).contains("lists itself"), "{}", said(0));
        assert!(
            said(0).contains("lists agent `ghost`, which is not declared"),
            "{}",
            said(0)
        );
        assert_eq!(found[0].problems.len(), 4, "{:?}", found[0]);
        assert!(
            said(1).contains("provider `nowhere`, which is not configured"),
            "{}",
            said(1)
        );
        assert!(said(1).contains("has the name of a skill"), "{}", said(1));
        assert!(said(2).contains("has no description"), "{}", said(2));
    }

    #[test]
    fn a_name_declared_twice_is_said_once_for_the_second() {
        let found = check_agents(&[agent("a"), agent("a")], &providers(), &Known::default());
        assert!(found[0].problems.is_empty());
        assert_eq!(found[1].problems.len(), 1);
        assert!(found[1].problems[0].contains("declared twice"));
    }
}
