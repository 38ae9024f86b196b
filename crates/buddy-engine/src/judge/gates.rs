//! Planning a round's calls: the gates each call passes, in order. The first that fires
//! decides what happens to the call (answered without running, refused, shared with an
//! earlier call of the reply), and the gates after it are not asked; a call no gate
//! stops runs. Then the reply's text is checked against the calls that run.

use std::collections::HashMap;

use buddy_core::{GuardAction, GuardKind, RepeatSemantics, StopReason, ToolCall};

use super::memory::Judge;
use super::round::{
    Plan, RoundFacts, RoundJudge, Slot, refused, repeats_old_ground, varies_old_ground,
};
use super::route::FINISH_TOOL;
use super::verdict::{FinalizeCause, Trip};
use crate::approval::Decision;
use crate::words::not_run;

/// One gate: its name (for tests and traces) and its check, which fires (returns true)
/// when it decided the call's plan.
#[derive(Clone, Copy)]
pub(super) struct Gate {
    pub name: &'static str,
    pub check: fn(&mut Gating<'_>) -> bool,
}

/// The gates, in the order they are asked.
pub(super) const GATES: [Gate; 11] = [
    Gate {
        name: "resent",
        check: resent,
    },
    Gate {
        name: "rejected",
        check: rejected,
    },
    Gate {
        name: "unattended",
        check: unattended,
    },
    Gate {
        name: "finish_call",
        check: finish_call,
    },
    Gate {
        name: "tool_call_limit",
        check: tool_call_limit,
    },
    Gate {
        name: "withdrawn",
        check: withdrawn,
    },
    Gate {
        name: "no_tools_offered",
        check: no_tools_offered,
    },
    Gate {
        name: "skill_call_limit",
        check: skill_call_limit,
    },
    Gate {
        name: "same_in_reply",
        check: same_in_reply,
    },
    Gate {
        name: "repeat_not_rerun",
        check: repeat_not_rerun,
    },
    Gate {
        name: "tree_tool_calls",
        check: tree_tool_calls,
    },
];

impl RoundJudge {
    /// Plans every call of the reply: the checks that need no execution. `semantics` is
    /// each call's skill semantics (`None` for an unknown tool); `decisions` a person's
    /// decisions about calls of a resumed round, taken as they are used.
    pub(super) fn plan(
        &mut self,
        judge: &mut Judge,
        calls: Vec<ToolCall>,
        semantics: &[Option<RepeatSemantics>],
        decisions: &mut HashMap<String, Decision>,
        facts: RoundFacts<'_>,
    ) -> (Vec<Slot>, Vec<Trip>) {
        let mut trips = Vec::new();
        let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
        let mut planned_runs = 0u32;
        for (i, call) in calls.into_iter().enumerate() {
            let known = semantics.get(i).copied().flatten();
            let mut slot = Self::slot(judge, call, known.unwrap_or_default());
            self.plan_one(
                judge,
                &mut slot,
                &slots,
                planned_runs,
                decisions,
                facts,
                &mut trips,
            );
            if matches!(slot.plan, Plan::Run) {
                planned_runs += 1;
            }
            judge.memory.log.note_requested(&slot.key);
            slots.push(slot);
        }
        // The same answer beside calls that only vary old ones a little (the same
        // arguments counting up or growing) is a model that has answered and keeps
        // calling; beside a new action it is narration of new work, and exact repeats are
        // judged by their results.
        let runs = || slots.iter().filter(|s| matches!(s.plan, Plan::Run));
        if self.text_repeated
            && runs().any(|s| varies_old_ground(judge, s))
            && runs().all(|s| varies_old_ground(judge, s) || repeats_old_ground(judge, s))
        {
            self.repeated_answer(judge, &mut slots, &mut trips);
        }
        (slots, trips)
    }

    /// Plans one call: the gates of `gates.rs`, in order, until one decides it.
    #[allow(clippy::too_many_arguments)]
    fn plan_one(
        &mut self,
        judge: &mut Judge,
        slot: &mut Slot,
        earlier: &[Slot],
        planned_runs: u32,
        decisions: &mut HashMap<String, Decision>,
        facts: RoundFacts<'_>,
        trips: &mut Vec<Trip>,
    ) {
        let call = CallFacts::new(judge, slot, earlier, planned_runs, decisions, facts);
        pass(&mut Gating {
            round: self,
            judge,
            slot,
            call: &call,
            trips,
        });
    }
}

/// What the gates know of one call beyond its slot, made once before they are asked.
pub(super) struct CallFacts<'f> {
    name: String,
    /// Runs of the call's skill in the turn, this reply's planned runs included.
    runs_of_skill: u32,
    /// The slot of this reply that already runs the same call, if any.
    earlier_in_response: Option<usize>,
    /// A person's decision about the call (a resumed round).
    decision: Option<Decision>,
    /// Calls of this reply planned to run so far.
    planned_runs: u32,
    round: RoundFacts<'f>,
}

