//! Answers and cancels sent through one instance to a turn another runs: each is written
//! first (an answer as a row, a cancel as a row of its own) and announced with
//! NOTIFY in the same statement; the running instance reads what waits for its turns on
//! the notification, and on a slow poll that catches one it missed.

use super::PgPool;
use sqlx::Row;

use super::rows::backend;
use crate::columns::now_ms;
use crate::error::StoreError;
use crate::relay::{AnswerVerdict, PostedAnswer, Waiting};

/// An answer kept for a running turn of the owner, announced on `$6`; no row when no such
/// turn runs.
const POST_ANSWER: &str = "
WITH running AS (
    SELECT turn_id FROM buddy_running_turns WHERE turn_id = $1 AND ($2::TEXT IS NULL OR owner = $2)
), posted AS (
    INSERT INTO buddy_turn_answers (turn_id, question, answer, posted_at_ms)
    SELECT turn_id, $3, $4, $5 FROM running RETURNING seq, turn_id
)
SELECT posted.seq FROM posted, LATERAL (SELECT pg_notify($6, posted.turn_id)) AS told";

/// A cancel kept for a running turn of the owner (`$4`: now), announced on `$3`; no row
/// when no such turn runs.
pub(super) const ASK_CANCEL: &str = "
WITH asked AS (
    INSERT INTO buddy_turn_cancels (turn_id, asked_at_ms)
    SELECT turn_id, $4 FROM buddy_running_turns WHERE turn_id = $1 AND ($2::TEXT IS NULL OR owner = $2)
    ON CONFLICT (turn_id) DO UPDATE SET asked_at_ms = EXCLUDED.asked_at_ms
    RETURNING turn_id
)
SELECT asked.turn_id FROM asked, LATERAL (SELECT pg_notify($3, asked.turn_id)) AS told";

/// Everything waiting for the turns of instance `$1`: a row per cancelled turn (no
/// answer) and per answer not yet taken.
const WAITING: &str = "
SELECT r.turn_id, c.turn_id IS NOT NULL, a.seq, a.question, a.answer
FROM buddy_running_turns r
LEFT JOIN buddy_turn_cancels c ON c.turn_id = r.turn_id
LEFT JOIN buddy_turn_answers a ON a.turn_id = r.turn_id AND a.verdict IS NULL
WHERE r.instance = $1 AND (c.turn_id IS NOT NULL OR a.seq IS NOT NULL)
ORDER BY a.seq";

pub(super) async fn post_answer(
    pool: &PgPool,
    channel: &str,
    turn_id: &str,
    owner: Option<&str>,
    question: &str,
    answer: &str,
) -> Result<Option<i64>, StoreError> {
    let row = sqlx::query(POST_ANSWER)
        .bind(turn_id)
        .bind(owner)
        .bind(question)
        .bind(answer)
        .bind(now_ms())
        .bind(channel)
        .fetch_optional(pool)
        .await
        .map_err(backend)?;
    row.map(|r| r.try_get(0).map_err(backend)).transpose()
}

/// The verdict on posting `seq`, read and forgotten in one statement.
pub(super) async fn answer_verdict(
    pool: &PgPool,
    seq: i64,
) -> Result<Option<AnswerVerdict>, StoreError> {
    let row = sqlx::query(
        "DELETE FROM buddy_turn_answers WHERE seq = $1 AND verdict IS NOT NULL RETURNING verdict, detail",
    )
    .bind(seq)
    .fetch_optional(pool)
    .await
    .map_err(backend)?;
    let Some(row) = row else { return Ok(None) };
    let word: String = row.try_get(0).map_err(backend)?;
    let detail: Option<String> = row.try_get(1).map_err(backend)?;
    Ok(Some(AnswerVerdict::from_columns(
        &word,
        detail.unwrap_or_default(),
    )))
}

pub(super) async fn waiting(pool: &PgPool, instance: &str) -> Result<Waiting, StoreError> {
    let rows = sqlx::query(WAITING)
        .bind(instance)
        .fetch_all(pool)
        .await
        .map_err(backend)?;
    let mut waiting = Waiting::default();
    for row in rows {
        let turn_id: String = row.try_get(0).map_err(backend)?;
        let cancelled: bool = row.try_get(1).map_err(backend)?;
        if cancelled && !waiting.cancels.contains(&turn_id) {
            waiting.cancels.push(turn_id.clone());
        }
        if let Some(seq) = row.try_get::<Option<i64>, _>(2).map_err(backend)? {
            waiting.answers.push(PostedAnswer {
                seq,
                turn_id,
                question: row.try_get(3).map_err(backend)?,
                answer: row.try_get(4).map_err(backend)?,
            });
        }
    }
    Ok(waiting)
}

pub(super) async fn give_verdict(
    pool: &PgPool,
    seq: i64,
    verdict: &AnswerVerdict,
) -> Result<(), StoreError> {
    let (word, detail) = verdict.to_columns();
    sqlx::query("UPDATE buddy_turn_answers SET verdict = $2, detail = $3 WHERE seq = $1")
        .bind(seq)
        .bind(word)
        .bind(detail)
        .execute(pool)
        .await
        .map_err(backend)?;
    Ok(())
}
