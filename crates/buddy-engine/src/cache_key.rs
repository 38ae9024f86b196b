//! The prompt-cache key of a conversation: one for every model call of every turn, so a
//! provider that routes by it (OpenAI's `prompt_cache_key`) finds the prefix it cached.

use buddy_core::Message;

/// The key of the conversation that begins with `history` (or, for a new one, with
/// `first_user`): a hash of its system prompt and first user message, which every later
/// turn repeats. A client's own key, when it sends one, is used instead.
pub fn conversation_cache_key(history: &[Message], first_user: Option<&str>) -> String {
    let system = history.iter().find_map(|m| match m {
        Message::System { content } => Some(content.as_str()),
        _ => None,
    });
    let user = history
        .iter()
        .find_map(|m| match m {
            Message::User { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .or(first_user);
    let mut hash = Fnv::default();
    hash.write(system.unwrap_or_default());
    hash.write(user.unwrap_or_default());
    format!("buddy-{:016x}", hash.0)
}

/// FNV-1a, 64 bits: stable across builds and platforms (std's hasher promises neither).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Adds `text` and a separator, so ("ab", "c") and ("a", "bc") differ.
    fn write(&mut self, text: &str) {
        for byte in text.bytes().chain([0xff]) {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_turn_of_a_conversation_has_the_same_key() {
        let first = conversation_cache_key(&[Message::system("be brief")], Some("hi"));
        let later = conversation_cache_key(
            &[
                Message::system("be brief"),
                Message::user("hi"),
                Message::assistant("hello"),
                Message::user("more"),
            ],
            Some("more"),
        );
        assert_eq!(first, later);
        assert!(first.starts_with("buddy-") && first.len() == 22, "{first}");
        let other = conversation_cache_key(&[Message::system("be brief")], Some("hello"));
        assert_ne!(first, other);
        assert_ne!(
            conversation_cache_key(&[Message::system("ab")], Some("c")),
            conversation_cache_key(&[Message::system("a")], Some("bc"))
        );
        // Fixed for all time: a key must not change between buddy's releases.
        assert_eq!(conversation_cache_key(&[], None), "buddy-0a99c907b6f64763");
    }
}
