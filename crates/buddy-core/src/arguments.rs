//! A tool call's arguments: the JSON text the model sent, shared. A reply may carry
//! megabytes of arguments; the history, the events, the loop guards and the running
//! call all hold the same text, so cloning a call costs a reference count, not a copy.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The JSON text of a tool call's arguments, cheap to clone.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arguments(Arc<String>);

impl Arguments {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Arguments {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Arguments {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Arguments {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<String> for Arguments {
    /// Takes the text as it is: no copy, however long.
    fn from(text: String) -> Self {
        Arguments(Arc::new(text))
    }
}

impl From<&str> for Arguments {
    fn from(text: &str) -> Self {
        Arguments(Arc::new(text.to_owned()))
    }
}

impl From<&String> for Arguments {
    fn from(text: &String) -> Self {
        Arguments(Arc::new(text.clone()))
    }
}

impl From<&Arguments> for Arguments {
    fn from(arguments: &Arguments) -> Self {
        arguments.clone()
    }
}

impl From<Arguments> for String {
    fn from(arguments: Arguments) -> Self {
        Arc::try_unwrap(arguments.0).unwrap_or_else(|shared| shared.as_ref().clone())
    }
}

impl PartialEq<str> for Arguments {
    fn eq(&self, other: &str) -> bool {
        self.0.as_str() == other
    }
}

impl PartialEq<&str> for Arguments {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_str() == *other
    }
}

impl PartialEq<String> for Arguments {
    fn eq(&self, other: &String) -> bool {
        self.0.as_str() == other.as_str()
    }
}

impl fmt::Debug for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Arguments {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Arguments::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_text_and_the_wire_form_is_a_plain_string() {
        let a = Arguments::from("{\"path\":\"a.txt\"}".to_owned());
        let b = a.clone();
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        let text = String::from("{}");
        let at = text.as_ptr();
        assert_eq!(
            Arguments::from(text).as_ptr(),
            at,
            "a String is taken, not copied"
        );
        assert_eq!(a, "{\"path\":\"a.txt\"}");
        let json = serde_json::to_string(&a).unwrap_or_default();
        assert_eq!(json, r#""{\"path\":\"a.txt\"}""#);
        let back: Arguments = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(back, a);
    }
}
