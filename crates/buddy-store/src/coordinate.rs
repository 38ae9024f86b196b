//! Who may run a turn now: one turn at a time per conversation, a cap of turns per key,
//! and cancelling a turn wherever it runs. One process keeps this in memory
//! ([`LocalCoordinator`]); several processes on one PostgreSQL share it through the
//! database (`PgStore`).

use std::collections::HashMap;
use std::sync::Mutex;

use buddy_core::BoxFuture;
use tokio::sync::mpsc;

use crate::error::StoreError;
use crate::records::TurnOpening;
use crate::relay::{AnswerVerdict, Waiting};
use crate::store::Store;

/// A turn asking to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub turn_id: String,
    /// The stored conversation it runs on; `None` for a turn kept only in its request.
    pub conversation_id: Option<String>,
    /// The key identity it runs for.
    pub owner: String,
    /// Turns `owner` may run at once, over every instance.
    pub max_per_owner: usize,
}

/// Why a turn may not start.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClaimError {
    #[error("conversation `{conversation}` already has a turn running ({running})")]
    ConversationBusy {
        conversation: String,
        running: String,
    },
    #[error("this key already runs {max} turns at once")]
    OwnerAtCap { max: usize },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Shared bookkeeping of running turns.
pub trait Coordinator: Send + Sync {
    /// Records a turn as running, or says why it may not run.
    fn claim<'a>(&'a self, claim: &'a Claim) -> BoxFuture<'a, Result<(), ClaimError>>;
    /// Writes a turn's opening on a new conversation in `store` (see [`Turns::open_turn`](crate::store::Turns::open_turn);
    /// `opening.conversation` is `None`) and claims the turn on it (`claim`, its
    /// conversation left out): the new conversation's id, or why the turn may not run —
    /// then nothing of it is kept. A coordinator that keeps its claims in `store`'s
    /// database ([`Turns::claims_of`](crate::store::Turns::claims_of)) does both in one write; this default is
    /// [`open_then_claim`].
    fn open_claimed<'a>(
        &'a self,
        store: &'a dyn Store,
        opening: TurnOpening<'a>,
        claim: &'a Claim,
    ) -> BoxFuture<'a, Result<String, ClaimError>> {
        open_then_claim(self, store, opening, claim)
    }
    /// Records that a turn is over (its conversation may be claimed again at once).
    fn release<'a>(&'a self, turn_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The turn running on a conversation, on any instance.
    fn running_on<'a>(
        &'a self,
        conversation_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>>;
    /// Asks whichever instance runs `turn_id` to cancel it, if it runs for `owner` (any
    /// owner for `None`); `false` when no such turn runs anywhere.
    fn request_cancel<'a>(
        &'a self,
        turn_id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Cancel requests sent by other instances, as turn ids. Called once, by the server.
    fn cancellations(&self) -> mpsc::UnboundedReceiver<String>;
    /// Whether `turn_id` runs now, on any instance.
    fn is_running<'a>(&'a self, turn_id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Posts a person's answer (`answer`, its JSON) to question `question` of turn
    /// `turn_id` running for `owner` (any owner for `None`) on another instance, and
    /// tells that instance: the posting's number, to read its verdict by
    /// ([`Coordinator::answer_verdict`]), or `None` when no such turn runs anywhere. Kept
    /// until taken, so a missed notification is caught by the running instance's poll.
    fn post_answer<'a>(
        &'a self,
        _turn_id: &'a str,
        _owner: Option<&'a str>,
        _question: &'a str,
        _answer: &'a str,
    ) -> BoxFuture<'a, Result<Option<i64>, StoreError>> {
        Box::pin(async { Ok(None) })
    }
    /// The verdict on posting `seq`, once the running instance gave it (then forgotten);
    /// `None` while it waits.
    fn answer_verdict(
        &self,
        _seq: i64,
    ) -> BoxFuture<'_, Result<Option<AnswerVerdict>, StoreError>> {
        Box::pin(async { Ok(None) })
    }
    /// Turns of this instance with something posted for them (answers, cancels), as
    /// turn ids. Called once, by the server; a coordinator of one process closes it.
    fn postings(&self) -> mpsc::UnboundedReceiver<String> {
        mpsc::unbounded_channel().1
    }
    /// What waits for the turns this instance runs: cancels asked and answers posted.
    fn waiting(&self) -> BoxFuture<'_, Result<Waiting, StoreError>> {
        Box::pin(async { Ok(Waiting::default()) })
    }
    /// Records what became of posting `seq` (read once by [`Coordinator::answer_verdict`]).
    fn give_verdict<'a>(
        &'a self,
        _seq: i64,
        _verdict: &'a AnswerVerdict,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }
    /// This instance's id among those sharing the coordinator's database, `None` for a
    /// coordinator of one process (see [`Turns::claims_of`](crate::store::Turns::claims_of)).
    fn instance(&self) -> Option<&str> {
        None
    }
    /// Whether turns' events are kept where every instance reads them, so that a client
    /// may reattach to a turn through any instance. One process keeps them in memory.
    fn shares_events(&self) -> bool {
        false
    }
    /// Asks the instances to copy log `log_id` where every instance reads it: the one
    /// that keeps it in memory does (events are copied only when a client elsewhere wants
    /// them, not for every turn). A coordinator of one process has nothing to ask.
    fn ask_for_events<'a>(&'a self, _log_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }
    /// Logs another instance asked this one to copy ([`Coordinator::ask_for_events`]),
    /// as log ids. Called once, by the server; a coordinator of one process closes it.
    fn event_requests(&self) -> mpsc::UnboundedReceiver<String> {
        mpsc::unbounded_channel().1
    }
    /// Appends events to log `log_id` (a turn's or a response's) of `owner`; `ended`
    /// marks the log complete.
    fn append_events<'a>(
        &'a self,
        _log_id: &'a str,
        _owner: &'a str,
        _events: &'a [StoredEvent],
        _ended: bool,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }
    /// The events of log `log_id` numbered above `after` (at most `limit`), or `None`
    /// when no such log is kept.
    fn events_after<'a>(
        &'a self,
        _log_id: &'a str,
        _after: u64,
        _limit: usize,
    ) -> BoxFuture<'a, Result<Option<StoredEvents>, StoreError>> {
        Box::pin(async { Ok(None) })
    }
    /// Forgets the logs that ended before `ended_before_ms` (and those never ended that
    /// began before `abandoned_before_ms`: their instance died); returns how many.
    fn prune_events(
        &self,
        _ended_before_ms: i64,
        _abandoned_before_ms: i64,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async { Ok(0) })
    }
}

