//! The policy table: every field of [`LoopPolicy`] once, with its default, the values it
//! accepts, how a request may change it (ceiling), and its command-line flag. Adding a
//! field is one entry here.

use buddy_core::Usd;

use super::table::{Ceiling, Check, Flag, policy_fields};
use super::{OnLimit, UnattendedElicitation};

/// `expected` texts of ranges, shared by fields with the same bounds.
const UP_TO_1000: &str = "1..=1000";

policy_fields! {
    /// Model calls per turn, the last one reserved for the Finalize call. A backstop, not
    /// the loop detector: sized so real agents' solved runs are not cut (they take up to
    /// ~150 calls); the deadline and the money budget are the limits to set.
    max_model_calls: u32 = 150;
        check Check::Range { lo: 2, hi: 1000, expected: "2..=1000 (one call is reserved to answer)" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "N", help: "Model calls per turn, the last reserved for the answer." };
    /// Tool calls per turn; then Finalize. Several times the model calls, for fan-out.
    max_tool_calls: u32 = 600;
        check Check::Range { lo: 1, hi: 10_000, expected: "1..=10000" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "N", help: "Tool calls per turn." };
    /// Calls of any one skill per turn before it is withdrawn (off by default).
    max_calls_per_skill: Option<u32> = None;
        check Check::Range { lo: 1, hi: 10_000, expected: "1..=10000, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "N", help: "Calls of any one skill per turn (0 = off)." };
    /// Replies with no answer (empty, only reasoning, cut off, buddy's own words, a tool
    /// call written as text) asked again with a short note before the turn ends `no_answer`.
    max_reasks: u32 = 2;
        check Check::Range { lo: 0, hi: 10, expected: "0..=10" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// Replies cut by the output token limit (no call in them) asked to continue where they
    /// stopped before the turn ends `truncated`; each continuation is a model call.
    max_continuations: u32 = 2;
        check Check::Range { lo: 0, hi: 10, expected: "0..=10" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// Consecutive failures of one skill before it is withdrawn (the circuit breaker).
    max_consecutive_failures: u32 = 3;
        check Check::Range { lo: 1, hi: 1000, expected: UP_TO_1000 };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "N", help: "Consecutive failures before a skill is withdrawn." };
    /// Repetition, cycle, near-duplicate and repeated-answer detection.
    loop_detection: bool = true;
        check Check::Any;
        ceiling Ceiling::LoopDetection;
        flag Flag::Negated { help: "Turn off repetition, cycle, near-duplicate and repeated-answer detection." };
    /// Unchanged results a pollable skill may return for the same arguments before it counts as a loop.
    poll_patience: u32 = 4;
        check Check::Range { lo: 0, hi: 1000, expected: "0..=1000" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// Seconds buddy may spend checking a `pollable` call again itself, without a model
    /// call, while it keeps returning the same result; off with 0 (the model polls).
    poll_max_secs: Option<u64> = Some(300);
        check Check::Range { lo: 1, hi: 86_400, expected: "1..=86400 seconds, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "SECS", help: "Seconds buddy polls a pollable tool itself before handing back (0 = off)." };
    /// Seconds a tool's question for the person (an MCP server's elicitation) waits for
    /// an answer; then it is answered `cancel` and the call goes on.
    elicitation_timeout_secs: u64 = 300;
        check Check::Range { lo: 1, hi: 86_400, expected: "1..=86400 seconds" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// What a turn with nobody to ask (piped `buddy run`, the OpenAI facades) answers a
    /// tool's elicitation: `decline` or `cancel`.
    unattended_elicitation: UnattendedElicitation = UnattendedElicitation::Decline;
        check Check::Any;
        ceiling Ceiling::Free;
        flag Flag::None;
    /// Guard trips (on any skills) after which the turn goes to Finalize.
    max_guard_trips: u32 = 3;
        check Check::Range { lo: 1, hi: 1000, expected: UP_TO_1000 };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// Rounds in a row in which no call ran anew (every call was not run, or repeated an
    /// earlier call with the same result) after which the turn goes to Finalize; off with 0.
    max_stale_rounds: Option<u32> = Some(3);
        check Check::Range { lo: 1, hi: 1000, expected: "1..=1000, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// A reply whose end repeats one chunk of `chant_min_chars` this many times in a row
    /// is cut (stop reason `repetitive_output`); off with 0.
    chant_repeats: Option<u32> = Some(10);
        check Check::Range { lo: 2, hi: 10_000, expected: "2..=10000, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// The shortest chunk that counts as chanting, in bytes.
    chant_min_chars: usize = 50;
        check Check::Range { lo: 8, hi: 1_000_000, expected: "8..=1000000" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// Answer text shorter than this is narration and never counts as a repeated answer.
    repeated_answer_min_chars: usize = 80;
        check Check::Range { lo: 1, hi: 1_000_000, expected: "1..=1000000" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// Text at least this long beside tool calls is taken as the final answer (off by default).
    substantive_answer_chars: Option<usize> = None;
        check Check::Range { lo: 1, hi: 10_000_000, expected: "1..=10000000, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "CHARS", help: "Take text at least this long beside tool calls as the final answer (0 = off)." };
    /// Trust `finish_reason: stop` even when tool calls come with it.
    honor_stop: bool = false;
        check Check::Any;
        ceiling Ceiling::AtLeast;
        flag Flag::Switch { help: "Trust finish_reason \"stop\" even when tool calls come with it." };
    /// Tell the model "N of M model calls left" in a note once half are spent.
    show_budget: bool = true;
        check Check::Any;
        ceiling Ceiling::Free;
        flag Flag::None;
    /// Offer no tools after this many model calls (off by default).
    withdraw_tools_after: Option<u32> = None;
        check Check::Range { lo: 1, hi: 1000, expected: "1..=1000, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "N", help: "Offer no tools after N model calls (0 = off)." };
    /// Offer a `finish(answer)` tool that ends the turn.
    finish_tool: bool = false;
        check Check::Any;
        ceiling Ceiling::Free;
        flag Flag::Switch { help: "Offer a finish(answer) tool that ends the turn." };
    /// Input plus output tokens per turn; then Finalize (off by default).
    max_turn_tokens: Option<u64> = None;
        check Check::Range { lo: 1, hi: u64::MAX, expected: "a number of tokens, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "TOKENS", help: "Token budget of the turn (0 = off)." };
    /// Money budget of a turn in US dollars, by the model's price (built in, or the
    /// operator's); a model call that could pass it (the next call and the Finalize call
    /// estimated at the last call's cost) is not made, and the turn goes to Finalize
    /// (off by default).
    max_turn_cost_usd: Option<Usd> = None;
        check Check::Range { lo: 1, hi: 1_000_000_000_000_000, expected: "an amount of US dollars up to 1000000 such as 0.50, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "USD", help: "Money budget of the turn in US dollars (0 = off)." };
    /// Wall-clock budget of a turn in milliseconds; then Finalize (off by default).
    deadline_ms: Option<u64> = None;
        check Check::Range { lo: 1, hi: u64::MAX, expected: "a number of milliseconds, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "MS", help: "Deadline of the turn in milliseconds (0 = off)." };
    /// Time the Finalize call gets, whatever ended the turn; past it buddy answers from
    /// the tool results. A turn with a deadline ends by deadline + this grace.
    finalize_grace_ms: u64 = 10_000;
        check Check::Range { lo: 100, hi: 600_000, expected: "100..=600000" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// What a tripped limit or loop guard does.
    on_limit: OnLimit = OnLimit::Finalize;
        check Check::Any;
        ceiling Ceiling::AtMost;
        flag Flag::Choice { value_name: "MODE", choices: &["finalize", "error"], help: "What a tripped limit does: finalize (answer without tools) or error." };
    /// Tool calls of one response that run at the same time.
    max_parallel_tools: u32 = 4;
        check Check::Range { lo: 1, hi: 64, expected: "1..=64" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// How deep sub-agents may nest: 1 lets the turn delegate, 2 lets its sub-agents
    /// delegate once more; at the last level the delegation tools are not offered (and
    /// refused if called). 0 turns sub-agents off.
    max_agent_depth: u32 = 2;
        check Check::Range { lo: 0, hi: 8, expected: "0..=8" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "N", help: "How deep sub-agents may nest (0 = none)." };
    /// Sub-agents one turn runs at the same time; more wait their turn, in order.
    max_running_agents: u32 = 4;
        check Check::Range { lo: 1, hi: 64, expected: "1..=64" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// Sub-agents started over a whole top-level turn and its tree; more are refused.
    max_agent_spawns: u32 = 16;
        check Check::Range { lo: 0, hi: 1000, expected: "0..=1000" };
        ceiling Ceiling::AtMost;
        flag Flag::Value { value_name: "N", help: "Sub-agents started per top-level turn." };
    /// A sub-agent that sends no event for this long is stopped, and its work so far is
    /// returned marked partial; off with 0.
    child_stall_secs: Option<u64> = Some(120);
        check Check::Range { lo: 1, hi: 86_400, expected: "1..=86400 seconds, or 0 for off" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// Tool calls one response may ask for; the excess get an error result the model reads.
    max_calls_per_reply: u32 = 128;
        check Check::Range { lo: 1, hi: 100_000, expected: "1..=100000" };
        ceiling Ceiling::AtMost;
        flag Flag::None;
    /// The model's context window in tokens (default: buddy's table of common models).
    context_window: Option<u64> = None;
        check Check::Range { lo: 256, hi: 100_000_000, expected: "256..=100000000 tokens, or 0 for the built-in table" };
        ceiling Ceiling::Window;
        flag Flag::None;
    /// Tokens kept free for the reply (default: a quarter of the window, at most 4,096).
    reserve_output_tokens: Option<u64> = None;
        check Check::Range { lo: 1, hi: 100_000_000, expected: "a number of tokens (less than half of context_window), or 0 for the default" };
        ceiling Ceiling::Reserve;
        flag Flag::None;
}
