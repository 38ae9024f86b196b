//! Answers and cancels for a turn that runs on another instance (several instances on
//! one PostgreSQL). The instance a person reaches writes what they sent to the database
//! and announces it; the instance running the turn takes it on the announcement, or on
//! a slow poll that catches a missed one, and writes back what became of an answer, so
//! the person gets the same status codes wherever they ask: 404 for no such turn or
//! question of theirs, 409 for a question answered already, 400 for content that does
//! not fit its form.

use std::sync::{Arc, Weak};
use std::time::Duration;

use buddy_core::ElicitationAnswer;
use buddy_engine::AnswerError;
use buddy_store::{AnswerVerdict, PostedAnswer};

use crate::error::AppError;
use crate::state::{AppState, Inner};

/// How often an instance running turns looks for what was posted for them, whether or
/// not an announcement came (a notification is lost while its listener reconnects).
const POLL: Duration = Duration::from_secs(2);

/// How long the instance a person reaches waits for the running one's verdict before it
/// answers `202` (the answer is kept, and taken when that instance next looks).
const VERDICT_WAIT: Duration = Duration::from_secs(5);

/// What became of an answer posted through this instance.
#[derive(Debug)]
pub(crate) enum Delivered {
    /// The running instance gave its verdict.
    Verdict(AnswerVerdict),
    /// Kept, not yet taken: the running instance takes it when it next looks.
    Pending,
}

impl AppState {
    /// Posts `answer` to question `question` of turn `turn_id` of `owner` (any owner for
    /// `None`) running on another instance and waits a little for what became of it;
    /// 404 when no such turn runs anywhere.
    pub(crate) async fn answer_elsewhere(
        &self,
        turn_id: &str,
        owner: Option<&str>,
        question: &str,
        answer: &ElicitationAnswer,
    ) -> Result<Delivered, AppError> {
        let coordinator = &self.inner.coordinator;
        let json = serde_json::to_string(answer)
            .map_err(|e| AppError::Internal(format!("the answer is not JSON ({e})")))?;
        let Some(seq) = coordinator
            .post_answer(turn_id, owner, question, &json)
            .await?
        else {
            return Err(not_running(turn_id));
        };
        let waited = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            if let Some(verdict) = coordinator.answer_verdict(seq).await? {
                return Ok(Delivered::Verdict(verdict));
            }
            if waited.elapsed() >= VERDICT_WAIT {
                return Ok(Delivered::Pending);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// Takes what other instances post for this instance's turns: on each announcement,
    /// and every [`POLL`] while turns run here. A coordinator of one process posts
    /// nothing: the task ends at once.
    pub(crate) fn take_postings(&self) {
        let mut announced = self.inner.coordinator.postings();
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(POLL);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    turn = announced.recv() => if turn.is_none() { return },
                    _ = every.tick() => {}
                }
                if !take_waiting(&inner).await {
                    return;
                }
            }
        });
    }
}

/// The 404 of a turn that runs nowhere (or not for this caller).
pub(crate) fn not_running(turn_id: &str) -> AppError {
    AppError::NotFound(format!(
        "no turn `{turn_id}` of yours is running; it may have ended already"
    ))
}

/// Applies what waits for this instance's turns; `false` once the server is gone.
async fn take_waiting(inner: &Weak<Inner>) -> bool {
    let Some(inner) = inner.upgrade() else {
        return false;
    };
    let idle = inner.local.lock().map_or(true, |local| local.is_empty());
    if idle {
        return true;
    }
    let waiting = match inner.coordinator.waiting().await {
        Ok(waiting) => waiting,
        Err(e) => {
            tracing::warn!(error = %e, "answers and cancels posted for this instance's turns not read");
            return true;
        }
    };
    for turn in &waiting.cancels {
        let cancel = inner
            .local
            .lock()
            .ok()
            .and_then(|local| local.get(turn).map(|t| t.cancel.clone()));
        if let Some(cancel) = cancel.filter(|c| !c.is_cancelled()) {
            tracing::info!(%turn, "cancelled at another instance's request");
            cancel.cancel();
        }
    }
    for posted in &waiting.answers {
        let verdict = apply(&inner, posted);
        if let Err(e) = inner.coordinator.give_verdict(posted.seq, &verdict).await {
            tracing::warn!(turn = %posted.turn_id, error = %e, "verdict on a posted answer not written");
        }
    }
    true
}

/// Gives a posted answer to its turn's question, if that turn still runs here.
fn apply(inner: &Inner, posted: &PostedAnswer) -> AnswerVerdict {
    let desk = inner
        .local
        .lock()
        .ok()
        .and_then(|local| local.get(&posted.turn_id).map(|t| Arc::clone(&t.desk)));
    let Some(desk) = desk else {
        return AnswerVerdict::Unknown(not_running(&posted.turn_id).to_string());
    };
    let answer: ElicitationAnswer = match serde_json::from_str(&posted.answer) {
        Ok(answer) => answer,
        Err(e) => return AnswerVerdict::Invalid(format!("the answer is not one ({e})")),
    };
    match desk.answer(&posted.question, answer) {
        Ok(()) => AnswerVerdict::Taken,
        Err(e @ AnswerError::Unknown(_)) => AnswerVerdict::Unknown(e.to_string()),
        Err(e @ AnswerError::Answered(_)) => AnswerVerdict::Answered(e.to_string()),
        Err(e @ AnswerError::Invalid(_)) => AnswerVerdict::Invalid(e.to_string()),
    }
}
