//! The process benchmarks behind `buddy bench`: each starts real `buddy serve` and
//! `buddy mock-server` processes (or drives the mock from this one) and measures them.
//! Modules of the `buddy` binary, not of the library; the `bench` command prints their
//! reports.

pub mod cache;
pub mod cache_mock;
pub mod cancel;
pub mod gateway;
pub mod iteration;
pub mod iteration_workload;
pub mod load;
pub mod memory;