/// [`Coordinator::open_claimed`] in two writes: the opening, then the claim on the
/// conversation it made; a refused claim deletes that conversation again.
pub fn open_then_claim<'a, C: Coordinator + ?Sized>(
    coordinator: &'a C,
    store: &'a dyn Store,
    opening: TurnOpening<'a>,
    claim: &'a Claim,
) -> BoxFuture<'a, Result<String, ClaimError>> {
    Box::pin(async move {
        let id = store.open_turn(opening).await?;
        let claim = Claim {
            conversation_id: Some(id.clone()),
            ..claim.clone()
        };
        match coordinator.claim(&claim).await {
            Ok(()) => Ok(id),
            Err(e) => {
                let _ = store.delete_conversation(&id).await;
                Err(e)
            }
        }
    })
}

/// One event of a turn's log, as kept for other instances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its number in the log, from 1.
    pub seq: u64,
    /// The SSE event name.
    pub name: String,
    /// Its JSON.
    pub data: String,
}

/// A slice of a kept log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvents {
    /// The key identity whose turn it is.
    pub owner: String,
    /// Whether the log is complete (its last event is terminal).
    pub ended: bool,
    pub events: Vec<StoredEvent>,
}

/// The coordinator of a single process: every turn is local, so cancels never need to
/// travel. Indexed both ways, so a claim costs the same with 10,000 turns running.
#[derive(Default)]
pub struct LocalCoordinator {
    running: Mutex<Running>,
    /// Kept so the cancellation channel stays open (and silent).
    silent: Mutex<Vec<mpsc::UnboundedSender<String>>>,
}

#[derive(Default)]
struct Running {
    /// turn id → (conversation, owner)
    turns: HashMap<String, (Option<String>, String)>,
    /// conversation → its running turn
    by_conversation: HashMap<String, String>,
    /// owner → turns running
    per_owner: HashMap<String, usize>,
}

fn poisoned() -> StoreError {
    StoreError::Backend("the turn registry is poisoned".into())
}

impl Coordinator for LocalCoordinator {
    fn claim<'a>(&'a self, claim: &'a Claim) -> BoxFuture<'a, Result<(), ClaimError>> {
        Box::pin(async move {
            let mut running = self.running.lock().map_err(|_| poisoned())?;
            if let Some(conversation) = &claim.conversation_id
                && let Some(turn) = running.by_conversation.get(conversation)
            {
                return Err(ClaimError::ConversationBusy {
                    conversation: conversation.clone(),
                    running: turn.clone(),
                });
            }
            let owned = running.per_owner.get(&claim.owner).copied().unwrap_or(0);
            if owned >= claim.max_per_owner {
                return Err(ClaimError::OwnerAtCap {
                    max: claim.max_per_owner,
                });
            }
            *running.per_owner.entry(claim.owner.clone()).or_default() += 1;
            if let Some(conversation) = &claim.conversation_id {
                running
                    .by_conversation
                    .insert(conversation.clone(), claim.turn_id.clone());
            }
            running.turns.insert(
                claim.turn_id.clone(),
                (claim.conversation_id.clone(), claim.owner.clone()),
            );
            Ok(())
        })
    }

    fn release<'a>(&'a self, turn_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut running = self.running.lock().map_err(|_| poisoned())?;
            if let Some((conversation, owner)) = running.turns.remove(turn_id) {
                if let Some(conversation) = conversation {
                    running.by_conversation.remove(&conversation);
                }
                if let Some(n) = running.per_owner.get_mut(&owner) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        running.per_owner.remove(&owner);
                    }
                }
            }
            Ok(())
        })
    }

    fn running_on<'a>(
        &'a self,
        conversation_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            Ok(self
                .running
                .lock()
                .map_err(|_| poisoned())?
                .by_conversation
                .get(conversation_id)
                .cloned())
        })
    }

    fn request_cancel<'a>(
        &'a self,
        _turn_id: &'a str,
        _owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        // Every turn of this process is cancelled by the server directly.
        Box::pin(async { Ok(false) })
    }

    fn is_running<'a>(&'a self, turn_id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            Ok(self
                .running
                .lock()
                .map_err(|_| poisoned())?
                .turns
                .contains_key(turn_id))
        })
    }

    fn cancellations(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut silent) = self.silent.lock() {
            silent.push(tx);
        }
        rx
    }
}
