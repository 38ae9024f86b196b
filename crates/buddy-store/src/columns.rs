//! Plain helpers both stores share: ids and times, a record's columns and their reading
//! back (a damaged value is reported as corrupt), titles, runs of messages, the room a
//! spend hold takes.

use buddy_core::{Message, TokenCount, Usd};

use crate::error::StoreError;
use crate::records::{TurnEnd, empty_object};

/// A stored turn end, read back; text that names none is reported as corrupt.
pub(crate) fn turn_end(text: Option<String>) -> Result<Option<TurnEnd>, StoreError> {
    text.map(|name| {
        TurnEnd::from_name(&name).ok_or_else(|| {
            StoreError::Corrupt(format!("a turn ended `{name}`, which is no stop reason"))
        })
    })
    .transpose()
}

/// `messages` in runs of consecutive messages of one turn (`turns`, as long): each run
/// is one append.
pub(crate) fn runs<'a>(
    messages: &'a [Message],
    turns: &'a [String],
) -> impl Iterator<Item = (&'a str, &'a [Message])> + 'a {
    let mut start = 0;
    std::iter::from_fn(move || {
        let turn = turns.get(start)?;
        let end = (start..messages.len().min(turns.len()))
            .find(|&i| &turns[i] != turn)
            .unwrap_or(messages.len().min(turns.len()));
        let run = (turn.as_str(), &messages[start..end]);
        start = end;
        Some(run)
    })
}

/// The room under `ceilings` given what was spent in each and what live holds hold,
/// capped at `wanted`: what a new hold holds.
pub(crate) fn room_to_hold(wanted: Option<Usd>, ceilings: &[(Usd, u64)], held: u64) -> u64 {
    let mut room = wanted.map_or(u64::MAX, Usd::nanos);
    for (limit, spent) in ceilings {
        room = room.min(limit.nanos().saturating_sub(spent.saturating_add(held)));
    }
    room
}

/// A stored amount or count read back; a negative one (never written) is zero.
pub(crate) fn nanos(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// The column an amount is stored in (nanodollars; the largest a column holds at most).
pub(crate) fn stored_nanos(amount: Usd) -> i64 {
    i64::try_from(amount.nanos()).unwrap_or(i64::MAX)
}

/// A stored `fork_before`; a negative one (never written) reads as none.
pub(crate) fn fork_before(stored: Option<i64>) -> Option<u64> {
    stored.and_then(|n| u64::try_from(n).ok())
}

/// A new random id with a prefix (`conv_…`, `turn_…`): 128 bits, hex.
pub fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back to time and a counter (unique, not secret).
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes[..8].copy_from_slice(&(nanos as u64).to_le_bytes());
        bytes[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}_{hex}")
}

/// A stored count from its two columns; either missing (or a negative count) is none.
pub(crate) fn stored_count(tokens: Option<i64>, encoding: Option<String>) -> Option<TokenCount> {
    Some(TokenCount {
        tokens: u64::try_from(tokens?).ok()?,
        encoding: encoding?,
    })
}

/// The two columns a message's count is stored in (both null when it has none).
pub(crate) fn count_columns(count: Option<&Option<TokenCount>>) -> (Option<i64>, Option<&str>) {
    match count {
        Some(Some(count)) => (
            i64::try_from(count.tokens).ok(),
            Some(count.encoding.as_str()),
        ),
        _ => (None, None),
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The role column of a stored message.
pub(crate) fn role(message: &Message) -> &'static str {
    match message {
        Message::System { .. } => "system",
        Message::User { .. } => "user",
        Message::Assistant { .. } => "assistant",
        Message::Tool { .. } => "tool",
        Message::Note { .. } => "note",
    }
}

/// A conversation's title from its stored first user message (see [`first_user_title`]).
pub(crate) fn title(first_user: Option<&str>) -> Result<String, StoreError> {
    match first_user {
        Some(body) => Ok(first_user_title(&[decode::<Message>(body)?])),
        None => Ok(String::new()),
    }
}

/// The title a conversation is listed under: its own, else its first user message's; a
/// message that cannot be read marks this conversation rather than failing the list.
pub(crate) fn listed_title(
    named: Option<String>,
    first_user: Result<Option<String>, StoreError>,
) -> String {
    if let Some(named) = named {
        return named;
    }
    match first_user.and_then(|body| title(body.as_deref())) {
        Ok(title) => title,
        Err(_) => UNREADABLE_TITLE.to_owned(),
    }
}

/// The title of a listed conversation whose first message cannot be read.
pub const UNREADABLE_TITLE: &str = "(unreadable: a stored message of this conversation is damaged)";

/// The title of a conversation nobody named: its first user message, shortened.
pub(crate) fn first_user_title(messages: &[Message]) -> String {
    messages
        .iter()
        .find(|m| m.is_user())
        .and_then(Message::text)
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect()
}

/// Stored settings text as JSON: `{}` for none.
pub(crate) fn settings(text: Option<&str>) -> Result<serde_json::Value, StoreError> {
    match text {
        Some(text) => decode(text),
        None => Ok(empty_object()),
    }
}

/// A stored JSON record; one that does not parse is reported as corrupt.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

#[cfg(test)]
mod turn_ends {
    use super::*;
    use buddy_core::StopReason;

    #[test]
    fn turn_ends_read_back_by_name_and_other_text_is_corrupt() {
        assert_eq!(
            turn_end(Some("approval_required".into())).ok(),
            Some(Some(TurnEnd::Stopped(StopReason::ApprovalRequired)))
        );
        assert_eq!(
            turn_end(Some("interrupted".into())).ok(),
            Some(Some(TurnEnd::Interrupted))
        );
        assert_eq!(turn_end(None).ok(), Some(None));
        assert!(matches!(
            turn_end(Some("exploded".into())),
            Err(StoreError::Corrupt(_))
        ));
        assert_eq!(
            serde_json::to_string(&TurnEnd::Interrupted).ok().as_deref(),
            Some("\"interrupted\"")
        );
        assert_eq!(TurnEnd::Interrupted.stop_reason(), None);
    }
}
