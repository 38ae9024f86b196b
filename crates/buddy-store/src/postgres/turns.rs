//! Turns on PostgreSQL: an opening, a round, a closing each one statement (see
//! `writes`); a deletion one transaction, as `crate::deletion` plans it.

use super::PgPool;
use buddy_core::{BoxFuture, StopReason, TurnStats};
use sqlx::Row;

use super::PgStore;
use super::owner_bytes::{DELETE_CONVERSATION, FINISH_BY_ID, REMOVE_TURN_MESSAGES};
use super::rows::backend;
use super::writes::{
    APPEND_ROUND, CLOSE_TURN, FINISH_TURN, MessageColumns, OPEN_CONVERSATION, OPEN_TURN,
    with_messages, write,
};
use crate::columns::{new_id, now_ms, runs};
use crate::deletion::{self, Plan, TurnDeletion};
use crate::error::StoreError;
use crate::records::{ResponseOrigin, TurnClosing, TurnOpening};
use crate::store::Turns;

impl Turns for PgStore {
    fn open_turn<'a>(
        &'a self,
        opening: TurnOpening<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let (id, sql) = match opening.conversation {
                Some(id) => (id.to_owned(), OPEN_TURN),
                None => (new_id("conv"), OPEN_CONVERSATION),
            };
            let bind = |columns| {
                let query = with_messages(sql, &id, opening.turn, columns)
                    .bind(opening.model)
                    .bind(&self.inner.instance)
                    .bind(opening.settings.map(serde_json::Value::to_string));
                match opening.conversation {
                    Some(_) => query,
                    None => query.bind(opening.owner),
                }
                .bind(&columns.times)
            };
            let columns = MessageColumns::of(opening.messages, opening.counts, &[])?;
            if opening.copied.is_empty() {
                write(bind(&columns), &self.inner.pool, &id).await?;
                return Ok(id);
            }
            // A branch: the turn, then the copied history with its own turns, then the
            // turn's first messages — one transaction.
            let none = MessageColumns::of(&[], &[], &[])?;
            let mut tx = self.inner.pool.begin().await.map_err(backend)?;
            write(bind(&none), &mut *tx, &id).await?;
            for (turn, run) in runs(opening.copied, opening.copied_turns) {
                let copied = MessageColumns::of(run, &[], &[])?;
                write(
                    with_messages(APPEND_ROUND, &id, turn, &copied).bind(&copied.times),
                    &mut *tx,
                    &id,
                )
                .await?;
            }
            let own = with_messages(APPEND_ROUND, &id, opening.turn, &columns).bind(&columns.times);
            write(own, &mut *tx, &id).await?;
            tx.commit().await.map_err(backend)?;
            Ok(id)
        })
    }

    fn begin_turn<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        model: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO buddy_turns (id, conversation_id, model, instance, started_at_ms) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(turn_id)
            .bind(id)
            .bind(model)
            .bind(&self.inner.instance)
            .bind(now_ms())
            .execute(&self.inner.pool)
            .await
            .map_err(backend)?;
            Ok(())
        })
    }

    fn finish_turn<'a>(
        &'a self,
        turn_id: &'a str,
        reason: StopReason,
        stats: &'a TurnStats,
        error: Option<&'a str>,
        tape: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let stats = serde_json::to_string(stats).unwrap_or_default();
            sqlx::query(FINISH_BY_ID)
                .bind(turn_id)
                .bind(now_ms())
                .bind(reason.as_str())
                .bind(stats)
                .bind(error)
                .bind(tape)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn close_turn<'a>(&'a self, closing: TurnClosing<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let stats = serde_json::to_string(closing.stats).unwrap_or_default();
            if closing.last.messages.is_empty() {
                let query = sqlx::query(FINISH_TURN)
                    .bind(closing.conversation)
                    .bind(now_ms())
                    .bind(closing.turn)
                    .bind(closing.reason.as_str())
                    .bind(stats)
                    .bind(closing.error)
                    .bind(closing.tape);
                query.execute(&self.inner.pool).await.map_err(backend)?;
                return Ok(());
            }
            let last = closing.last;
            let columns = MessageColumns::of(&last.messages, &last.counts, &last.times_ms)?;
            let query = with_messages(CLOSE_TURN, closing.conversation, closing.turn, &columns)
                .bind(closing.reason.as_str())
                .bind(stats)
                .bind(closing.error)
                .bind(closing.tape)
                .bind(&columns.times);
            write(query, &self.inner.pool, closing.conversation).await
        })
    }

    fn claims_of(&self) -> Option<&str> {
        Some(&self.inner.instance)
    }

    fn turn_tapes<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, tape FROM buddy_turns WHERE conversation_id = $1 AND tape IS NOT NULL \
                 ORDER BY started_at_ms, id",
            )
            .bind(id)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(backend)?;
            rows.iter()
                .map(|row| {
                    Ok((
                        row.try_get("id").map_err(backend)?,
                        row.try_get("tape").map_err(backend)?,
                    ))
                })
                .collect()
        })
    }

    fn set_response_origin<'a>(
        &'a self,
        turn: &'a str,
        origin: &'a ResponseOrigin,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let origin = serde_json::to_string(origin).unwrap_or_default();
            let updated = sqlx::query("UPDATE buddy_turns SET response = $2 WHERE id = $1")
                .bind(turn)
                .bind(origin)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            match updated.rows_affected() {
                0 => Err(StoreError::NotFound(turn.to_owned())),
                _ => Ok(()),
            }
        })
    }

    fn delete_turn<'a>(
        &'a self,
        conversation: &'a str,
        turn: &'a str,
    ) -> BoxFuture<'a, Result<TurnDeletion, StoreError>> {
        Box::pin(delete_turn(&self.inner.pool, conversation, turn))
    }
}

/// Deletes turn `turn` of `conversation` (see `Store::delete_turn`). The conversation's
/// turns are read under a row lock on the conversation, so two deletions of one
/// conversation's turns plan one after the other.
async fn delete_turn(
    pool: &PgPool,
    conversation: &str,
    turn: &str,
) -> Result<TurnDeletion, StoreError> {
    let mut tx = pool.begin().await.map_err(backend)?;
    sqlx::query("SELECT id FROM buddy_conversations WHERE id = $1 FOR UPDATE")
        .bind(conversation)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    let turns: Vec<(String, bool)> = sqlx::query_as(
        "SELECT id, hidden FROM buddy_turns WHERE conversation_id = $1 ORDER BY started_at_ms, id",
    )
    .bind(conversation)
    .fetch_all(&mut *tx)
    .await
    .map_err(backend)?;
    let plan = deletion::plan(&turns, turn);
    match &plan {
        Plan::NotFound => {}
        Plan::Hide => {
            sqlx::query("UPDATE buddy_turns SET hidden = true WHERE id = $1")
                .bind(turn)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        Plan::Remove {
            conversation: true, ..
        } => {
            sqlx::query(DELETE_CONVERSATION)
                .bind(conversation)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        Plan::Remove { turns, .. } => {
            sqlx::query(REMOVE_TURN_MESSAGES)
                .bind(conversation)
                .bind(turns)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            sqlx::query("DELETE FROM buddy_turns WHERE id = ANY($1)")
                .bind(turns)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
    }
    tx.commit().await.map_err(backend)?;
    Ok(plan.outcome())
}
