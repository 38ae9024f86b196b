//! The PostgreSQL store as the instances' coordinator: claims, cancels, and the turn
//! events every instance can read.

use super::PgPool;
use buddy_core::BoxFuture;
use sqlx::Row;
use tokio::sync::mpsc;

use super::rows::backend;
use super::writes::{MessageColumns, OPEN_CLAIMED, with_messages};
use super::{ANSWERS_CHANNEL, CANCEL_CHANNEL, EVENTS_CHANNEL, PgStore, relay};
use crate::columns::{new_id, now_ms};
use crate::coordinate::{
    Claim, ClaimError, Coordinator, StoredEvent, StoredEvents, open_then_claim,
};
use crate::error::StoreError;
use crate::records::TurnOpening;
use crate::relay::{AnswerVerdict, Waiting};
use crate::store::Store;

/// A claim in one statement: the owner's counter goes up only while under the cap (its
/// row is locked just for this statement), and the running-turn row goes in with it; a
/// conversation already running makes the whole statement fail, counter included.
const CLAIM: &str = "
WITH slot AS (
    INSERT INTO buddy_owner_turns (owner, running) VALUES ($3, 1)
    ON CONFLICT (owner) DO UPDATE SET running = buddy_owner_turns.running + 1
    WHERE buddy_owner_turns.running < $6
    RETURNING running
)
INSERT INTO buddy_running_turns (turn_id, conversation_id, owner, instance, started_at_ms)
SELECT $1, $2, $3, $4, $5 FROM slot
RETURNING turn_id";

/// Postgres's code for a unique-key violation.
const UNIQUE_VIOLATION: &str = "23505";

async fn claim_once(pool: &PgPool, claim: &Claim, instance: &str) -> Result<(), ClaimError> {
    let max = i64::try_from(claim.max_per_owner).unwrap_or(i64::MAX);
    let inserted = sqlx::query(CLAIM)
        .bind(&claim.turn_id)
        .bind(&claim.conversation_id)
        .bind(&claim.owner)
        .bind(instance)
        .bind(now_ms())
        .bind(max)
        .fetch_optional(pool)
        .await;
    match inserted {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(ClaimError::OwnerAtCap {
            max: claim.max_per_owner,
        }),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(UNIQUE_VIOLATION) => {
            let conversation = claim.conversation_id.clone().unwrap_or_default();
            let running =
                sqlx::query("SELECT turn_id FROM buddy_running_turns WHERE conversation_id = $1")
                    .bind(&conversation)
                    .fetch_optional(pool)
                    .await
                    .map_err(backend)?
                    .and_then(|row| row.try_get::<String, _>(0).ok())
                    .unwrap_or_else(|| "another turn".into());
            Err(ClaimError::ConversationBusy {
                conversation,
                running,
            })
        }
        Err(e) => Err(backend(e).into()),
    }
}

impl Coordinator for PgStore {
    fn claim<'a>(&'a self, claim: &'a Claim) -> BoxFuture<'a, Result<(), ClaimError>> {
        Box::pin(claim_once(&self.inner.pool, claim, &self.inner.instance))
    }

