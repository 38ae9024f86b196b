//! The session a client's request belongs to, as the agents people run name it:
//! Claude Code's `x-claude-code-session-id` header (or, in older versions, the session
//! in `metadata.user_id`), codex's `session-id` / `session_id`, or a generic
//! `x-session-id`. A request of a named session is kept in the session's conversation
//! (`turn::Conversation::Session`, placed by `turn::client_conversation`); one without a name is not kept.

use axum::http::HeaderMap;
use buddy_core::Message;

/// The headers a session id is read from, in order of preference.
const SESSION_HEADERS: [&str; 4] = [
    "x-claude-code-session-id",
    "session-id",
    "session_id",
    "x-session-id",
];

/// Longest session id taken; a longer (or oddly spelled) one names no session.
const MAX_SESSION_CHARS: usize = 128;

/// The client's session id: from its headers, else from Anthropic's `metadata.user_id`
/// (`{"session_id": …}` as JSON text, or `…_session_<id>`).
pub(crate) fn session_id(headers: &HeaderMap, user_id: Option<&str>) -> Option<String> {
    let from_header = SESSION_HEADERS
        .iter()
        .filter_map(|name| headers.get(*name)?.to_str().ok())
        .find_map(checked);
    from_header.or_else(|| user_id.and_then(from_user_id))
}

/// The key a session's conversation is kept under: the session id and a digest of the
/// history's first user message, so the threads a client runs in one session (Claude
/// Code's sub-agents, its title requests) each keep a conversation of their own.
pub(crate) fn thread_key(session: &str, history: &[Message]) -> String {
    let first = history
        .iter()
        .find(|m| m.is_user())
        .and_then(Message::text)
        .unwrap_or("");
    let digest = ring::digest::digest(&ring::digest::SHA256, first.as_bytes());
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{session}#{hex}")
}

fn from_user_id(user_id: &str) -> Option<String> {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(user_id) {
        return value["session_id"].as_str().and_then(checked);
    }
    user_id
        .rsplit_once("_session_")
        .and_then(|(_, id)| checked(id))
}

/// `id` when it is a plausible session id: 1 to 128 characters of letters, digits and
/// `-_.:`.
fn checked(id: &str) -> Option<String> {
    let id = id.trim();
    let plausible = !id.is_empty()
        && id.len() <= MAX_SESSION_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    plausible.then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn claude_codes_header_comes_first_then_codexs_then_metadata() {
        let both = headers(&[
            ("session-id", "codex-1"),
            ("x-claude-code-session-id", "5b1e0c2a-7f"),
        ]);
        assert_eq!(session_id(&both, None).as_deref(), Some("5b1e0c2a-7f"));
        let codex = headers(&[("session_id", "0199a1b2")]);
        assert_eq!(session_id(&codex, None).as_deref(), Some("0199a1b2"));
        let json = r#"{"device_id":"d","account_uuid":"","session_id":"54c1eb09-bc4c"}"#;
        assert_eq!(
            session_id(&HeaderMap::new(), Some(json)).as_deref(),
            Some("54c1eb09-bc4c")
        );
        let legacy = "user_abc_account_42_session_57a121ec-f78c";
        assert_eq!(
            session_id(&HeaderMap::new(), Some(legacy)).as_deref(),
            Some("57a121ec-f78c")
        );
        assert_eq!(session_id(&HeaderMap::new(), Some("user-7")), None);
    }

    #[test]
    fn odd_or_long_ids_name_no_session() {
        assert_eq!(session_id(&headers(&[("x-session-id", "a b")]), None), None);
        assert_eq!(
            session_id(&headers(&[("x-session-id", "../x/y")]), None),
            None
        );
        let long = "a".repeat(129);
        assert_eq!(checked(&long), None);
        assert_eq!(checked(&long[..128]).map(|s| s.len()), Some(128));
    }

    #[test]
    fn threads_of_one_session_have_keys_of_their_own() {
        let main = [Message::system("sys"), Message::user("fix the build")];
        let child = [Message::user("search for the failing test")];
        let again = [Message::user("fix the build"), Message::assistant("ok")];
        assert_eq!(thread_key("s1", &main), thread_key("s1", &again));
        assert_ne!(thread_key("s1", &main), thread_key("s1", &child));
        assert_ne!(thread_key("s1", &main), thread_key("s2", &main));
        assert!(thread_key("s1", &main).starts_with("s1#"));
    }
}
