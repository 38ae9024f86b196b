//! JSON written into a buffer of exactly its size: a value carrying megabytes of tool-call
//! arguments then costs its size once, where a growing buffer can hold twice that.

use serde::Serialize;

/// Counts the bytes a serialisation writes.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `value`'s compact JSON text, counted without writing it.
pub fn json_len(value: &impl Serialize) -> Result<usize, serde_json::Error> {
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value)?;
    Ok(counter.0)
}

/// `value`'s compact JSON text in a buffer of exactly its length, after `room` bytes of
/// spare capacity the caller fills around it (a frame's head and tail).
pub fn json_exact(value: &impl Serialize, room: usize) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(json_len(value)? + room);
    serde_json::to_writer(&mut out, value)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_usual_json_in_a_buffer_of_its_length() {
        let value = serde_json::json!({"q": "é\n\"quoted\"", "n": [1, 2.5, null]});
        let exact = json_exact(&value, 0).unwrap();
        assert_eq!(exact, serde_json::to_vec(&value).unwrap());
        assert_eq!(exact.capacity(), exact.len());
        assert_eq!(json_len(&value).unwrap(), exact.len());
    }
}
