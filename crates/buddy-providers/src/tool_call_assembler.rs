//! Assembles OpenAI-style streamed tool-call deltas into whole calls.
//!
//! Every server streams these a little differently:
//! - OpenAI sends `id`, `name` and `arguments: ""` in the first piece, then only
//!   `index` plus argument fragments.
//! - vLLM's first piece has a `name` and no `arguments` key at all.
//! - Ollama sends each call whole, in one piece.
//! - Mistral omits `index` entirely; some servers start `index` at 1, and some repeat
//!   `id`/`name` (or send `""`/`null`) in later pieces.
//!
//! So: calls are keyed by `index`, falling back to position when it is missing; `id`
//! and `name` are taken from the first non-empty value and never appended; only
//! `arguments` is appended.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use buddy_core::ToolCall;

/// One streamed piece of a tool call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolCallDelta<'a> {
    pub index: Option<i64>,
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    pub arguments: Option<&'a str>,
}

#[derive(Debug, Default)]
struct Partial {
    index: Option<i64>,
    id: String,
    name: String,
    arguments: String,
}

/// Collects deltas; [`ToolCallAssembler::finish`] yields the calls in index order.
/// Each piece finds its call through an index map, so assembly is linear in the pieces.
#[derive(Debug, Default)]
pub struct ToolCallAssembler {
    calls: Vec<Partial>,
    /// Position in `calls` of the latest call with each index.
    by_index: HashMap<i64, usize>,
}

/// A call that could not be assembled into something executable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unassembled {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

static GENERATED_IDS: AtomicU64 = AtomicU64::new(0);

/// An id for a server that sent none; unique within the process, so histories stay valid.
fn generated_id() -> String {
    format!(
        "call_buddy_{}",
        GENERATED_IDS.fetch_add(1, Ordering::Relaxed)
    )
}

impl ToolCallAssembler {
    /// Adds one piece.
    pub fn push(&mut self, delta: ToolCallDelta<'_>) {
        let id = non_empty(delta.id);
        let slot = self.slot_for(delta.index, id);
        let call = &mut self.calls[slot];
        if call.id.is_empty()
            && let Some(id) = id
        {
            call.id.push_str(id);
        }
        if call.name.is_empty()
            && let Some(name) = non_empty(delta.name)
        {
            call.name.push_str(name);
        }
        if let Some(arguments) = delta.arguments {
            call.arguments.push_str(arguments);
        }
    }

    fn slot_for(&mut self, index: Option<i64>, id: Option<&str>) -> usize {
        let existing = match index {
            // The latest call with this index, unless a different id says a new call
            // reuses the index (some servers send every call as index 0).
            Some(i) => self.by_index.get(&i).copied().filter(|&pos| {
                id.is_none_or(|id| self.calls[pos].id.is_empty() || self.calls[pos].id == id)
            }),
            // No index (Mistral): a new id starts a call, anything else continues the last.
            None => match (self.calls.len().checked_sub(1), id) {
                (Some(last), Some(id))
                    if !self.calls[last].id.is_empty() && self.calls[last].id != id =>
                {
                    None
                }
                (last, _) => last,
            },
        };
        existing.unwrap_or_else(|| {
            self.calls.push(Partial {
                index,
                ..Partial::default()
            });
            let pos = self.calls.len() - 1;
            if let Some(i) = index {
                self.by_index.insert(i, pos);
            }
            pos
        })
    }

    /// True when no piece arrived.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The calls in index order (position where there was none). Calls without a name
    /// cannot be executed and come back separately; empty arguments become `{}`.
    pub fn finish(self) -> (Vec<ToolCall>, Vec<Unassembled>) {
        let mut calls = self.calls;
        // Stable: calls without an index keep their arrival order.
        calls.sort_by_key(|c| c.index.unwrap_or(i64::MAX));
        let mut ready = Vec::with_capacity(calls.len());
        let mut broken = Vec::new();
        for call in calls {
            if call.name.is_empty() {
                broken.push(Unassembled {
                    id: call.id,
                    name: call.name,
                    arguments: call.arguments,
                });
                continue;
            }
            let id = if call.id.is_empty() {
                generated_id()
            } else {
                call.id
            };
            let arguments = if call.arguments.trim().is_empty() {
                "{}".to_owned()
            } else {
                // The history keeps it for the rest of the conversation: no spare room.
                let mut arguments = call.arguments;
                arguments.shrink_to_fit();
                arguments
            };
            ready.push(ToolCall::new(id, call.name, arguments));
        }
        (ready, broken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_hundred_thousand_calls_assemble_in_order() {
        let mut assembler = ToolCallAssembler::default();
        let ids: Vec<String> = (0..100_000).map(|i| format!("call_{i}")).collect();
        for (i, id) in ids.iter().enumerate() {
            let index = Some(i as i64);
            assembler.push(d(index, Some(id), Some("get_time"), Some("")));
            assembler.push(d(index, None, None, Some("{}")));
        }
        let (calls, broken) = assembler.finish();
        assert!(broken.is_empty());
        assert_eq!(calls.len(), 100_000);
        assert_eq!(calls[99_999].id, "call_99999");
        assert!(calls.iter().all(|c| c.arguments == "{}"));
    }

    fn d<'a>(
        index: Option<i64>,
        id: Option<&'a str>,
        name: Option<&'a str>,
        args: Option<&'a str>,
    ) -> ToolCallDelta<'a> {
        ToolCallDelta {
            index,
            id,
            name,
            arguments: args,
        }
    }

