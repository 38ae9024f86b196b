//! Turns on SQLite: each write of a turn one transaction.

use buddy_core::{BoxFuture, StopReason, TurnStats};
use rusqlite::params;

use super::history::{append_in, insert_messages};
use super::{SqliteStore, backend};
use crate::columns::{new_id, now_ms, runs};
use crate::deletion::{self, Plan, TurnDeletion};
use crate::error::StoreError;
use crate::records::{ResponseOrigin, TurnClosing, TurnOpening};
use crate::store::Turns;

/// Records how turn `?1` ended: at `?2`, stop reason, stats, error and tape.
const FINISH_TURN: &str = "UPDATE turns SET finished_at_ms = ?2, stop_reason = ?3, stats = ?4, error = ?5, tape = ?6 WHERE id = ?1";

impl Turns for SqliteStore {
    fn open_turn<'a>(
        &'a self,
        opening: TurnOpening<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        let id = opening.conversation.map(str::to_owned);
        let owner = opening.owner.to_owned();
        let (turn_id, model) = (opening.turn.to_owned(), opening.model.to_owned());
        let settings = opening.settings.map(serde_json::Value::to_string);
        let messages = opening.messages.to_vec();
        let counts = opening.counts.to_vec();
        let copied = opening.copied.to_vec();
        let copied_turns = opening.copied_turns.to_vec();
        self.run(move |conn| {
            let now = now_ms();
            let tx = conn.transaction().map_err(backend)?;
            let id = match id {
                Some(id) => {
                    let updated = tx
                        .execute(
                            "UPDATE conversations SET updated_at_ms = ?2, settings = COALESCE(?3, settings) WHERE id = ?1",
                            params![id, now, settings],
                        )
                        .map_err(backend)?;
                    if updated == 0 {
                        return Err(StoreError::NotFound(id));
                    }
                    id
                }
                None => {
                    let id = new_id("conv");
                    tx.execute(
                        "INSERT INTO conversations (id, created_at_ms, updated_at_ms, owner, settings) VALUES (?1, ?2, ?2, ?3, ?4)",
                        params![id, now, owner, settings],
                    )
                    .map_err(backend)?;
                    id
                }
            };
            tx.execute(
                "INSERT INTO turns (id, conversation_id, model, started_at_ms) VALUES (?1, ?2, ?3, ?4)",
                params![turn_id, id, model, now],
            )
            .map_err(backend)?;
            for (turn, run) in runs(&copied, &copied_turns) {
                insert_messages(&tx, &id, turn, run, &[], &[], now)?;
            }
            insert_messages(&tx, &id, &turn_id, &messages, &counts, &[], now)?;
            tx.commit().map_err(backend)?;
            Ok(id)
        })
    }

    fn begin_turn<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        model: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (id, turn_id, model) = (id.to_owned(), turn_id.to_owned(), model.to_owned());
        self.run(move |conn| {
            conn.execute(
                "INSERT INTO turns (id, conversation_id, model, started_at_ms) VALUES (?1, ?2, ?3, ?4)",
                params![turn_id, id, model, now_ms()],
            )
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
        let turn_id = turn_id.to_owned();
        let stats = serde_json::to_string(stats).unwrap_or_default();
        let error = error.map(str::to_owned);
        let tape = tape.map(str::to_owned);
        self.run(move |conn| {
            conn.execute(
                FINISH_TURN,
                params![turn_id, now_ms(), reason.as_str(), stats, error, tape],
            )
            .map_err(backend)?;
            Ok(())
        })
    }

    fn close_turn<'a>(&'a self, closing: TurnClosing<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        let (id, turn_id) = (closing.conversation.to_owned(), closing.turn.to_owned());
        let last = closing.last.clone();
        let reason = closing.reason.as_str();
        let stats = serde_json::to_string(closing.stats).unwrap_or_default();
        let error = closing.error.map(str::to_owned);
        let tape = closing.tape.map(str::to_owned);
        self.run(move |conn| {
            let now = now_ms();
            let tx = conn.transaction().map_err(backend)?;
            if !last.messages.is_empty() {
                append_in(
                    &tx,
                    &id,
                    &turn_id,
                    &last.messages,
                    &last.counts,
                    &last.times_ms,
                    now,
                )?;
            }
            tx.execute(
                FINISH_TURN,
                params![turn_id, now, reason, stats, error, tape],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)
        })
    }

    fn turn_tapes<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        let id = id.to_owned();
        self.run(move |conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT id, tape FROM turns WHERE conversation_id = ?1 AND tape IS NOT NULL \
                     ORDER BY started_at_ms, rowid",
                )
                .map_err(backend)?;
            let rows = statement
                .query_map(params![id], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(backend)?;
            rows.collect::<Result<Vec<(String, String)>, _>>()
                .map_err(backend)
        })
    }

    fn set_response_origin<'a>(
        &'a self,
        turn: &'a str,
        origin: &'a ResponseOrigin,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let turn = turn.to_owned();
        let origin = serde_json::to_string(origin).unwrap_or_default();
        self.run(move |conn| {
            let updated = conn
                .execute(
                    "UPDATE turns SET response = ?2 WHERE id = ?1",
                    params![turn, origin],
                )
                .map_err(backend)?;
            match updated {
                0 => Err(StoreError::NotFound(turn)),
                _ => Ok(()),
            }
        })
    }

    fn delete_turn<'a>(
        &'a self,
        conversation: &'a str,
        turn: &'a str,
    ) -> BoxFuture<'a, Result<TurnDeletion, StoreError>> {
        let (conversation, turn) = (conversation.to_owned(), turn.to_owned());
        self.run(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            let turns = {
                let mut stmt = tx
                    .prepare(
                        "SELECT id, hidden FROM turns WHERE conversation_id = ?1
                         ORDER BY started_at_ms, rowid",
                    )
                    .map_err(backend)?;
                stmt.query_map(params![conversation], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(backend)?
                    .collect::<Result<Vec<(String, bool)>, _>>()
                    .map_err(backend)?
            };
            let plan = deletion::plan(&turns, &turn);
            match &plan {
                Plan::NotFound => {}
                Plan::Hide => {
                    tx.execute("UPDATE turns SET hidden = 1 WHERE id = ?1", params![turn])
                        .map_err(backend)?;
                }
                Plan::Remove {
                    conversation: true, ..
                } => {
                    tx.execute(
                        "DELETE FROM conversations WHERE id = ?1",
                        params![conversation],
                    )
                    .map_err(backend)?;
                }
                Plan::Remove { turns, .. } => {
                    for id in turns {
                        tx.execute(
                            "DELETE FROM messages WHERE conversation_id = ?1 AND turn_id = ?2",
                            params![conversation, id],
                        )
                        .map_err(backend)?;
                        tx.execute("DELETE FROM turns WHERE id = ?1", params![id])
                            .map_err(backend)?;
                    }
                }
            }
            tx.commit().map_err(backend)?;
            Ok(plan.outcome())
        })
    }
}
