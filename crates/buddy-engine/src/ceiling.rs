//! The operator's policy as a ceiling: a request may tighten a limit, never loosen it.

use crate::policy::LoopPolicy;

/// One way a request's policy allows more than the operator's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Raised {
    pub field: &'static str,
    /// What the request asked for, in words (`1000`, `unlimited`, `off`).
    pub asked: String,
    /// The operator's value, in words.
    pub ceiling: String,
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} = {} (this server's limit is {})",
            self.field, self.asked, self.ceiling
        )
    }
}

/// A limit where `None` means no limit at all.
fn limit(
    out: &mut Vec<Raised>,
    field: &'static str,
    asked: Option<u64>,
    ceiling: Option<u64>,
    none: &str,
) {
    let Some(ceiling) = ceiling else {
        return;
    };
    if asked.is_none_or(|asked| asked > ceiling) {
        out.push(Raised {
            field,
            asked: asked.map_or_else(|| none.to_owned(), |a| a.to_string()),
            ceiling: ceiling.to_string(),
        });
    }
}

impl LoopPolicy {
    /// Every limit and guard where this policy (a request's) allows more than
    /// `ceiling` (the operator's); empty when it stays within. Loop detection may be
    /// switched off only when `loop_detection_may_be_off`.
    pub fn raised_above(
        &self,
        ceiling: &LoopPolicy,
        loop_detection_may_be_off: bool,
    ) -> Vec<Raised> {
        let mut out = Vec::new();
        let wide = |v: u32| Some(u64::from(v));
        let size = |v: usize| Some(u64::try_from(v).unwrap_or(u64::MAX));
        let l = &mut out;
        limit(
            l,
            "max_model_calls",
            wide(self.max_model_calls),
            wide(ceiling.max_model_calls),
            "unlimited",
        );
        limit(
            l,
            "max_tool_calls",
            wide(self.max_tool_calls),
            wide(ceiling.max_tool_calls),
            "unlimited",
        );
        limit(
            l,
            "max_calls_per_skill",
            self.max_calls_per_skill.map(u64::from),
            ceiling.max_calls_per_skill.map(u64::from),
            "unlimited",
        );
        limit(
            l,
            "max_consecutive_failures",
            wide(self.max_consecutive_failures),
            wide(ceiling.max_consecutive_failures),
            "unlimited",
        );
        limit(
            l,
            "poll_patience",
            wide(self.poll_patience),
            wide(ceiling.poll_patience),
            "unlimited",
        );
        limit(
            l,
            "max_guard_trips",
            wide(self.max_guard_trips),
            wide(ceiling.max_guard_trips),
            "unlimited",
        );
        limit(
            l,
            "max_stale_rounds",
            self.max_stale_rounds.map(u64::from),
            ceiling.max_stale_rounds.map(u64::from),
            "off",
        );
        limit(
            l,
            "chant_repeats",
            self.chant_repeats.map(u64::from),
            ceiling.chant_repeats.map(u64::from),
            "off",
        );
        limit(
            l,
            "chant_min_chars",
            size(self.chant_min_chars),
            size(ceiling.chant_min_chars),
            "unlimited",
        );
        limit(
            l,
            "max_turn_tokens",
            self.max_turn_tokens,
            ceiling.max_turn_tokens,
            "unlimited",
        );
        limit(
            l,
            "deadline_ms",
            self.deadline_ms,
            ceiling.deadline_ms,
            "none",
        );
        limit(
            l,
            "finalize_grace_ms",
            Some(self.finalize_grace_ms),
            Some(ceiling.finalize_grace_ms),
            "unlimited",
        );
        limit(
            l,
            "max_parallel_tools",
            wide(self.max_parallel_tools),
            wide(ceiling.max_parallel_tools),
            "unlimited",
        );
        limit(
            l,
            "max_calls_per_reply",
            wide(self.max_calls_per_reply),
            wide(ceiling.max_calls_per_reply),
            "unlimited",
        );
        if ceiling.loop_detection && !self.loop_detection && !loop_detection_may_be_off {
            out.push(Raised {
                field: "loop_detection",
                asked: "false".into(),
                ceiling: "on; the operator does not let requests switch it off".into(),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowering_is_fine_and_every_raise_is_named() {
        let ceiling = LoopPolicy {
            max_model_calls: 5,
            max_turn_tokens: Some(10_000),
            ..LoopPolicy::default()
        };
        let lower = LoopPolicy {
            max_model_calls: 3,
            max_turn_tokens: Some(5_000),
            deadline_ms: Some(1_000),
            ..ceiling.clone()
        };
        assert!(lower.raised_above(&ceiling, false).is_empty());
        let higher = LoopPolicy {
            max_model_calls: 1000,
            max_turn_tokens: None,
            loop_detection: false,
            chant_repeats: None,
            ..ceiling.clone()
        };
        let raised: Vec<String> = higher
            .raised_above(&ceiling, false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            raised,
            [
                "max_model_calls = 1000 (this server's limit is 5)",
                "chant_repeats = off (this server's limit is 10)",
                "max_turn_tokens = unlimited (this server's limit is 10000)",
                "loop_detection = false (this server's limit is on; the operator does not let requests switch it off)",
            ]
        );
        assert_eq!(higher.raised_above(&ceiling, true).len(), 3);
    }
}
