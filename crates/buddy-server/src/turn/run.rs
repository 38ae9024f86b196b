//! Running an opened turn on its own task: the engine's events into the turn's log; at
//! the end the turn closed in the store, its cost added to the key's spend, metrics and
//! a log line, the claim released — then the terminal event, so a client never hears
//! the turn ended before it is recorded.

use std::sync::Arc;

use buddy_core::{ChatEvent, Message, MessageSink, RecordError, StopReason};
use buddy_engine::{Engine, LoopPolicy, TurnOutcome, TurnRequest};
use buddy_store::{Store, TurnClosing};
use buddy_telemetry::TurnScope;
use tokio::sync::{mpsc, oneshot};

use super::kept::KeptLog;
use super::open::Opened;
use super::sink::StoreSink;
use super::spec::{Family, StartedTurn};
use crate::caller::Caller;
use crate::gate::Admission;
use crate::metrics::{TimedProvider, observe_event, observe_turn};
use crate::state::{AppState, TurnLease};
use crate::turn_log::EventLog;

/// Room between the engine and the turn's log.
const EVENT_BUFFER: usize = 256;

/// Starts the opened turn under `policy` on its own task. The turn is recorded (stop
/// reason and stats) however it ends, even when the client leaves; its terminal event
/// goes out only once the turn is stored, and says `store_error` when it could not be.
pub(crate) fn run(
    state: &AppState,
    caller: &Caller,
    opened: Opened,
    policy: LoopPolicy,
    admitted: Admission,
    at_ceiling: Option<String>,
) -> StartedTurn {
    let store = Arc::clone(&state.inner.store);
    let settings = &state.inner.settings;
    let approval = match opened.spec.family {
        Family::Native => settings.approval.clone(),
        Family::OpenAi => settings.openai_approval.clone(),
    };
    let resolved = opened.resolved;
    let mut request = TurnRequest::new(resolved.model.clone(), String::new())
        .with_price(admitted.price)
        .with_prices(Some(Arc::new(settings.prices.clone())))
        .with_call_slots(Some(admitted.slots.clone()))
        .with_history(opened.history)
        .with_history_counts(opened.counts)
        .with_policy(policy)
        .with_cancel(opened.cancel.clone())
        .with_approval(approval)
        .with_clock(resolved.clock.clone());
    // A person may answer the tools' questions on the native API; the OpenAI facades
    // have no such event, so their turns are unattended (the policy answers).
    if opened.spec.family == Family::Native {
        request = request.with_elicitation(Arc::clone(&opened.lease.desk));
    }
    request.user_message = opened.spec.user_message;
    request.resume = opened.spec.resume;
    request.sampling = opened.spec.sampling;
    request.cache_key = opened.spec.cache_key;
    if let Some(telemetry) = &settings.telemetry {
        let trace = caller.trace.as_ref();
        let scope = TurnScope {
            traceparent: trace.map(|t| t.traceparent.as_str()),
            tracestate: trace.and_then(|t| t.tracestate.as_deref()),
            provider: resolved.provider.name(),
            model: &resolved.model,
            conversation: opened.conversation_id.as_deref(),
        };
        let served = resolved.provider.served_by();
        request = request.with_observer(telemetry.turn_served(scope, served));
    }
    let sink = opened.conversation_id.as_ref().map(|id| {
        Arc::new(StoreSink::new(
            Arc::clone(&store),
            id.clone(),
            opened.turn_id.clone(),
            opened.user_stored,
        ))
    });
    if let Some(sink) = &sink {
        request = request.with_recorder(Arc::clone(sink) as Arc<dyn MessageSink>);
    }
    // A stored conversation keeps the tasks its calls become, for a turn after a crash.
    let task_log = opened.conversation_id.as_ref().map(|id| {
        Arc::new(super::task_log::StoreTaskLog::new(
            Arc::clone(&store),
            id.clone(),
        )) as Arc<dyn buddy_core::TaskLog>
    });
    request = request.with_tasks(task_log, opened.open_tasks);
    let names = Names {
        provider: resolved.provider.name().to_owned(),
        model: resolved.model.clone(),
        key: caller.name.clone(),
        turn: opened.turn_id.clone(),
    };
    let engine = Engine::new(
        Arc::new(TimedProvider {
            inner: resolved.provider,
        }),
        resolved.toolbox,
    );
    let turn_log = EventLog::new(opened.turn_id.clone(), caller.owner.clone());
    let kept = state.keep_log(&turn_log);
    let watch = turn_log.watch(0);
    let (kept_tx, kept_rx) = match opened.spec.keep_messages {
        true => {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        }
        false => (None, None),
    };
    let running = Running {
        engine,
        request,
        names,
        store,
        sink,
        log: turn_log,
        kept,
        messages: kept_tx,
        lease: opened.lease,
        admitted,
        state: state.clone(),
        at_ceiling,
    };
    state.inner.turns.spawn(running.drive());
    StartedTurn {
        events: watch,
        cancel: opened.cancel,
        conversation_id: opened.conversation_id,
        turn_id: opened.turn_id,
        model: resolved.model,
        messages: kept_rx,
    }
}

