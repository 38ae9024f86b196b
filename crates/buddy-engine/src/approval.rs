//! Which tool calls wait for a person's yes, and what the person decided.
//!
//! A call that needs approval pauses the turn (`approval_required`) before any call of
//! its reply runs. The pause is the conversation itself: it ends with the model's call
//! message and no results, so a store that keeps the messages keeps the pause. The
//! caller resumes with a [`Resume::Decisions`]; the engine accepts it only while every
//! call of that message is still open, which is what makes an approved call run once.

use std::collections::{BTreeMap, HashMap};

use buddy_core::{Message, PendingCall, RepeatSemantics, ToolCall};
use serde::{Deserialize, Serialize};

use crate::glob::glob_match;
use crate::words;

/// When a skill's calls need approval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Calls run without asking.
    #[default]
    Never,
    /// Every call is asked about.
    Always,
    /// Calls to skills with side effects (`effectful`: `write_file`, MCP tools marked
    /// destructive or not marked at all) are asked about.
    Destructive,
}

impl ApprovalMode {
    /// The name used in buddy.toml and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Never => "never",
            ApprovalMode::Always => "always",
            ApprovalMode::Destructive => "destructive",
        }
    }
}

/// The approval policy of a turn: a mode for every skill, per-skill overrides (glob
/// patterns, the longest matching pattern wins), and whether anyone can be asked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalRules {
    pub mode: ApprovalMode,
    pub skills: BTreeMap<String, ApprovalMode>,
    /// Nobody can answer (a non-interactive run, the OpenAI endpoints): a call that needs
    /// approval is not run, and the model reads why, instead of the turn pausing.
    pub unattended: bool,
}

impl ApprovalRules {
    /// Rules that ask about every effectful call.
    pub fn destructive() -> Self {
        ApprovalRules {
            mode: ApprovalMode::Destructive,
            ..ApprovalRules::default()
        }
    }

    /// The mode that applies to skill `name`.
    pub fn mode_for(&self, name: &str) -> ApprovalMode {
        self.skills
            .iter()
            .filter(|(pattern, _)| glob_match(pattern, name))
            .max_by_key(|(pattern, _)| pattern.len())
            .map_or(self.mode, |(_, mode)| *mode)
    }

    /// Why a call to `name` needs approval, or `None` when it runs without asking.
    pub fn needs_approval(&self, name: &str, semantics: RepeatSemantics) -> Option<String> {
        match self.mode_for(name) {
            ApprovalMode::Never => None,
            ApprovalMode::Always => Some(format!("approval is `always` for `{name}`")),
            ApprovalMode::Destructive if semantics == RepeatSemantics::Effectful => Some(format!(
                "`{name}` has side effects (it is `effectful`), and approval is `destructive`"
            )),
            ApprovalMode::Destructive => None,
        }
    }
}

/// A person's decision about one pending call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum Decision {
    /// Run the call as the model asked.
    Approve,
    /// Do not run it; the model reads the reason.
    Reject {
        #[serde(default)]
        reason: Option<String>,
    },
    /// Run it with these arguments instead (a JSON object); the model is told.
    Edit { arguments: serde_json::Value },
}

/// A decision for the call with id `call_id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallDecision {
    pub call_id: String,
    #[serde(flatten)]
    pub decision: Decision,
}

/// How a turn that paused goes on instead of starting from a new user message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resume {
    /// The turn paused for approval: a decision per pending call. Calls of the same
    /// reply that need no approval run as well.
    Decisions(Vec<CallDecision>),
    /// The turn stopped at a limit: it goes on under the request's policy as a fresh
    /// budget. Earlier results stay in the history and in the guards' memory, so work
    /// already done is not repeated.
    Continue,
}

/// The calls of a reply that need a person's approval, with why. `semantics` gives a
/// skill's semantics (`None` for an unknown tool, which needs none: it fails anyway);
/// calls already decided are not asked about again.
pub(crate) fn calls_needing_approval(
    rules: &ApprovalRules,
    calls: &[ToolCall],
    semantics: impl Fn(&str) -> Option<RepeatSemantics>,
    decided: &HashMap<String, Decision>,
) -> Vec<PendingCall> {
    calls
        .iter()
        .filter(|c| !decided.contains_key(&c.id))
        .filter_map(|c| {
            let why = rules.needs_approval(&c.name, semantics(&c.name)?)?;
            Some(PendingCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
                why,
            })
        })
        .collect()
}

