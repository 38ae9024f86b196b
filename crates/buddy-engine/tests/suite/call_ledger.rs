//! A turn whose calls reserve their worst case in a key's ledger first
//! (`CallSlots::with_ledger`): each call reserves before it is made and settles to its
//! usage after; a call the ledger refuses is not made, and the turn ends `cost_budget`
//! with an answer from what it has; a reservation short of the worst case cuts the
//! call's output to what it covers.

use std::sync::{Arc, Mutex};

use buddy_core::{BoxFuture, ChatEvent, GuardKind, Price, StopReason, ToolOutcome, Usage, Usd};
use buddy_engine::{CallLedger, CallSlots, CallWorst, Engine, Reserved, TurnRequest};
use buddy_testkit::{ReplyProvider, TestTool, TestToolbox, reply_tokens};
use pretty_assertions::assert_eq;

use super::call;

/// A ledger with room for `calls` reservations: each reserves a call's worst case
/// (its input and `max_output_tokens`, or 100 tokens without one) and cuts the output
/// bound to `cut_to` when set; it books what settled calls cost and records what it saw.
#[derive(Debug)]
struct Ledger {
    calls: Mutex<usize>,
    cut_to: Option<u32>,
    booked: Mutex<u64>,
    seen: Mutex<Vec<String>>,
}

impl Ledger {
    fn new(calls: usize, cut_to: Option<u32>) -> Arc<Self> {
        Arc::new(Ledger {
            calls: Mutex::new(calls),
            cut_to,
            booked: Mutex::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl CallLedger for Ledger {
    fn reserve(&self, worst: CallWorst) -> BoxFuture<'_, Result<Reserved, String>> {
        Box::pin(async move {
            let price = worst.price.expect("the turn's price is passed");
            let output = worst.max_output_tokens.map_or(100, u64::from);
            let wanted = price.estimate(worst.input_tokens, output);
            let mut calls = self.calls.lock().unwrap();
            if *calls == 0 {
                self.seen.lock().unwrap().push("refused".into());
                return Err("the key's room is spent".into());
            }
            *calls -= 1;
            assert!(
                wanted.nanos() >= 100_000,
                "the input and 100 tokens out at $1/M"
            );
            self.seen
                .lock()
                .unwrap()
                .push(format!("reserved {}", worst.max_output_tokens.unwrap_or(0)));
            Ok(Reserved {
                amount: wanted,
                price: Some(price),
                max_output_tokens: self.cut_to,
            })
        })
    }

    fn settle(&self, reserved: Reserved, usage: Option<Usage>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let cost = usage.map_or(Usd::ZERO, |u| reserved.price.unwrap().cost(&u));
            assert!(cost <= reserved.amount, "{cost} cost past its reservation");
            *self.booked.lock().unwrap() += cost.nanos();
            self.seen
                .lock()
                .unwrap()
                .push(format!("settled {}", usage.map_or(0, |u| u.output_tokens)));
        })
    }
}

/// One lookup, then the answer; it records each request's output bound.
fn provider(bounds: Arc<Mutex<Vec<Option<u32>>>>) -> ReplyProvider {
    ReplyProvider::new(move |request, n| {
        bounds.lock().unwrap().push(request.max_output_tokens);
        Ok(match n {
            0 => reply_tokens("", vec![call("c1", "lookup", serde_json::json!({}))]),
            _ => reply_tokens("The answer is 42.", vec![]),
        })
    })
}

async fn run(ledger: Arc<Ledger>) -> (Vec<ChatEvent>, buddy_engine::TurnOutcome, Vec<Option<u32>>) {
    let bounds = Arc::new(Mutex::new(Vec::new()));
    let toolbox = TestToolbox::new().with("lookup", TestTool::new(|_, _| ToolOutcome::ok("42")));
    let engine = Engine::new(Arc::new(provider(Arc::clone(&bounds))), Arc::new(toolbox));
    let slots = CallSlots::new(4).with_ledger(ledger);
    // $1 per million tokens in and out.
    let request = TurnRequest::new("test-model", "please help")
        .with_price(Some(Price::new(1.0, 1.0)))
        .with_call_slots(Some(slots));
    let (events, outcome) = engine.run_collect(request).await;
    let bounds = bounds.lock().unwrap().clone();
    (events, outcome, bounds)
}

#[tokio::test]
async fn every_call_reserves_before_it_is_made_and_settles_to_its_usage_after() {
    let ledger = Ledger::new(9, None);
    let (_, outcome, bounds) = run(Arc::clone(&ledger)).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(outcome.stats.model_calls, 2);
    assert_eq!(
        ledger.seen(),
        ["reserved 0", "settled 5", "reserved 0", "settled 5"]
    );
    assert_eq!(
        bounds,
        [None, None],
        "a reservation of the worst case cuts nothing"
    );
    // What the two calls cost, 15 tokens each at $1 per million.
    assert_eq!(*ledger.booked.lock().unwrap(), 2 * 15_000);
}

#[tokio::test]
async fn a_call_the_ledger_refuses_is_not_made_and_the_turn_answers_for_its_cost() {
    // Room for the first call only.
    let ledger = Ledger::new(1, None);
    let (events, outcome, bounds) = run(Arc::clone(&ledger)).await;
    assert_eq!(outcome.reason, StopReason::CostBudget);
    assert_eq!(
        outcome.stats.model_calls, 1,
        "the refused call takes no number"
    );
    assert_eq!(bounds.len(), 1, "the provider saw one call");
    assert_eq!(ledger.seen(), ["reserved 0", "settled 5", "refused"]);
    let answer = outcome.answer.unwrap_or_default();
    assert!(
        answer.contains("42"),
        "answered from the tool results: {answer}"
    );
    assert!(
        events.iter().any(|e| matches!(e,
            ChatEvent::GuardTripped { guard: GuardKind::CostBudget, detail, .. } if detail.contains("room is spent"))),
        "{events:?}"
    );
    // No room at all: no call is made, and the turn still ends with an answer.
    let ledger = Ledger::new(0, None);
    let (_, outcome, bounds) = run(Arc::clone(&ledger)).await;
    assert_eq!(
        (outcome.reason, outcome.stats.model_calls, bounds.len()),
        (StopReason::CostBudget, 0, 0)
    );
    assert!(
        !outcome.answer.unwrap_or_default().is_empty(),
        "buddy writes the answer"
    );
}

#[tokio::test]
async fn a_reservation_short_of_the_worst_case_cuts_the_calls_output() {
    let ledger = Ledger::new(9, Some(64));
    let (_, outcome, bounds) = run(ledger).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(bounds, [Some(64), Some(64)]);
}