impl<'f> CallFacts<'f> {
    /// The facts of `slot`, whose reply planned `earlier` before it; takes the call's
    /// decision out of `decisions`.
    pub(super) fn new(
        judge: &Judge,
        slot: &Slot,
        earlier: &[Slot],
        planned_runs: u32,
        decisions: &mut HashMap<String, Decision>,
        round: RoundFacts<'f>,
    ) -> Self {
        let name = slot.call.name.clone();
        let runs_in_response = earlier
            .iter()
            .filter(|s| s.call.name == name && matches!(s.plan, Plan::Run))
            .count();
        let runs_of_skill = judge
            .memory
            .calls_per_skill
            .get(&name)
            .copied()
            .unwrap_or(0)
            + u32::try_from(runs_in_response).unwrap_or(u32::MAX);
        let earlier_in_response = earlier
            .iter()
            .position(|s| s.key == slot.key && matches!(s.plan, Plan::Run));
        CallFacts {
            name,
            runs_of_skill,
            earlier_in_response,
            decision: decisions.remove(&slot.call.id),
            planned_runs,
            round,
        }
    }
}

/// What a gate works on: the round, the judge, the call's slot and facts, and the trips
/// to announce.
pub(super) struct Gating<'g> {
    pub round: &'g mut RoundJudge,
    pub judge: &'g mut Judge,
    pub slot: &'g mut Slot,
    pub call: &'g CallFacts<'g>,
    pub trips: &'g mut Vec<Trip>,
}

