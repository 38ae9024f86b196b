//! JSON written into a buffer of exactly its size: a value carrying megabytes of tool-call
//! arguments then costs its size once, where a growing buffer can hold twice that.
//! Small values (every request of an ordinary turn) are written once into a reused
//! per-thread scratch buffer and copied out; only larger ones are measured first.

use std::cell::RefCell;

use serde::Serialize;

/// Values up to this size are written once; larger ones are counted, then written.
const ONE_PASS_BYTES: usize = 64 * 1024;

thread_local! {
    /// Where small values are written before being copied into a buffer of their size.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A writer that refuses to grow past [`ONE_PASS_BYTES`].
struct Bounded<'a>(&'a mut Vec<u8>);

/// The error that ends a one-pass write; rare, so kept out of the inlined path.
#[cold]
fn too_large() -> std::io::Error {
    std::io::Error::other("larger than the one-pass buffer")
}

// serde_json writes a request in hundreds of small pieces (each quote, key and
// separator) through `write_all`; the trait's default loops over `write` with error
// checks, which cost more than the copying itself.
impl std::io::Write for Bounded<'_> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.0.len() + bytes.len() > ONE_PASS_BYTES {
            return Err(too_large());
        }
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Counts the bytes a serialisation writes.
struct Counter(usize);

impl std::io::Write for Counter {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0 += bytes.len();
        Ok(())
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
    let small = SCRATCH.with(|scratch| {
        let mut scratch = scratch.try_borrow_mut().ok()?;
        scratch.clear();
        scratch.reserve(ONE_PASS_BYTES);
        serde_json::to_writer(Bounded(&mut scratch), value).ok()?;
        let mut out = Vec::with_capacity(scratch.len() + room);
        out.extend_from_slice(&scratch);
        Some(out)
    });
    if let Some(out) = small {
        return Ok(out);
    }
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
        // Past the one-pass size: counted, then written; the same text either way.
        let big = serde_json::json!({"a": "x".repeat(ONE_PASS_BYTES * 2), "b": [1, 2]});
        let exact = json_exact(&big, 5).unwrap();
        assert_eq!(exact, serde_json::to_vec(&big).unwrap());
        assert_eq!(exact.capacity(), exact.len() + 5);
        // A value that fails to serialise is still an error.
        let bad: std::collections::BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
        assert!(json_exact(&bad, 0).is_err());
    }
}
