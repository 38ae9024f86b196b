//! Response ids: `resp_` and the hex of the conversation and turn ids, so that a stored
//! response's conversation and turn are found again from its id alone.

/// `resp_` and the hex of the conversation and turn ids: the conversation is found again
/// from `previous_response_id` alone. A response kept nowhere has only the turn's.
pub(crate) fn response_id(conversation: Option<&str>, turn: &str) -> String {
    let turn = turn.trim_start_matches("turn_");
    match conversation {
        Some(conversation) => format!("resp_{}{turn}", conversation.trim_start_matches("conv_")),
        None => format!("resp_{turn}"),
    }
}

/// The stored conversation a response id belongs to.
pub(crate) fn conversation_of(response: &str) -> Option<String> {
    stored_hex(response).map(|hex| format!("conv_{}", &hex[..32]))
}

/// The turn a stored response is, from its id (see [`response_id`]).
pub(crate) fn turn_of(response: &str) -> Option<String> {
    stored_hex(response).map(|hex| format!("turn_{}", &hex[32..]))
}

/// The 64 hex digits of a stored response's id: its conversation's, then its turn's.
fn stored_hex(response: &str) -> Option<&str> {
    let hex = response.strip_prefix("resp_")?;
    (hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit())).then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_response_id_finds_its_conversation_and_turn() {
        let id = response_id(
            Some(&format!("conv_{}", "a".repeat(32))),
            &format!("turn_{}", "b".repeat(32)),
        );
        assert_eq!(
            conversation_of(&id),
            Some(format!("conv_{}", "a".repeat(32)))
        );
        assert_eq!(turn_of(&id), Some(format!("turn_{}", "b".repeat(32))));
        assert_eq!(conversation_of(&response_id(None, "turn_1234")), None);
    }
}