/// The round a resume with decisions answers.
#[derive(Debug)]
pub(crate) struct ResumedRound {
    /// The waiting calls, with edited arguments applied.
    pub calls: Vec<ToolCall>,
    /// The text the model wrote beside them.
    pub text: String,
    /// Each decision, by call id.
    pub decided: HashMap<String, Decision>,
    /// Notes for the model (the arguments a person changed).
    pub notes: Vec<String>,
}

/// The round a resume with decisions answers: the calls of the history's last message,
/// all still open, with edited arguments applied. Refused (the message says why) when
/// nothing waits, a decision names a call that is not waiting, or a call that needs
/// approval has no decision.
pub(crate) fn resumed_round(
    history: &[Message],
    decisions: &[CallDecision],
    rules: &ApprovalRules,
    semantics: impl Fn(&str) -> Option<RepeatSemantics>,
) -> Result<ResumedRound, String> {
    let Some(Message::Assistant {
        content,
        tool_calls,
    }) = history.last()
    else {
        return Err(NOTHING_WAITS.to_owned());
    };
    if tool_calls.is_empty() {
        return Err(NOTHING_WAITS.to_owned());
    }
    let mut calls = tool_calls.clone();
    let text = content.clone().unwrap_or_default();
    let mut decided: HashMap<String, Decision> = HashMap::new();
    for d in decisions {
        if !calls.iter().any(|c| c.id == d.call_id) {
            let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
            return Err(format!(
                "call `{}` is not waiting for approval (it may have been decided already); the waiting calls are: {}",
                d.call_id,
                ids.join(", ")
            ));
        }
        if decided
            .insert(d.call_id.clone(), d.decision.clone())
            .is_some()
        {
            return Err(format!("call `{}` has two decisions; send one", d.call_id));
        }
    }
    let mut notes = Vec::new();
    for call in &mut calls {
        match decided.get(&call.id) {
            Some(Decision::Edit { arguments }) => {
                if !arguments.is_object() {
                    return Err(format!(
                        "the edited arguments of call `{}` must be a JSON object",
                        call.id
                    ));
                }
                call.arguments = arguments.to_string().into();
                notes.push(words::edited_call_note(
                    &call.name,
                    &call.id,
                    &call.arguments,
                ));
            }
            Some(_) => {}
            None if semantics(&call.name)
                .and_then(|s| rules.needs_approval(&call.name, s))
                .is_some() =>
            {
                return Err(format!(
                    "call `{}` (`{}`) needs a decision: approve, reject or edit",
                    call.id, call.name
                ));
            }
            None => {}
        }
    }
    Ok(ResumedRound {
        calls,
        text,
        decided,
        notes,
    })
}

/// Why a resume with decisions was refused when the conversation waits for nothing.
const NOTHING_WAITS: &str = "nothing is waiting for approval: the conversation does not end with tool calls \
     that wait for a decision (a second resume of the same calls is refused, so each runs once)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_pattern_decides() {
        let rules = ApprovalRules {
            mode: ApprovalMode::Destructive,
            skills: BTreeMap::from([
                ("fs__*".to_owned(), ApprovalMode::Always),
                ("fs__read_*".to_owned(), ApprovalMode::Never),
            ]),
            unattended: false,
        };
        assert_eq!(rules.mode_for("fs__write_file"), ApprovalMode::Always);
        assert_eq!(rules.mode_for("fs__read_text_file"), ApprovalMode::Never);
        assert_eq!(rules.mode_for("write_file"), ApprovalMode::Destructive);
        assert!(
            rules
                .needs_approval("write_file", RepeatSemantics::Effectful)
                .is_some()
        );
        assert!(
            rules
                .needs_approval("read_file", RepeatSemantics::Pure)
                .is_none()
        );
        assert!(
            rules
                .needs_approval("fs__list", RepeatSemantics::Pure)
                .is_some()
        );
    }

    #[test]
    fn decisions_read_from_json() {
        let parsed: Vec<CallDecision> = serde_json::from_str(
            r#"[{"call_id": "a", "decision": "approve"},
                {"call_id": "b", "decision": "reject", "reason": "not now"},
                {"call_id": "c", "decision": "edit", "arguments": {"path": "x.txt"}}]"#,
        )
        .unwrap();
        assert_eq!(parsed[0].decision, Decision::Approve);
        assert_eq!(
            parsed[1].decision,
            Decision::Reject {
                reason: Some("not now".into())
            }
        );
        assert!(matches!(parsed[2].decision, Decision::Edit { .. }));
        assert!(
            serde_json::from_str::<CallDecision>(r#"{"call_id": "a", "decision": "maybe"}"#)
                .is_err()
        );
    }
}