    #[test]
    fn openai_pieces_assemble_by_index() {
        let mut a = ToolCallAssembler::default();
        a.push(d(Some(0), Some("c0"), Some("get_weather"), Some("")));
        a.push(d(Some(1), Some("c1"), Some("get_stock"), Some("{\"t\":")));
        a.push(d(Some(0), None, None, Some("{\"city\":")));
        a.push(d(Some(0), Some(""), Some(""), Some("\"Paris\"}")));
        a.push(d(Some(1), Some("c1"), Some("get_stock"), Some("\"AAPL\"}")));
        let (calls, broken) = a.finish();
        assert!(broken.is_empty());
        assert_eq!(
            calls,
            vec![
                ToolCall::new("c0", "get_weather", r#"{"city":"Paris"}"#),
                ToolCall::new("c1", "get_stock", r#"{"t":"AAPL"}"#),
            ]
        );
    }

    #[test]
    fn missing_index_means_next_call_on_a_new_id() {
        let mut a = ToolCallAssembler::default();
        a.push(d(None, Some("a"), Some("one"), Some("{}")));
        a.push(d(None, Some("b"), Some("two"), Some("{\"x\"")));
        a.push(d(None, None, None, Some(":1}")));
        let (calls, _) = a.finish();
        assert_eq!(
            calls,
            vec![
                ToolCall::new("a", "one", "{}"),
                ToolCall::new("b", "two", r#"{"x":1}"#)
            ]
        );
    }

    #[test]
    fn index_starting_at_one_and_reused_index_zero_both_work() {
        let mut a = ToolCallAssembler::default();
        a.push(d(Some(1), Some("x"), Some("first"), None));
        a.push(d(Some(2), Some("y"), Some("second"), Some("{}")));
        let (calls, _) = a.finish();
        assert_eq!(
            calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            vec!["first", "second"]
        );
        assert_eq!(calls[0].arguments, "{}", "no arguments key means {{}}");

        let mut a = ToolCallAssembler::default();
        a.push(d(Some(0), Some("x"), Some("first"), Some("{}")));
        a.push(d(Some(0), Some("y"), Some("second"), Some("{}")));
        assert_eq!(a.finish().0.len(), 2);
    }

    #[test]
    fn a_call_without_name_is_not_executable_and_missing_ids_are_generated() {
        let mut a = ToolCallAssembler::default();
        a.push(d(Some(0), None, Some("named"), Some("{}")));
        a.push(d(Some(1), Some("z"), None, Some("{}")));
        let (calls, broken) = a.finish();
        assert_eq!(calls.len(), 1);
        assert!(calls[0].id.starts_with("call_buddy_"));
        assert_eq!(broken[0].id, "z");
    }

    proptest! {
        /// However the arguments of several calls are fragmented (and interleaved by
        /// index), the assembled calls are the originals.
        #[test]
        fn fragmentation_never_changes_the_calls(
            calls in prop::collection::vec(("[a-z_]{1,10}", "\\{(\"[a-z]{1,5}\": ?\"[ -~]{0,12}\",? ?){0,3}\\}"), 1..4),
            cuts in prop::collection::vec(prop::collection::vec(any::<prop::sample::Index>(), 0..6), 4),
            with_index in any::<bool>(),
        ) {
            let mut pieces: Vec<Vec<ToolCallDelta>> = Vec::new();
            for (i, (name, args)) in calls.iter().enumerate() {
                let mut points: Vec<usize> = cuts[i].iter().map(|x| x.index(args.len() + 1)).collect();
                points.retain(|p| args.is_char_boundary(*p));
                points.sort_unstable();
                points.dedup();
                let mut last = 0;
                let index = with_index.then_some(i as i64);
                let mut these = vec![ToolCallDelta { index, id: None, name: Some(name.as_str()), arguments: None }];
                // The id comes once, on the first piece.
                these[0].id = Some(["a", "b", "c", "d"][i]);
                for p in points.into_iter().chain(std::iter::once(args.len())) {
                    these.push(ToolCallDelta { index, id: None, name: None, arguments: Some(&args[last..p]) });
                    last = p;
                }
                pieces.push(these);
            }
            let mut a = ToolCallAssembler::default();
            for these in &pieces {
                for piece in these {
                    a.push(*piece);
                }
            }
            let (got, broken) = a.finish();
            prop_assert!(broken.is_empty());
            let expected: Vec<ToolCall> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| ToolCall::new(["a", "b", "c", "d"][i], name.clone(), if args.trim().is_empty() { "{}".to_owned() } else { args.clone() }))
                .collect();
            prop_assert_eq!(got, expected);
        }
    }
}
