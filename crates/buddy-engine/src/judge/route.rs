//! Routing a reply: from the model's own output (are there executable calls?) and the
//! policy, where the turn goes. `finish_reason` is recorded, not trusted.

use buddy_core::{FinishReason, GuardAction, GuardKind, StopReason, ToolCall};

use super::memory::JudgeMemory;
use super::verdict::Trip;
use crate::policy::LoopPolicy;

/// Name of the tool that ends a turn with an answer (policy `finish_tool`).
pub(crate) const FINISH_TOOL: &str = "finish";

/// What the judge sees of a reply.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplyFacts<'a> {
    pub text: &'a str,
    pub calls: &'a [ToolCall],
    pub finish: Option<&'a FinishReason>,
    /// The text started repeating itself and was cut.
    pub chanted: bool,
}

/// Where a reply sends the turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RouteVerdict {
    /// The reply chanted: it was cut, its calls are dropped, the text so far ends the turn.
    Chanted(Trip),
    /// No executable calls: the text is the answer.
    Answer(StopReason),
    /// Calls to tools the client runs: the turn hands them back.
    ClientCalls,
    /// The model called `finish` (the call at `index`) with this answer.
    Finish { index: usize, answer: String },
    /// The text beside the calls is taken as the answer and the calls are not run.
    Accept(Trip),
    /// Run the first `keep` calls; a trip says when the rest were dropped.
    Execute { keep: usize, dropped: Option<Trip> },
}

/// Decides where `reply` sends the turn. `is_external` names tools the client runs.
pub(crate) fn route(
    policy: &LoopPolicy,
    memory: &mut JudgeMemory,
    reply: ReplyFacts<'_>,
    is_external: impl Fn(&str) -> bool,
) -> RouteVerdict {
    let calls = reply.calls;
    if reply.chanted {
        return RouteVerdict::Chanted(Trip::new(
            GuardKind::RepetitiveOutput,
            GuardAction::CutReply,
            format!(
                "the reply repeated one chunk of text {} times in a row; it was cut after the first copy \
                 and {} tool call(s) with it were dropped",
                policy.chant_repeats.unwrap_or_default(),
                calls.len()
            ),
        ));
    }
    if calls.is_empty() {
        return RouteVerdict::Answer(if reply.finish == Some(&FinishReason::Length) {
            StopReason::Truncated
        } else {
            StopReason::Completed
        });
    }
    if calls.iter().any(|c| is_external(&c.name)) {
        return RouteVerdict::ClientCalls;
    }
    if policy.finish_tool
        && let Some((index, answer)) = calls
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == FINISH_TOOL)
            .and_then(|(i, c)| Some((i, finish_answer(&c.arguments)?)))
    {
        return RouteVerdict::Finish { index, answer };
    }
    let text_chars = reply.text.trim().chars().count();
    let accept = |guard| {
        RouteVerdict::Accept(Trip::new(
            guard,
            GuardAction::AcceptedAnswer,
            format!(
                "{text_chars} characters of answer came with {} tool call(s); the answer was taken and the calls not run",
                calls.len()
            ),
        ))
    };
    if policy.honor_stop && reply.finish == Some(&FinishReason::Stop) && text_chars > 0 {
        return accept(GuardKind::HonorStop);
    }
    if policy
        .substantive_answer_chars
        .is_some_and(|min| text_chars >= min)
    {
        return accept(GuardKind::SubstantiveAnswer);
    }
    let per_reply = usize::try_from(policy.max_calls_per_reply).unwrap_or(usize::MAX);
    if calls.len() <= per_reply {
        return RouteVerdict::Execute {
            keep: calls.len(),
            dropped: None,
        };
    }
    // Kept out of the history entirely: 100,000 error results would only overflow the
    // next request. The model reads a note saying so instead.
    let asked = calls.len();
    memory.dropped_calls = Some(asked - per_reply);
    RouteVerdict::Execute {
        keep: per_reply,
        dropped: Some(Trip::new(
            GuardKind::ToolCallLimit,
            GuardAction::Refused,
            format!(
                "the reply asked for {asked} tool calls; the first {per_reply} run (max_calls_per_reply), the rest were dropped"
            ),
        )),
    }
}

