//! API keys as the server holds them: a key is known by the SHA-256 of its text. The
//! server keeps only that hash, stores it as the owner of the conversations the key
//! creates, and counts quotas and metrics by it (or by the name the operator gave it).

use super::SpendCeiling;

/// One accepted API key, as the server holds it: a name, the key's hash, admin or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    /// Shown in logs and metrics; `key-` and the start of the hash when unnamed.
    pub name: String,
    hash: [u8; 32],
    /// An admin key may list, read and delete every conversation.
    pub admin: bool,
    /// What this key's turns may cost per day and month (unset: the server's default).
    pub spend: Option<SpendCeiling>,
}

/// A configured key hash that is not 64 hex digits.
#[derive(Debug, thiserror::Error)]
#[error("key `{name}`: key_sha256 must be 64 hex digits (the SHA-256 of the key)")]
pub struct BadKeyHash {
    pub name: String,
}

impl ApiKey {
    /// A key given as its text (from the environment or the command line).
    pub fn new(key: &str, name: Option<&str>, admin: bool) -> Self {
        let hash = sha256(key.trim().as_bytes());
        ApiKey {
            name: name.map_or_else(|| format!("key-{}", &hex(&hash)[..8]), str::to_owned),
            hash,
            admin,
            spend: None,
        }
    }

    /// The same key with its own spend ceiling.
    pub fn with_spend(mut self, spend: SpendCeiling) -> Self {
        self.spend = (!spend.is_none()).then_some(spend);
        self
    }

    /// A key given only as the hex SHA-256 of its text (so buddy.toml holds no secret).
    pub fn from_sha256(hex_hash: &str, name: &str, admin: bool) -> Result<Self, BadKeyHash> {
        let bad = || BadKeyHash {
            name: name.to_owned(),
        };
        let text = hex_hash.trim();
        if text.len() != 64 {
            return Err(bad());
        }
        let mut hash = [0u8; 32];
        for (i, byte) in hash.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(ApiKey {
            name: name.to_owned(),
            hash,
            admin,
            spend: None,
        })
    }

    /// The identity conversations and quotas are kept under: the key's hash in hex.
    pub fn owner(&self) -> String {
        hex(&self.hash)
    }
}

/// The configured key that `Authorization: Bearer <key>` (or `x-api-key`) names, if any. Every key is
/// compared (in constant time), so timing tells nothing about which.
pub(crate) fn key_for<'k>(
    headers: &axum::http::HeaderMap,
    keys: &'k [ApiKey],
) -> Option<&'k ApiKey> {
    // Anthropic's clients send the key as `x-api-key`.
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)?;
    let hash = sha256(given.as_bytes());
    keys.iter()
        .fold(None, |found, k| match constant_time_eq(&k.hash, &hash) {
            true => Some(k),
            false => found,
        })
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_known_by_its_hash_and_never_by_a_prefix() {
        let a = ApiKey::new("sk-live-AAAAAAAA", None, false);
        let b = ApiKey::new("sk-live-BBBBBBBB", None, false);
        assert_ne!(a.owner(), b.owner());
        assert_ne!(a.name, b.name);
        assert!(!a.name.contains("sk-live"), "{}", a.name);
        // echo -n abc | sha256sum
        let abc = ApiKey::new("abc", Some("ops"), true);
        assert_eq!(
            abc.owner(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let same = ApiKey::from_sha256(&abc.owner(), "ops", true).unwrap();
        assert_eq!(same, abc);
        assert!(ApiKey::from_sha256("abc", "x", false).is_err());
        assert!(ApiKey::from_sha256(&"zz".repeat(32), "x", false).is_err());
    }
}
