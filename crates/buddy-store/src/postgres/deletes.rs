//! Deleting one turn on PostgreSQL, in one transaction, as [`crate::deletion`] plans it.

use sqlx::PgPool;

use crate::StoreError;
use crate::deletion::{self, Plan, TurnDeletion};

use super::backend;

/// Deletes turn `turn` of `conversation` (see `Store::delete_turn`). The conversation's
/// turns are read under a row lock on the conversation, so two deletions of one
/// conversation's turns plan one after the other.
pub(super) async fn delete_turn(
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
            sqlx::query("DELETE FROM buddy_conversations WHERE id = $1")
                .bind(conversation)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        Plan::Remove { turns, .. } => {
            sqlx::query(
                "DELETE FROM buddy_messages WHERE conversation_id = $1 AND turn_id = ANY($2)",
            )
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