/// The answer in a `finish` call's arguments, if they are valid.
pub(crate) fn finish_answer(arguments: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let answer = value.get("answer")?.as_str()?.trim();
    (!answer.is_empty()).then(|| answer.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall::new("c", name, args)
    }

    fn judge(
        policy: &LoopPolicy,
        text: &str,
        calls: &[ToolCall],
        finish: FinishReason,
    ) -> RouteVerdict {
        let mut memory = JudgeMemory::default();
        route(
            policy,
            &mut memory,
            ReplyFacts {
                text,
                calls,
                finish: Some(&finish),
                chanted: false,
            },
            |name| name == "client_tool",
        )
    }

    #[test]
    fn no_calls_is_the_answer_whatever_finish_reason_says() {
        let p = LoopPolicy::default();
        assert_eq!(
            judge(&p, "Hi", &[], FinishReason::ToolCalls),
            RouteVerdict::Answer(StopReason::Completed)
        );
        assert_eq!(
            judge(&p, "Hi", &[], FinishReason::Length),
            RouteVerdict::Answer(StopReason::Truncated)
        );
    }

    #[test]
    fn calls_run_even_when_finish_reason_says_stop() {
        let p = LoopPolicy::default();
        let calls = [call("get_time", "{}")];
        assert_eq!(
            judge(&p, "Sure.", &calls, FinishReason::Stop),
            RouteVerdict::Execute {
                keep: 1,
                dropped: None
            }
        );
        let honor = LoopPolicy {
            honor_stop: true,
            ..LoopPolicy::default()
        };
        assert!(matches!(
            judge(&honor, "Sure.", &calls, FinishReason::Stop),
            RouteVerdict::Accept(Trip {
                guard: GuardKind::HonorStop,
                ..
            })
        ));
        // honor_stop needs text to take as the answer.
        assert!(matches!(
            judge(&honor, "  ", &calls, FinishReason::Stop),
            RouteVerdict::Execute { .. }
        ));
    }

    #[test]
    fn a_substantive_answer_is_taken_from_its_threshold_on() {
        let p = LoopPolicy {
            substantive_answer_chars: Some(10),
            ..LoopPolicy::default()
        };
        let calls = [call("search", "{}")];
        assert!(matches!(
            judge(&p, "123456789", &calls, FinishReason::ToolCalls),
            RouteVerdict::Execute { .. }
        ));
        assert!(matches!(
            judge(&p, "1234567890", &calls, FinishReason::ToolCalls),
            RouteVerdict::Accept(Trip {
                guard: GuardKind::SubstantiveAnswer,
                ..
            })
        ));
    }

    #[test]
    fn client_calls_and_finish_are_routed_before_anything_else() {
        let p = LoopPolicy {
            finish_tool: true,
            ..LoopPolicy::default()
        };
        let calls = [call("search", "{}"), call("client_tool", "{}")];
        assert_eq!(
            judge(&p, "", &calls, FinishReason::ToolCalls),
            RouteVerdict::ClientCalls
        );
        let calls = [
            call("search", "{}"),
            call(FINISH_TOOL, r#"{"answer":" 42 "}"#),
        ];
        assert_eq!(
            judge(&p, "", &calls, FinishReason::ToolCalls),
            RouteVerdict::Finish {
                index: 1,
                answer: "42".into()
            }
        );
        // An empty answer is no finish: the call runs (and is refused as a result).
        let calls = [call(FINISH_TOOL, r#"{"answer":""}"#)];
        assert!(matches!(
            judge(&p, "", &calls, FinishReason::ToolCalls),
            RouteVerdict::Execute { .. }
        ));
    }

    #[test]
    fn calls_over_the_per_reply_limit_are_dropped_at_the_boundary() {
        let p = LoopPolicy {
            max_calls_per_reply: 2,
            ..LoopPolicy::default()
        };
        let two = [call("a", "{}"), call("b", "{}")];
        assert_eq!(
            judge(&p, "", &two, FinishReason::ToolCalls),
            RouteVerdict::Execute {
                keep: 2,
                dropped: None
            }
        );
        let mut memory = JudgeMemory::default();
        let three = [call("a", "{}"), call("b", "{}"), call("c", "{}")];
        let verdict = route(
            &p,
            &mut memory,
            ReplyFacts {
                text: "",
                calls: &three,
                finish: None,
                chanted: false,
            },
            |_| false,
        );
        assert!(matches!(
            verdict,
            RouteVerdict::Execute {
                keep: 2,
                dropped: Some(_)
            }
        ));
        assert_eq!(memory.dropped_calls, Some(1));
    }

    #[test]
    fn a_chanted_reply_ends_the_turn_and_drops_its_calls() {
        let mut memory = JudgeMemory::default();
        let calls = [call("a", "{}")];
        let verdict = route(
            &LoopPolicy::default(),
            &mut memory,
            ReplyFacts {
                text: "la la",
                calls: &calls,
                finish: None,
                chanted: true,
            },
            |_| false,
        );
        let RouteVerdict::Chanted(trip) = verdict else {
            panic!("{verdict:?}")
        };
        assert!(trip.detail.contains("10 times") && trip.detail.contains("1 tool call"));
    }

    #[test]
    fn finish_answer_needs_a_non_empty_string() {
        assert_eq!(finish_answer(r#"{"answer":" 42 "}"#), Some("42".into()));
        assert_eq!(finish_answer(r#"{"answer":""}"#), None);
        assert_eq!(finish_answer(r#"{"answer":7}"#), None);
        assert_eq!(finish_answer("nope"), None);
    }
}