/// A turn on its own task, and what it answers to.
struct Running {
    engine: Engine,
    request: TurnRequest,
    names: Names,
    store: Arc<dyn Store>,
    sink: Option<Arc<StoreSink>>,
    log: Arc<EventLog<ChatEvent>>,
    kept: KeptLog<ChatEvent>,
    /// Where the whole conversation goes at the end, when the endpoint asked for it.
    messages: Option<oneshot::Sender<Vec<Message>>>,
    lease: TurnLease,
    /// The gate's admission: what the turn holds of its key's spend room, settled at
    /// its end.
    admitted: Admission,
    state: AppState,
    /// What its answer adds when the turn ends for its cost with its key's room as its
    /// budget.
    at_ceiling: Option<String>,
}

impl Running {
    /// Runs the turn to its end, records it, and only then lets its terminal event out.
    async fn drive(self) {
        let (log, names, store) = (&self.log, &self.names, &*self.store);
        let (inner_tx, mut inner_rx) = mpsc::channel(EVENT_BUFFER);
        let forward = async {
            let mut terminal = None;
            while let Some(event) = inner_rx.recv().await {
                observe_event(&event, &names.provider);
                if event.is_terminal() {
                    terminal = Some(event);
                    continue;
                }
                log.push(event);
            }
            terminal
        };
        let (outcome, terminal) = tokio::join!(self.engine.run(self.request, inner_tx), forward);
        let sink = self.sink.as_deref();
        let (reason, terminal, closed) = close(store, sink, &outcome, terminal).await;
        let stats = &outcome.stats;
        observe_turn(reason, stats, &names.provider, &names.model, &names.key);
        if let Some(messages) = self.messages {
            let _ = messages.send(outcome.messages.clone());
        }
        let refused = self.admitted.refusal_words();
        self.admitted.settle_turn(&self.state, stats.cost_usd).await;
        tracing::info!(turn = %names.turn, conversation = ?sink.map(|s| &s.conversation), key = %names.key,
            reason = %reason, model_calls = stats.model_calls, tool_calls = stats.tool_calls, "turn ended");
        // Free the conversation and the key's slot before the client hears the turn
        // ended, so that its next message is never refused as concurrent (a store that
        // keeps the claims ended it with the closing write).
        self.lease.release_closed(closed).await;
        let terminal = with_ceiling_words(terminal, self.at_ceiling.or(refused), log);
        match terminal {
            Some(terminal) => {
                log.push(terminal);
            }
            None => log.close(),
        }
        self.kept.ended().await;
    }
}

