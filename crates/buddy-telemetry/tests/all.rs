//! Integration tests (test code: unwrap/expect are the assertions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
