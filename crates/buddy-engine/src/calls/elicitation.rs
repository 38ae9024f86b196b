//! Elicitation in a turn: a tool's question for the person pauses its call (not the
//! stored turn: the call is in flight) until the answer comes to the turn's
//! [`ElicitationDesk`], the policy's timeout passes, or the turn is cancelled or out of
//! time. With no desk (an unattended turn) the policy answers at once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use buddy_core::{
    BoxFuture, ChatEvent, ContentError, ElicitationAnswer, ElicitationRequest, Elicitor,
    answer_with_defaults, check_content, form_fields,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::policy::{LoopPolicy, UnattendedElicitation};

/// Where the answers to a turn's open elicitation requests come in: the server's route,
/// the CLI's prompt. Shared between the turn and whoever answers.
#[derive(Debug, Default)]
pub struct ElicitationDesk {
    state: Mutex<DeskState>,
}

#[derive(Debug, Default)]
struct DeskState {
    open: HashMap<String, Open>,
    /// Requests answered (or given up) this turn: a late answer is told so.
    closed: HashSet<String>,
}

#[derive(Debug)]
struct Open {
    /// The `elicitation_required` event that showed it, for a client that reattaches.
    shown: ChatEvent,
    schema: serde_json::Value,
    reply: oneshot::Sender<ElicitationAnswer>,
}

/// Why an answer was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("no elicitation request `{0}` in this turn")]
    Unknown(String),
    #[error("elicitation request `{0}` was already answered")]
    Answered(String),
    /// The content does not fit the form; the request stays open.
    #[error("the answer does not fit the form: {0}")]
    Invalid(ContentError),
}

impl ElicitationDesk {
    /// A desk with nothing open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers request `id`; accepted content is checked against its form first (an
    /// invalid one leaves the request open, to be answered again).
    pub fn answer(&self, id: &str, answer: ElicitationAnswer) -> Result<(), AnswerError> {
        let mut state = self.lock();
        let Some(open) = state.open.get(id) else {
            return Err(match state.closed.contains(id) {
                true => AnswerError::Answered(id.to_owned()),
                false => AnswerError::Unknown(id.to_owned()),
            });
        };
        let answer = match answer {
            ElicitationAnswer::Accept { content } => ElicitationAnswer::Accept {
                content: check_content(&open.schema, &content).map_err(AnswerError::Invalid)?,
            },
            other => other,
        };
        if let Some(open) = state.open.remove(id) {
            state.closed.insert(id.to_owned());
            // The call may have gone (cancelled) a moment ago: then nobody waits.
            let _ = open.reply.send(answer);
        }
        Ok(())
    }

    /// Whether request `id` still waits for an answer (not answered, timed out or
    /// dropped with its call).
    pub fn is_open(&self, id: &str) -> bool {
        self.lock().open.contains_key(id)
    }

