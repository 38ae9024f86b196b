//! The labels `buddy run` puts before a sub-agent's lines: each child named by its agent
//! and its task (`[helper: part one]`), with a short number where one caller started
//! several children of one agent (`[helper#2: part two]`), so parallel children's lines
//! can be told apart.

use std::collections::HashMap;

use buddy_core::{AgentHop, ChatEvent};

/// Longest task shown in a label, in characters.
const TASK_CHARS: usize = 40;

/// Arguments longer than this are not read for a task (a call's arguments can be
/// megabytes; a sub-agent's are a short task).
const MAX_ARGUMENTS: usize = 64 * 1024;

/// What the labels know of the calls seen so far: each call's task and its number among
/// the calls of its name that its caller made.
#[derive(Debug, Default)]
pub struct AgentLabels {
    calls: HashMap<String, Call>,
    /// (caller's scope, tool name) → how many such calls were seen.
    counts: HashMap<(String, String), u32>,
}

#[derive(Debug)]
struct Call {
    scope: String,
    name: String,
    number: u32,
    task: Option<String>,
}

impl AgentLabels {
    /// Notes the calls an event starts (at the top level or inside a sub-agent).
    pub fn observe(&mut self, event: &ChatEvent) {
        let (path, inner) = match event {
            ChatEvent::Agent { path, event } => (path.as_slice(), event.as_ref()),
            other => (&[][..], other),
        };
        let ChatEvent::ToolCallStart {
            id,
            name,
            arguments,
        } = inner
        else {
            return;
        };
        let scope = scope_of(path);
        let count = self
            .counts
            .entry((scope.clone(), name.clone()))
            .or_insert(0);
        *count += 1;
        let task = task_of(arguments.as_str());
        self.calls.insert(
            id.clone(),
            Call {
                scope,
                name: name.clone(),
                number: *count,
                task,
            },
        );
    }

    /// The label of the sub-agent at the end of `path`: every hop's agent (numbered
    /// where its caller started several of that agent), then the last hop's task.
    pub fn label(&self, path: &[AgentHop]) -> String {
        let names: Vec<String> = path
            .iter()
            .map(|hop| match self.calls.get(&hop.call_id) {
                Some(call) if self.shared(call) => format!("{}#{}", hop.agent, call.number),
                _ => hop.agent.clone(),
            })
            .collect();
        let task = path
            .last()
            .and_then(|hop| self.calls.get(&hop.call_id))
            .and_then(|call| call.task.as_deref());
        match task {
            Some(task) => format!("{}: {task}", names.join(" › ")),
            None => names.join(" › "),
        }
    }

    /// Whether the caller of `call` started more than one call of its name.
    fn shared(&self, call: &Call) -> bool {
        self.counts
            .get(&(call.scope.clone(), call.name.clone()))
            .is_some_and(|n| *n > 1)
    }
}

/// The scope a call is made in: the call ids of the delegations that lead to it.
fn scope_of(path: &[AgentHop]) -> String {
    path.iter()
        .map(|hop| hop.call_id.as_str())
        .collect::<Vec<_>>()
        .join("/")
}

/// A sub-agent call's task, on one line and cut to [`TASK_CHARS`]; `None` for a call
/// without one.
fn task_of(arguments: &str) -> Option<String> {
    if arguments.len() > MAX_ARGUMENTS || !arguments.contains("\"task\"") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let task = value.get("task")?.as_str()?;
    let flat = task.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return None;
    }
    Some(match flat.char_indices().nth(TASK_CHARS) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(path: &[AgentHop], id: &str, name: &str, arguments: &str) -> ChatEvent {
        let event = ChatEvent::ToolCallStart {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        };
        match path {
            [] => event,
            path => ChatEvent::Agent {
                path: path.to_vec(),
                event: Box::new(event),
            },
        }
    }

    fn hop(agent: &str, call_id: &str) -> AgentHop {
        AgentHop {
            agent: agent.into(),
            call_id: call_id.into(),
        }
    }

    #[test]
    fn children_of_one_agent_are_numbered_and_each_shows_its_task() {
        let mut labels = AgentLabels::default();
        labels.observe(&start(&[], "c1", "helper", r#"{"task": "part one"}"#));
        labels.observe(&start(&[], "c2", "helper", r#"{"task": "part  two\n"}"#));
        labels.observe(&start(&[], "c3", "lead", r#"{"task": "the archive"}"#));
        assert_eq!(labels.label(&[hop("helper", "c1")]), "helper#1: part one");
        assert_eq!(labels.label(&[hop("helper", "c2")]), "helper#2: part two");
        assert_eq!(labels.label(&[hop("lead", "c3")]), "lead: the archive");
        // The lead's one reader is not numbered; the path names each hop.
        let lead = [hop("lead", "c3")];
        labels.observe(&start(
            &lead,
            "c4",
            "reader",
            r#"{"task": "a very long task that goes on and on past forty characters"}"#,
        ));
        assert_eq!(
            labels.label(&[hop("lead", "c3"), hop("reader", "c4")]),
            "lead › reader: a very long task that goes on and on pas…"
        );
    }

    #[test]
    fn a_call_without_a_task_or_unseen_is_named_alone() {
        let mut labels = AgentLabels::default();
        labels.observe(&start(&[], "c1", "helper", "not json"));
        labels.observe(&start(&[], "c2", "other", r#"{"task": 3}"#));
        assert_eq!(labels.label(&[hop("helper", "c1")]), "helper");
        assert_eq!(labels.label(&[hop("other", "c2")]), "other");
        assert_eq!(labels.label(&[hop("ghost", "c9")]), "ghost");
        assert_eq!(labels.label(&[]), "");
    }
}