/// A turn ended for its cost whose budget was its key's room: `words` (buddy's answer at
/// the ceiling) added to its answer, streamed as its last text.
fn with_ceiling_words(
    terminal: Option<ChatEvent>,
    words: Option<String>,
    log: &EventLog<ChatEvent>,
) -> Option<ChatEvent> {
    let (
        Some(ChatEvent::Done {
            reason: StopReason::CostBudget,
            mut answer,
            stats,
        }),
        Some(words),
    ) = (terminal.clone(), words)
    else {
        return terminal;
    };
    let text = match answer.is_empty() {
        true => words,
        false => format!("\n\n{words}"),
    };
    answer.push_str(&text);
    log.push(ChatEvent::TextDelta { text });
    Some(ChatEvent::Done {
        reason: StopReason::CostBudget,
        answer,
        stats,
    })
}

/// Who and what a turn is, for its metrics, spend and log line.
struct Names {
    provider: String,
    model: String,
    key: String,
    turn: String,
}

/// Closes a stored turn (its last messages, stop reason, stats and tape); the reason
/// and terminal event become `store_error` when that write fails. The flag says the
/// closing write was made.
async fn close(
    store: &dyn Store,
    sink: Option<&StoreSink>,
    outcome: &TurnOutcome,
    terminal: Option<ChatEvent>,
) -> (StopReason, Option<ChatEvent>, bool) {
    let reason = outcome.reason;
    let Some(sink) = sink else {
        return (reason, terminal, false);
    };
    // The tape lets an operator replay the turn under another policy later.
    let tape = serde_json::to_string(&outcome.tape).ok();
    let stored = match sink.rest() {
        Ok(last) => store
            .close_turn(TurnClosing {
                conversation: &sink.conversation,
                turn: &sink.turn,
                last: &last,
                reason,
                stats: &outcome.stats,
                error: outcome.error.as_deref(),
                tape: tape.as_deref(),
            })
            .await
            .map_err(|e| RecordError(e.to_string())),
        Err(e) => Err(e),
    };
    let Err(e) = stored else {
        return (reason, terminal, true);
    };
    tracing::error!(turn = %sink.turn, error = %e, "turn end not stored");
    let reason = StopReason::StoreError;
    let terminal = ChatEvent::Error {
        reason,
        message: format!(
            "the turn ran but could not be stored ({e}); the conversation may lack \
             its last messages. Check the server's store"
        ),
        stats: outcome.stats,
    };
    (reason, Some(terminal), false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn_log::Next;
    use buddy_core::TurnStats;

    fn done(reason: StopReason, answer: &str) -> Option<ChatEvent> {
        Some(ChatEvent::Done {
            reason,
            answer: answer.into(),
            stats: TurnStats::default(),
        })
    }

    #[test]
    fn a_turn_ended_for_its_cost_under_the_keys_room_says_the_key_reached_its_ceiling() {
        let log = EventLog::new("turn_1".into(), "o".into());
        let mut watch = log.watch(0);
        let words = Some("buddy stopped here: the ceiling.".to_owned());
        let ended = with_ceiling_words(done(StopReason::CostBudget, "So far: a.txt."), words, &log);
        let said = "So far: a.txt.\n\nbuddy stopped here: the ceiling.";
        assert_eq!(ended, done(StopReason::CostBudget, said));
        let Some(Next::Event(_, streamed)) = watch.try_next() else {
            panic!("the words are streamed");
        };
        let text = "\n\nbuddy stopped here: the ceiling.".to_owned();
        assert_eq!(*streamed, ChatEvent::TextDelta { text });
        // Another stop, or a budget that was not the key's room, is left as it was.
        let words = Some("buddy stopped here: the ceiling.".to_owned());
        let other = with_ceiling_words(done(StopReason::LoopDetected, "x"), words, &log);
        assert_eq!(other, done(StopReason::LoopDetected, "x"));
        let unbound = with_ceiling_words(done(StopReason::CostBudget, "x"), None, &log);
        assert_eq!(unbound, done(StopReason::CostBudget, "x"));
        assert!(watch.try_next().is_none(), "nothing more streamed");
    }
}