    fn open_claimed<'a>(
        &'a self,
        store: &'a dyn Store,
        opening: TurnOpening<'a>,
        claim: &'a Claim,
    ) -> BoxFuture<'a, Result<String, ClaimError>> {
        // One statement where it can: this database keeps `store`'s turns, the opening
        // makes a conversation with no history copied into it, for the claim's owner.
        let one_write = store.claims_of() == Some(self.inner.instance.as_str())
            && opening.conversation.is_none()
            && opening.copied.is_empty()
            && opening.owner == claim.owner
            && opening.turn == claim.turn_id;
        if !one_write {
            return open_then_claim(self, store, opening, claim);
        }
        Box::pin(async move {
            let id = new_id("conv");
            let columns = MessageColumns::of(opening.messages, opening.counts, &[])?;
            let max = i64::try_from(claim.max_per_owner).unwrap_or(i64::MAX);
            let opened = with_messages(OPEN_CLAIMED, &id, &claim.turn_id, &columns)
                .bind(opening.model)
                .bind(&self.inner.instance)
                .bind(opening.settings.map(serde_json::Value::to_string))
                .bind(opening.owner)
                .bind(&columns.times)
                .bind(max)
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(backend)?;
            match opened {
                Some(_) => Ok(id),
                None => Err(ClaimError::OwnerAtCap {
                    max: claim.max_per_owner,
                }),
            }
        })
    }

    fn release<'a>(&'a self, turn_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query(
                "WITH gone AS (DELETE FROM buddy_running_turns WHERE turn_id = $1 RETURNING owner)
                 UPDATE buddy_owner_turns SET running = running - 1 WHERE owner IN (SELECT owner FROM gone)",
            )
                .bind(turn_id)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn running_on<'a>(
        &'a self,
        conversation_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            let row =
                sqlx::query("SELECT turn_id FROM buddy_running_turns WHERE conversation_id = $1")
                    .bind(conversation_id)
                    .fetch_optional(&self.inner.pool)
                    .await
                    .map_err(backend)?;
            row.map(|r| r.try_get(0).map_err(backend)).transpose()
        })
    }

    fn request_cancel<'a>(
        &'a self,
        turn_id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            // Kept and announced in one statement: a running instance that misses the
            // notification finds the cancel on its poll.
            let asked = sqlx::query(relay::ASK_CANCEL)
                .bind(turn_id)
                .bind(owner)
                .bind(CANCEL_CHANNEL)
                .bind(now_ms())
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(asked.is_some())
        })
    }

    fn post_answer<'a>(
        &'a self,
        turn_id: &'a str,
        owner: Option<&'a str>,
        question: &'a str,
        answer: &'a str,
    ) -> BoxFuture<'a, Result<Option<i64>, StoreError>> {
        Box::pin(relay::post_answer(
            &self.inner.pool,
            ANSWERS_CHANNEL,
            turn_id,
            owner,
            question,
            answer,
        ))
    }

    fn answer_verdict(&self, seq: i64) -> BoxFuture<'_, Result<Option<AnswerVerdict>, StoreError>> {
        Box::pin(relay::answer_verdict(&self.inner.pool, seq))
    }

    fn postings(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut postings) = self.inner.postings.lock() {
            *postings = Some(tx);
        }
        rx
    }

    fn waiting(&self) -> BoxFuture<'_, Result<Waiting, StoreError>> {
        Box::pin(relay::waiting(&self.inner.pool, &self.inner.instance))
    }

    fn give_verdict<'a>(
        &'a self,
        seq: i64,
        verdict: &'a AnswerVerdict,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(relay::give_verdict(&self.inner.pool, seq, verdict))
    }

    fn cancellations(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut cancels) = self.inner.cancels.lock() {
            *cancels = Some(tx);
        }
        rx
    }

    fn is_running<'a>(&'a self, turn_id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query("SELECT 1 FROM buddy_running_turns WHERE turn_id = $1")
                .bind(turn_id)
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(row.is_some())
        })
    }

    fn ask_for_events<'a>(&'a self, log_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(EVENTS_CHANNEL)
                .bind(log_id)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn event_requests(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut requests) = self.inner.event_requests.lock() {
            *requests = Some(tx);
        }
        rx
    }

    fn instance(&self) -> Option<&str> {
        Some(&self.inner.instance)
    }

    fn shares_events(&self) -> bool {
        true
    }

    fn append_events<'a>(
        &'a self,
        log_id: &'a str,
        owner: &'a str,
        events: &'a [StoredEvent],
        ended: bool,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let seqs: Vec<i64> = events
                .iter()
                .map(|e| i64::try_from(e.seq).unwrap_or(i64::MAX))
                .collect();
            let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
            let bodies: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
            let now = now_ms();
            sqlx::query(APPEND_EVENTS)
                .bind(log_id)
                .bind(owner)
                .bind(now)
                .bind(ended.then_some(now))
                .bind(&seqs)
                .bind(&names)
                .bind(&bodies)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn events_after<'a>(
        &'a self,
        log_id: &'a str,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Option<StoredEvents>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT l.owner, l.ended_at_ms, e.seq, e.name, e.body FROM buddy_turn_logs l
                 LEFT JOIN LATERAL (SELECT seq, name, body FROM buddy_turn_events
                     WHERE log_id = l.log_id AND seq > $2 ORDER BY seq LIMIT $3) e ON TRUE
                 WHERE l.log_id = $1 ORDER BY e.seq",
            )
            .bind(log_id)
            .bind(i64::try_from(after).unwrap_or(i64::MAX))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(backend)?;
            let Some(first) = rows.first() else {
                return Ok(None);
            };
            let owner: String = first.try_get(0).map_err(backend)?;
            let ended: Option<i64> = first.try_get(1).map_err(backend)?;
            let mut events = Vec::with_capacity(rows.len());
            for row in &rows {
                let Some(seq) = row.try_get::<Option<i64>, _>(2).map_err(backend)? else {
                    continue;
                };
                events.push(StoredEvent {
                    seq: u64::try_from(seq).unwrap_or(0),
                    name: row.try_get(3).map_err(backend)?,
                    data: row.try_get(4).map_err(backend)?,
                });
            }
            Ok(Some(StoredEvents {
                owner,
                ended: ended.is_some(),
                events,
            }))
        })
    }

    fn prune_events(
        &self,
        ended_before_ms: i64,
        abandoned_before_ms: i64,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query(
                "WITH gone AS (DELETE FROM buddy_turn_logs
                     WHERE ended_at_ms < $1 OR (ended_at_ms IS NULL AND started_at_ms < $2)
                     RETURNING log_id),
                 events AS (DELETE FROM buddy_turn_events WHERE log_id IN (SELECT log_id FROM gone)),
                 answers AS (DELETE FROM buddy_turn_answers WHERE posted_at_ms < $2),
                 cancels AS (DELETE FROM buddy_turn_cancels WHERE asked_at_ms < $2)
                 SELECT COUNT(*) FROM gone",
            )
            .bind(ended_before_ms)
            .bind(abandoned_before_ms)
            .fetch_one(&self.inner.pool)
            .await
            .map_err(backend)?;
            let count: i64 = row.try_get(0).map_err(backend)?;
            Ok(u64::try_from(count).unwrap_or(0))
        })
    }
}

/// A batch of a log's events in one statement: the log's row goes in with the first
/// batch (and is marked ended with the last), the events with every batch.
const APPEND_EVENTS: &str = "
WITH log AS (
    INSERT INTO buddy_turn_logs (log_id, owner, started_at_ms, ended_at_ms) VALUES ($1, $2, $3, $4)
    ON CONFLICT (log_id) DO UPDATE SET ended_at_ms = COALESCE(EXCLUDED.ended_at_ms, buddy_turn_logs.ended_at_ms)
)
INSERT INTO buddy_turn_events (log_id, seq, name, body)
SELECT $1, * FROM UNNEST($5::BIGINT[], $6::TEXT[], $7::TEXT[])
ON CONFLICT (log_id, seq) DO NOTHING";
