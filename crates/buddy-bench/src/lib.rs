//! buddy-bench: the process benchmarks behind `buddy bench` (load, memory, iteration,
//! gateway, cancel). Each starts real `buddy serve` and `buddy mock-server` processes
//! from the `buddy` binary it is given (or drives the mock from this process) and
//! measures them; the `bench` command prints their reports.

pub mod cache;
pub mod cache_mock;
pub mod cancel;
pub mod gateway;
pub mod gateway_api;
pub mod iteration;
pub mod iteration_workload;
pub mod load;
pub mod memory;
pub mod memory_path;
mod memory_run;
mod memory_setup;
pub mod proc_tree;

/// Why a benchmark could not run to its report, in words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A process, a request or a measurement failed; the message says which and why.
    #[error("{0}")]
    Failed(String),
}

impl BenchError {
    /// A failure from anything that displays.
    pub(crate) fn failed(error: impl std::fmt::Display) -> Self {
        BenchError::Failed(error.to_string())
    }
}