    /// The `elicitation_required` events of the requests still open, oldest first: what
    /// a client that reattaches must show again.
    pub fn open_requests(&self) -> Vec<ChatEvent> {
        let state = self.lock();
        let mut shown: Vec<&ChatEvent> = state.open.values().map(|o| &o.shown).collect();
        shown.sort_by_key(|event| match event {
            ChatEvent::ElicitationRequired { id, .. } => id_order(id),
            _ => u64::MAX,
        });
        shown.into_iter().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DeskState> {
        // A panic elsewhere cannot leave the maps half-changed: every change is one call.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn open(
        &self,
        id: &str,
        shown: ChatEvent,
        schema: serde_json::Value,
    ) -> oneshot::Receiver<ElicitationAnswer> {
        let (reply, answered) = oneshot::channel();
        self.lock().open.insert(
            id.to_owned(),
            Open {
                shown,
                schema,
                reply,
            },
        );
        answered
    }

    /// Closes `id` if still open (given up: timeout, cancel, the call went).
    fn close(&self, id: &str) {
        let mut state = self.lock();
        if state.open.remove(id).is_some() {
            state.closed.insert(id.to_owned());
        }
    }
}

/// `elicit_7` → 7, so open requests list in the order they were asked.
fn id_order(id: &str) -> u64 {
    id.rsplit('_')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// What the turn hands each call's elicitor: the same for every call of the turn.
#[derive(Clone, Debug)]
pub(crate) struct TurnElicitation {
    pub desk: Option<Arc<ElicitationDesk>>,
    pub events: mpsc::Sender<ChatEvent>,
    pub cancel: CancellationToken,
    pub deadline: Option<Instant>,
    pub timeout: Duration,
    pub unattended: UnattendedElicitation,
    /// Numbers the turn's requests (`elicit_1`, …).
    pub counter: Arc<AtomicU64>,
    /// The notes for the model about requests nobody could answer, until the round's
    /// end takes them ([`TurnElicitation::take_notes`]).
    pub unattended_notes: Arc<Mutex<Vec<String>>>,
}

impl TurnElicitation {
    /// The turn's settings from its policy.
    pub(crate) fn new(
        desk: Option<Arc<ElicitationDesk>>,
        events: mpsc::Sender<ChatEvent>,
        cancel: CancellationToken,
        deadline: Option<Instant>,
        policy: &LoopPolicy,
    ) -> Self {
        TurnElicitation {
            desk,
            events,
            cancel,
            deadline,
            timeout: Duration::from_secs(policy.elicitation_timeout_secs),
            unattended: policy.unattended_elicitation,
            counter: Arc::new(AtomicU64::new(0)),
            unattended_notes: Arc::default(),
        }
    }

    /// The notes about questions answered unattended since the last take, oldest first.
    pub(crate) fn take_notes(&self) -> Vec<String> {
        let mut notes = self
            .unattended_notes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *notes)
    }

    /// The elicitor of call `call_id`.
    pub(crate) fn for_call(&self, call_id: &str) -> Arc<dyn Elicitor> {
        Arc::new(CallElicitor {
            call_id: call_id.to_owned(),
            turn: self.clone(),
        })
    }
}

/// The elicitor of one tool call.
#[derive(Debug)]
struct CallElicitor {
    call_id: String,
    turn: TurnElicitation,
}

/// Closes a request when its wait ends in any way (the call's future dropped too).
struct CloseOnDrop<'a> {
    desk: &'a ElicitationDesk,
    id: &'a str,
}

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.desk.close(self.id);
    }
}

impl CallElicitor {
    /// Nobody to ask: the policy answers at once, and the turn's events and the model's
    /// next note say what was asked and which setting answered.
    async fn unattended(&self, request: ElicitationRequest) -> ElicitationAnswer {
        let turn = &self.turn;
        let (answer, setting) = match turn.unattended {
            UnattendedElicitation::Decline => (ElicitationAnswer::Decline, "decline"),
            UnattendedElicitation::Cancel => (ElicitationAnswer::Cancel, "cancel"),
            UnattendedElicitation::Defaults => (answer_with_defaults(&request.schema), "defaults"),
        };
        let fields: Vec<&str> = form_fields(&request.schema, &request.order)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let what = crate::words::unattended_elicitation(
            &request.server,
            &request.message,
            &fields,
            answer.action(),
            setting,
        );
        let id = format!("elicit_{}", turn.counter.fetch_add(1, Ordering::SeqCst) + 1);
        turn.unattended_notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(crate::words::unattended_elicitation_note(
                &self.call_id,
                &what,
            ));
        let _ = turn
            .events
            .send(ChatEvent::ElicitationResolved {
                id,
                action: answer.action().to_owned(),
                unattended: Some(what),
            })
            .await;
        answer
    }
}

impl Elicitor for CallElicitor {
    fn ask(&self, request: ElicitationRequest) -> BoxFuture<'_, ElicitationAnswer> {
        Box::pin(async move {
            let turn = &self.turn;
            let Some(desk) = &turn.desk else {
                return self.unattended(request).await;
            };
            let id = format!("elicit_{}", turn.counter.fetch_add(1, Ordering::SeqCst) + 1);
            let shown = ChatEvent::ElicitationRequired {
                id: id.clone(),
                call_id: self.call_id.clone(),
                server: request.server,
                message: request.message,
                schema: request.schema.clone(),
                order: request.order,
            };
            let answered = desk.open(&id, shown.clone(), request.schema);
            let _close = CloseOnDrop { desk, id: &id };
            let _ = turn.events.send(shown).await;
            let deadline_passed = crate::deadline::passed(turn.deadline);
            let answer = tokio::select! {
                answer = answered => answer.unwrap_or(ElicitationAnswer::Cancel),
                _ = tokio::time::sleep(turn.timeout) => ElicitationAnswer::Cancel,
                _ = turn.cancel.cancelled() => ElicitationAnswer::Cancel,
                _ = deadline_passed => ElicitationAnswer::Cancel,
            };
            desk.close(&id);
            let _ = turn
                .events
                .send(ChatEvent::ElicitationResolved {
                    id: id.clone(),
                    action: answer.action().to_owned(),
                    unattended: None,
                })
                .await;
            answer
        })
    }
}
