//! Where a Messages API request puts its `cache_control` breakpoints: a pure function of
//! the request's blocks, so that every call of a turn reads what the call before it wrote.
//!
//! Anthropic caches the prefix up to each breakpoint (tools, then system, then messages)
//! and, for each breakpoint, looks back at most 20 blocks for an entry an earlier request
//! wrote. At most four breakpoints per request. buddy places them on:
//! 1. the latest markable block (slides with the conversation: the next call finds it);
//! 2. the system prompt (its first block) and 3. the last tool (stable: a history that
//!    changes, or is trimmed, still finds them);
//! 4. a fallback about 20 blocks before the latest, when a round added more blocks than the
//!    lookback reaches (many parallel tool calls), so the previous call's entry is found.
//!
//! A client's own breakpoints are kept where they are and count against the four.

use buddy_core::CacheTtl;

/// Anthropic's limit of breakpoints per request.
pub const MAX_BREAKPOINTS: usize = 4;
/// How many blocks back from a breakpoint Anthropic looks for an earlier cache entry.
pub const LOOKBACK_BLOCKS: usize = 20;

/// What a block of a request is, as far as placement cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// A tool definition.
    Tool,
    /// A block of the system prompt.
    System,
    /// Any content block of a message that may carry `cache_control`.
    Content,
    /// A block that must not carry one: a thinking block, an empty text block.
    Unmarkable,
}

/// One block of a request in order, with the client's own breakpoint if it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub kind: BlockKind,
    pub client: Option<CacheTtl>,
}

impl Slot {
    /// A block without a client breakpoint.
    pub fn of(kind: BlockKind) -> Self {
        Slot { kind, client: None }
    }
}

/// A breakpoint: the block index it is on and its lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Breakpoint {
    pub block: usize,
    pub ttl: CacheTtl,
}

/// The breakpoints of a request of `slots` in block order (the client's included; at most
/// four unless the client placed more itself), with buddy's own at `ttl`. A client's breakpoint is never moved or dropped
/// (more than four of them is the client's request to make); buddy adds its own in order
/// of value while breakpoints are left. A buddy breakpoint after a client's shorter one
/// takes the shorter lifetime: the API wants longer lifetimes first.
pub fn place(slots: &[Slot], ttl: CacheTtl) -> Vec<Breakpoint> {
    let client: Vec<usize> = (0..slots.len())
        .filter(|&i| slots[i].client.is_some())
        .collect();
    let mut chosen: Vec<usize> = client.clone();
    let markable = |i: usize| slots[i].kind != BlockKind::Unmarkable;
    let last = (0..slots.len()).rev().find(|&i| markable(i));
    // The first system block: the operator's prompt (a later one, such as the note that
    // earlier messages were trimmed, changes more often).
    let first_system = (0..slots.len()).find(|&i| slots[i].kind == BlockKind::System);
    let last_tool = (0..slots.len())
        .rev()
        .find(|&i| slots[i].kind == BlockKind::Tool);
    for candidate in [last, first_system, last_tool] {
        add(&mut chosen, candidate);
    }
    if let Some(last) = last {
        let fallback = fallback(slots, last, &chosen);
        add(&mut chosen, fallback);
    }
    chosen.sort_unstable();
    let mut shortest_client: Option<CacheTtl> = None;
    chosen
        .into_iter()
        .map(|block| match slots[block].client {
            Some(own) => {
                shortest_client = Some(shortest_client.map_or(own, |s| s.min(own)));
                Breakpoint { block, ttl: own }
            }
            None => Breakpoint {
                block,
                ttl: shortest_client.map_or(ttl, |s| s.min(ttl)),
            },
        })
        .collect()
}

/// Adds `candidate` unless it is there already or no breakpoint is left.
fn add(chosen: &mut Vec<usize>, candidate: Option<usize>) {
    if let Some(block) = candidate
        && chosen.len() < MAX_BREAKPOINTS
        && !chosen.contains(&block)
    {
        chosen.push(block);
    }
}