/// Asks the gates in order; returns the name of the one that fired, if any.
pub(super) fn pass(gating: &mut Gating<'_>) -> Option<&'static str> {
    GATES
        .iter()
        .find(|gate| (gate.check)(gating))
        .map(|gate| gate.name)
}

/// The same call, sent again under the id of one that already ran, gets that call's
/// result: a call runs at most once (running it again could start the same work twice).
fn resent(g: &mut Gating<'_>) -> bool {
    let Some(resent) = g.judge.memory.resent.remove(&g.slot.call.id) else {
        return false;
    };
    let earlier = resent.earlier;
    g.slot.plan = Plan::Answer {
        content: resent.content,
        is_error: resent.is_error,
    };
    g.trips.push(
        Trip::new(
            GuardKind::Repetition,
            GuardAction::ReturnedEarlierResult,
            format!(
                "call `{earlier}` was sent again with the same id and arguments; it already ran, so it \
                 gets the result it got then (a call runs at most once)"
            ),
        )
        .on(&g.call.name),
    );
    true
}

/// A person rejected the call.
fn rejected(g: &mut Gating<'_>) -> bool {
    let Some(Decision::Reject { reason }) = &g.call.decision else {
        return false;
    };
    g.slot.plan = refused(not_run::rejected(reason.as_deref()));
    true
}

/// The call needs an approval nobody can give in this run: it is refused, and its skill
/// withdrawn (a further call to it ends the turn like any withdrawn skill's).
fn unattended(g: &mut Gating<'_>) -> bool {
    let name = &g.call.name;
    let approval = g.call.round.approval;
    if g.call.decision.is_some() || !approval.unattended || g.judge.memory.is_withdrawn(name) {
        return false;
    }
    let Some(why) = approval.needs_approval(name, g.slot.semantics) else {
        return false;
    };
    g.slot.plan = refused(not_run::unattended(name));
    g.judge.memory.withdraw(
        name,
        format!("{why}, and nobody can approve calls in this run"),
        GuardKind::Approval,
    );
    g.trips.push(
        Trip::new(
            GuardKind::Approval,
            GuardAction::Refused,
            format!(
                "{why}; nobody can approve calls in this run, so it was not run. Allow it in \
                 buddy.toml ([approval] skills.\"{name}\" = \"never\") or with --approval never"
            ),
        )
        .on(name),
    );
    true
}

/// A `finish` call that reached the round had arguments without a usable answer.
fn finish_call(g: &mut Gating<'_>) -> bool {
    if !(g.judge.policy.finish_tool && g.call.name == FINISH_TOOL) {
        return false;
    }
    g.slot.plan = refused(not_run::FINISH_ARGS.to_owned());
    true
}

/// The turn's tool calls are used up: the call is refused and the turn goes to Finalize.
fn tool_call_limit(g: &mut Gating<'_>) -> bool {
    let max = g.judge.policy.max_tool_calls;
    if g.call.round.tool_calls_so_far + g.call.planned_runs < max {
        return false;
    }
    g.slot.plan = refused(not_run::tool_limit(max));
    g.round.set_cause(FinalizeCause::new(
        StopReason::MaxToolCalls,
        GuardKind::ToolCallLimit,
        format!("{max} of {max} tool calls used"),
    ));
    true
}

/// The tool calls the turn shares with its sub-agents (and its parents) are used: a call
/// that would run is answered unrun, and the turn answers after the round. Last, so it
/// only counts calls every other gate lets run; a turn without sub-agents never meets it
/// (its own `tool_call_limit` is the same cap, asked first).
fn tree_tool_calls(g: &mut Gating<'_>) -> bool {
    if g.call.planned_runs < g.call.round.tree_tool_calls {
        return false;
    }
    g.slot.plan = Plan::Answer {
        content: not_run::TREE_TOOL_CALLS.to_owned(),
        is_error: true,
    };
    g.round.set_cause(FinalizeCause::new(
        StopReason::MaxToolCalls,
        GuardKind::ToolCallLimit,
        "the tool calls this turn and its sub-agents share are used".to_owned(),
    ));
    true
}

/// The call's skill was withdrawn earlier in the turn.
fn withdrawn(g: &mut Gating<'_>) -> bool {
    let Some(withdrawal) = g.judge.memory.withdrawn.get(&g.call.name).cloned() else {
        return false;
    };
    g.slot.plan = refused(not_run::withdrawn(&g.call.name, &withdrawal.why));
    g.round
        .withdrawn_called(g.judge, g.slot, &withdrawal.why, withdrawal.by, g.trips);
    true
}

/// The model call that asked for the call offered no tools.
fn no_tools_offered(g: &mut Gating<'_>) -> bool {
    if g.call.round.tools_offered {
        return false;
    }
    g.slot.plan = refused(not_run::NO_TOOLS.to_owned());
    g.round.withdrawn_called(
        g.judge,
        g.slot,
        "no tools are offered",
        GuardKind::ToolsWithdrawn,
        g.trips,
    );
    true
}

/// The call's skill reached `max_calls_per_skill`: it is withdrawn.
fn skill_call_limit(g: &mut Gating<'_>) -> bool {
    let Some(limit) = g.judge.policy.max_calls_per_skill else {
        return false;
    };
    if g.call.runs_of_skill < limit {
        return false;
    }
    let name = &g.call.name;
    let why = format!("it reached its limit of {limit} calls in this turn");
    g.judge
        .memory
        .withdraw(name, why.clone(), GuardKind::SkillCallLimit);
    g.trips.push(
        Trip::new(
            GuardKind::SkillCallLimit,
            GuardAction::WithdrewSkill,
            why.clone(),
        )
        .on(name),
    );
    g.round
        .count_trip(g.judge, name, GuardKind::SkillCallLimit, &why);
    g.slot.plan = refused(not_run::skill_limit(name, &why));
    true
}

/// A parallel batch that names the same call twice runs it once.
fn same_in_reply(g: &mut Gating<'_>) -> bool {
    let Some(first) = g.call.earlier_in_response else {
        return false;
    };
    g.slot.plan = Plan::SameAs(first);
    true
}

/// A repeat of a `pure` or `effectful` skill is not run again (see
/// `RoundJudge::repeat_not_rerun`).
fn repeat_not_rerun(g: &mut Gating<'_>) -> bool {
    if !g.judge.policy.loop_detection
        || !matches!(
            g.slot.semantics,
            RepeatSemantics::Pure | RepeatSemantics::Effectful
        )
    {
        return false;
    }
    let Some(earlier) = g.judge.memory.log.last_with_key(&g.slot.key).cloned() else {
        return false;
    };
    g.round.repeat_not_rerun(g.judge, g.slot, &earlier, g.trips);
    true
}
