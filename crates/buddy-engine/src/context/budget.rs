//! A request's token budget: the room a model's window leaves it, its size, and fitting
//! the history, the tools and an instruction into that room, shedding what a request can
//! do without (see [`Shed`]) level by level when even the pinned messages do not fit.
//! Pure: counts in, a fitted request (or the overflow) out.

use std::borrow::Cow;

use buddy_core::{Message, ToolSpec};

use super::counter::TokenCounter;
use super::shed::{Shed, called_tools, compact_tools, reserve_floor, without_notes};
use super::trim::{Fitted, Overflow, fit, fit_stepped};

/// The room a model's window leaves a request: the window less the reply's reserve,
/// under the cap a provider's refusal set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Room {
    /// The model's context window, in tokens.
    pub window: u64,
    /// The part of it kept for the reply.
    pub reserve: u64,
    /// A lower ceiling on the request, set when the provider refused one as too long.
    pub cap: Option<u64>,
}

impl Room {
    /// Tokens a request may take at shedding level `shed` (the reserve shrinks to its
    /// floor at [`Shed::Reserve`]).
    pub(crate) fn at(&self, shed: Shed) -> u64 {
        let reserve = match shed {
            Shed::Reserve => reserve_floor(self.reserve),
            _ => self.reserve,
        };
        self.window
            .saturating_sub(reserve)
            .min(self.cap.unwrap_or(u64::MAX))
    }

    /// True when a request of `size` tokens fits without shedding anything.
    pub(crate) fn holds(&self, size: usize) -> bool {
        u64::try_from(size).unwrap_or(u64::MAX) <= self.at(Shed::Nothing)
    }
}

/// The cap on later requests after the provider refused one of `last_sent` tokens as too
/// long: 60 % of it (buddy's estimate was low for this model).
pub(crate) fn cap_after_refusal(last_sent: u64) -> u64 {
    last_sent.saturating_mul(6) / 10
}

/// Tokens of a request that holds a whole history of `history_tokens`, tools of
/// `tools_tokens` and an instruction of `instruction_tokens`.
pub(crate) fn whole_request(
    history_tokens: usize,
    counter: &dyn TokenCounter,
    tools_tokens: usize,
    instruction_tokens: usize,
) -> usize {
    history_tokens + counter.reply_priming() + tools_tokens + instruction_tokens
}

/// A history with its per-message token counts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct History<'m> {
    pub messages: &'m [Message],
    /// Tokens of each message.
    pub counts: &'m [usize],
    /// The sum of `counts`.
    pub tokens: usize,
}

/// What a request is made of, sized.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RequestParts<'m, 't> {
    pub history: History<'m>,
    /// The tools offered, if any, and their tokens.
    pub tools: Option<&'t [ToolSpec]>,
    pub tools_tokens: usize,
    /// Tokens of an instruction sent after the history (the Finalize call's).
    pub instruction_tokens: usize,
    /// Where the turn's trimming stands: messages before it were left out of the previous
    /// request and stay out (see [`fit_stepped`]).
    pub floor: usize,
}

/// A request fitted to its room.
#[derive(Debug)]
pub(crate) struct Budgeted<'m, 't> {
    /// The history as the request sends it.
    pub fitted: Fitted<'m>,
    /// The tools as the request sends them (compacted when shedding came to them).
    pub tools: Option<Cow<'t, [ToolSpec]>>,
    pub tools_tokens: usize,
    /// The room the request was fitted to.
    pub room: u64,
    /// How much the request shed.
    pub shed: Shed,
    /// buddy's notes left out of this request.
    pub notes_left_out: usize,
    /// Tokens of the whole request: history, instruction and tools.
    pub tokens: usize,
    /// Where trimming stands for the next request.
    pub floor: usize,
}

/// Even the last shedding level leaves pinned messages that do not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestOverflow {
    pub overflow: Overflow,
    /// Tokens the tool definitions took at the last level.
    pub tools_tokens: usize,
}

