//! The process benchmarks behind `buddy bench`: each starts real `buddy serve` and
//! `buddy mock-server` processes (or drives the mock from this one) and measures them.
//! Kept apart from the library's product modules; the `bench` command prints their
//! reports.

pub mod gateway;
pub mod iteration;
pub mod load;
pub mod memory;
