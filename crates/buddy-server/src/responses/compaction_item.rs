//! The `compaction` item of `/v1/responses/compact`: its opaque `encrypted_content`
//! (base64url of a small JSON document only buddy reads; not encrypted, and carrying
//! nothing the client may not see), and the message it stands for when sent back.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use buddy_core::Message;
use serde::{Deserialize, Serialize};

/// What a `compaction` item holds, before encoding.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Compacted {
    /// The format's version.
    buddy_compaction: u32,
    summary: String,
}

/// A `compaction` item's `encrypted_content` for `summary`.
pub(crate) fn encode(summary: &str) -> String {
    let doc = Compacted {
        buddy_compaction: 1,
        summary: summary.to_owned(),
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&doc).unwrap_or_default())
}

/// The message a `compaction` item stands for, or what is wrong with it.
pub(crate) fn decode(encrypted_content: &str) -> Result<Message, String> {
    let bytes = URL_SAFE_NO_PAD
        .decode(encrypted_content.trim())
        .map_err(|_| {
            "it was not made by buddy's /v1/responses/compact (not base64url)".to_owned()
        })?;
    let doc: Compacted = serde_json::from_slice(&bytes)
        .map_err(|_| "it was not made by buddy's /v1/responses/compact".to_owned())?;
    if doc.buddy_compaction != 1 {
        return Err(format!(
            "its format version {} is newer than this buddy reads (1)",
            doc.buddy_compaction
        ));
    }
    Ok(Message::system(format!(
        "Summary of the conversation before this point (compacted):\n{}",
        doc.summary
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_goes_into_an_item_and_comes_back_as_a_system_message() {
        let item = encode("The launch is on Tuesday; support is told first.");
        assert!(!item.contains(' '), "opaque: {item}");
        let Message::System { content } = decode(&item).unwrap() else {
            panic!("a system message")
        };
        assert!(content.ends_with("The launch is on Tuesday; support is told first."));
        assert!(decode("not base64!").unwrap_err().contains("not base64url"));
        let other = URL_SAFE_NO_PAD.encode(br#"{"buddy_compaction":2,"summary":"x"}"#);
        assert!(decode(&other).unwrap_err().contains("version 2"));
    }
}