/// Fits `parts` into `room`: the history trimmed at each shedding level in order, from
/// [`Shed::Nothing`] on, until it fits.
pub(crate) fn fit_request<'m, 't>(
    parts: RequestParts<'m, 't>,
    room: Room,
    counter: &dyn TokenCounter,
) -> Result<Budgeted<'m, 't>, RequestOverflow> {
    let History {
        messages,
        counts,
        tokens,
    } = parts.history;
    let mut shed = Shed::Nothing;
    let mut without: Option<(Vec<Message>, Vec<usize>, usize)> = None;
    let mut compact: Option<(Vec<ToolSpec>, usize)> = None;
    loop {
        if shed >= Shed::Notes && without.is_none() {
            without = Some(without_notes(messages, counts));
        }
        // Each level is tried once, in order: the tool list is made at the two that change it.
        if let Some(tools) = parts.tools
            && matches!(shed, Shed::ToolDetails | Shed::UnusedTools)
        {
            let small = if shed == Shed::UnusedTools {
                compact_tools(&called_tools(tools, messages))
            } else {
                compact_tools(tools)
            };
            let tokens = counter.tools(&small);
            compact = Some((small, tokens));
        }
        let tools_tokens = compact.as_ref().map_or(parts.tools_tokens, |(_, t)| *t);
        let at = room.at(shed);
        let budget = usize::try_from(at)
            .unwrap_or(usize::MAX)
            .saturating_sub(tools_tokens + parts.instruction_tokens);
        // Without buddy's notes the indices differ from the floor's: that rare request
        // is fitted afresh.
        let fitted = match &without {
            Some((kept, counts, _)) => {
                let total = counts.iter().sum();
                fit(kept, counts, total, budget, counter).map(|f| (f.into_owned(), 0))
            }
            None => fit_stepped(messages, counts, tokens, budget, counter, parts.floor),
        };
        match (fitted, shed.next()) {
            (Ok((fitted, floor)), _) => {
                let tools = match (compact, parts.tools) {
                    (Some((small, _)), Some(_)) => Some(Cow::Owned(small)),
                    (_, tools) => tools.map(Cow::Borrowed),
                };
                return Ok(Budgeted {
                    tokens: fitted.tokens + parts.instruction_tokens + tools_tokens,
                    fitted,
                    tools,
                    tools_tokens,
                    room: at,
                    shed,
                    notes_left_out: without.as_ref().map_or(0, |w| w.2),
                    floor,
                });
            }
            (Err(_), Some(next)) => shed = next,
            (Err(overflow), None) => {
                return Err(RequestOverflow {
                    overflow,
                    tools_tokens,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::EstimateCounter;
    use buddy_core::ToolCall;

    fn counts(messages: &[Message]) -> Vec<usize> {
        messages
            .iter()
            .map(|m| EstimateCounter.message(m))
            .collect()
    }

    fn parts<'m, 't>(
        messages: &'m [Message],
        counts: &'m [usize],
        tools: Option<&'t [ToolSpec]>,
    ) -> RequestParts<'m, 't> {
        RequestParts {
            history: History {
                messages,
                counts,
                tokens: counts.iter().sum(),
            },
            tools,
            tools_tokens: tools.map_or(0, |t| EstimateCounter.tools(t)),
            instruction_tokens: 0,
            floor: 0,
        }
    }

    /// A room whose unshed size is exactly `size` tokens.
    fn room_of(size: usize, reserve: u64) -> Room {
        Room {
            window: size as u64 + reserve,
            reserve,
            cap: None,
        }
    }

    fn whole(parts: &RequestParts<'_, '_>) -> usize {
        whole_request(
            parts.history.tokens,
            &EstimateCounter,
            parts.tools_tokens,
            parts.instruction_tokens,
        )
    }

    fn pinned() -> Vec<Message> {
        vec![Message::system("rules ".repeat(40)), Message::user("go")]
    }

    #[test]
    fn a_request_that_exactly_fits_is_sent_whole() {
        let history = pinned();
        let counts = counts(&history);
        let parts = parts(&history, &counts, None);
        let size = whole(&parts);
        let room = room_of(size, 1_000);
        assert!(room.holds(size) && !room.holds(size + 1));
        let fitted = fit_request(parts, room, &EstimateCounter).unwrap();
        assert_eq!(fitted.shed, Shed::Nothing);
        assert!(matches!(fitted.fitted.messages, Cow::Borrowed(_)));
        assert_eq!(fitted.tokens, size);
        assert_eq!(fitted.room, size as u64);
    }

    #[test]
    fn one_token_over_drops_an_old_group_before_shedding() {
        let mut history = pinned();
        history.push(Message::assistant("an earlier answer"));
        history.push(Message::user("and now"));
        let counts = counts(&history);
        let parts = parts(&history, &counts, None);
        let size = whole(&parts);
        let fitted = fit_request(parts, room_of(size - 1, 1_000), &EstimateCounter).unwrap();
        assert_eq!(fitted.shed, Shed::Nothing);
        assert!(fitted.fitted.dropped > 0);
        assert!(fitted.tokens < size);
    }

    #[test]
    fn one_token_over_with_nothing_to_drop_sheds_down_to_the_reserve() {
        let history = pinned();
        let counts = counts(&history);
        let parts = parts(&history, &counts, None);
        let size = whole(&parts);
        let room = room_of(size - 1, 1_000);
        let fitted = fit_request(parts, room, &EstimateCounter).unwrap();
        assert_eq!(fitted.shed, Shed::Reserve);
        assert_eq!(fitted.room, room.window - reserve_floor(1_000));
        assert_eq!(fitted.tokens, size);
    }

    #[test]
    fn nothing_left_to_cut_is_an_overflow_naming_the_largest_part() {
        let history = pinned();
        let counts = counts(&history);
        let parts = parts(&history, &counts, None);
        let size = whole(&parts);
        // The reserve is at its floor already: shedding it gains nothing.
        let err = fit_request(parts, room_of(size - 1, 256), &EstimateCounter).unwrap_err();
        assert_eq!(err.tools_tokens, 0);
        assert_eq!(err.overflow.budget, size - 1);
        assert!(
            err.overflow.largest.starts_with("the system prompt"),
            "{err:?}"
        );
    }

    #[test]
    fn notes_go_first_then_tool_details() {
        // The note sits in the newest round, which trimming never drops.
        let history = vec![
            Message::system("s"),
            Message::user("go"),
            Message::Assistant {
                content: None,
                tool_calls: vec![
                    ToolCall::new("1", "read", "{}"),
                    ToolCall::new("2", "read", "{}"),
                ],
            },
            Message::tool_result("1", "ok", false),
            Message::note("[system note] ".repeat(20)),
            Message::tool_result("2", "ok", false),
        ];
        let counts = counts(&history);
        let tool = ToolSpec {
            name: "read".into(),
            description: format!("Read a file. {}", "More words. ".repeat(40)),
            parameters: serde_json::json!({"type": "object"}),
        };
        let tools = [tool];
        let parts = parts(&history, &counts, Some(&tools));
        let size = whole(&parts);
        // One token short: leaving the note out is enough.
        let fitted = fit_request(parts, room_of(size - 1, 256), &EstimateCounter).unwrap();
        assert_eq!((fitted.shed, fitted.notes_left_out), (Shed::Notes, 1));
        assert!(matches!(fitted.tools, Some(Cow::Borrowed(_))));
        // Short of the note's size too: the tool definitions lose their details.
        let tight = size - counts[4] - 1;
        let fitted = fit_request(parts, room_of(tight, 256), &EstimateCounter).unwrap();
        assert_eq!(fitted.shed, Shed::ToolDetails);
        let sent = fitted.tools.unwrap();
        assert_eq!(sent[0].description, "Read a file.");
        assert_eq!(fitted.tools_tokens, EstimateCounter.tools(&sent));
    }

    #[test]
    fn unused_tools_go_before_the_reserve() {
        let mut history = pinned();
        history.push(Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new("1", "used", "{}")],
        });
        history.push(Message::tool_result("1", "ok", false));
        let counts = counts(&history);
        let tool = |name: &str| ToolSpec {
            name: name.into(),
            description: "x".into(),
            parameters: serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}}),
        };
        let tools = [tool("used"), tool("unused")];
        let parts = parts(&history, &counts, Some(&tools));
        let compact = EstimateCounter.tools(&compact_tools(&tools));
        let one = EstimateCounter.tools(&compact_tools(&tools[..1]));
        let size = whole(&parts) - parts.tools_tokens + compact;
        let fitted = fit_request(parts, room_of(size - 1, 256), &EstimateCounter).unwrap();
        assert_eq!(fitted.shed, Shed::UnusedTools);
        assert_eq!(fitted.tools_tokens, one);
        let names: Vec<&str> = fitted
            .tools
            .iter()
            .flat_map(|t| t.iter())
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["used"]);
    }

    #[test]
    fn a_refusal_caps_the_room() {
        let room = Room {
            window: 10_000,
            reserve: 1_000,
            cap: Some(cap_after_refusal(5_000)),
        };
        assert_eq!(room.at(Shed::Nothing), 3_000);
        assert_eq!(room.at(Shed::Reserve), 3_000);
        assert_eq!(
            Room { cap: None, ..room }.at(Shed::Reserve),
            10_000 - reserve_floor(1_000)
        );
        assert_eq!(cap_after_refusal(u64::MAX), u64::MAX / 10);
    }
}