/// A markable block within the lookback of `last` and as far back as it reaches, when
/// the breakpoint before `last` is out of its reach (so an entry written up to 39 blocks
/// back is still found); `None` when the reach is already covered.
fn fallback(slots: &[Slot], last: usize, chosen: &[usize]) -> Option<usize> {
    let previous = chosen.iter().copied().filter(|&b| b < last).max();
    let reach = last.saturating_sub(LOOKBACK_BLOCKS - 1);
    if previous.is_some_and(|p| p >= reach) || last < LOOKBACK_BLOCKS {
        return None;
    }
    (reach..last)
        .find(|&i| slots[i].kind != BlockKind::Unmarkable && previous.is_none_or(|p| i > p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use BlockKind::{Content, System, Tool, Unmarkable};
    use CacheTtl::{FiveMinutes, OneHour};

    fn slots(kinds: &[BlockKind]) -> Vec<Slot> {
        kinds.iter().copied().map(Slot::of).collect()
    }

    fn blocks(points: &[Breakpoint]) -> Vec<usize> {
        points.iter().map(|b| b.block).collect()
    }

    /// Tools, a system prompt, then `n` message blocks.
    fn turn(tools: usize, n: usize) -> Vec<Slot> {
        let mut kinds = vec![Tool; tools];
        kinds.push(System);
        kinds.extend(std::iter::repeat_n(Content, n));
        slots(&kinds)
    }

    #[test]
    fn tools_system_and_the_latest_block_are_marked_in_order() {
        let points = place(&turn(3, 5), FiveMinutes);
        // Tools 0..3, system 3, messages 4..9.
        assert_eq!(blocks(&points), vec![2, 3, 8]);
        assert!(points.iter().all(|p| p.ttl == FiveMinutes));
        let hour = place(&turn(3, 5), OneHour);
        assert!(hour.iter().all(|p| p.ttl == OneHour));
    }

    #[test]
    fn a_long_round_gets_a_fallback_within_the_lookback() {
        // 40 message blocks after the system prompt: the latest is 44, the system 4.
        let points = place(&turn(4, 40), FiveMinutes);
        assert_eq!(blocks(&points), vec![3, 4, 25, 44]);
        assert!(points.len() <= MAX_BREAKPOINTS);
        // The fallback is within the latest's lookback and reaches 19 blocks further back.
        assert!(points[3].block - points[2].block < LOOKBACK_BLOCKS);
        // A short history needs none.
        assert_eq!(blocks(&place(&turn(4, 10), FiveMinutes)), vec![3, 4, 14]);
    }

    #[test]
    fn never_on_a_thinking_or_empty_block() {
        let mut s = turn(1, 3);
        s.push(Slot::of(Unmarkable));
        let points = place(&s, FiveMinutes);
        assert_eq!(blocks(&points), vec![0, 1, 4]);
        let mut long = turn(0, 30);
        // The fallback's place (index 11 = 30 - 19) is a thinking block: the next one.
        long[11] = Slot::of(Unmarkable);
        let points = place(&long, FiveMinutes);
        assert_eq!(blocks(&points), vec![0, 12, 30]);
        for p in &points {
            assert_ne!(long[p.block].kind, Unmarkable);
        }
        assert!(place(&slots(&[Unmarkable, Unmarkable]), FiveMinutes).is_empty());
        assert!(place(&[], FiveMinutes).is_empty());
    }

    #[test]
    fn a_clients_breakpoints_are_kept_counted_and_never_moved() {
        let mut s = turn(2, 30);
        s[10].client = Some(FiveMinutes);
        s[20].client = Some(OneHour);
        let points = place(&s, OneHour);
        // Two of the client's, then the latest block and the system prompt: four.
        assert_eq!(blocks(&points), vec![2, 10, 20, 32]);
        assert_eq!(points[1].ttl, FiveMinutes);
        assert_eq!(points[2].ttl, OneHour);
        // buddy's own after a client's 5-minute one is 5 minutes (longer ones go first).
        assert_eq!(points[0].ttl, OneHour);
        assert_eq!(points[3].ttl, FiveMinutes);
        // Four of the client's leave buddy none; five are still all kept.
        for i in [5, 6, 7, 8, 9] {
            s[i].client = Some(FiveMinutes);
        }
        let points = place(&s, FiveMinutes);
        assert_eq!(blocks(&points), vec![5, 6, 7, 8, 9, 10, 20]);
        // A client breakpoint on the latest block is not doubled.
        let mut s = turn(1, 3);
        s[4].client = Some(FiveMinutes);
        assert_eq!(blocks(&place(&s, FiveMinutes)), vec![0, 1, 4]);
    }

    #[test]
    fn the_first_system_block_is_marked_not_a_later_note() {
        let s = slots(&[Tool, System, System, Content, Content]);
        assert_eq!(blocks(&place(&s, FiveMinutes)), vec![0, 1, 4]);
    }

    #[test]
    fn no_tools_and_no_system_still_slide() {
        assert_eq!(blocks(&place(&slots(&[Content]), FiveMinutes)), vec![0]);
        assert_eq!(
            blocks(&place(&slots(&[Content, Content]), FiveMinutes)),
            vec![1]
        );
    }
}
