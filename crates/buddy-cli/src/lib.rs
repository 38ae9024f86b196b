//! The `buddy` command's library half — configuration and the [`runtime`] built once
//! from it (every part a command drives: providers through their kinds' backends, the
//! toolbox, the server's backend, the store, policy, telemetry), doctor's probes and
//! the event printers, kept here so tests drive exactly what the binary runs. The
//! process benchmarks are the `buddy-bench` crate's.

pub mod agent_labels;
pub mod backend;
pub mod config;
pub mod doctor;
pub mod doctor_agents;
pub mod doctor_files;
pub mod exit_code;
pub mod judge_view;
pub mod printer;
pub mod provider_kinds;
pub mod replay_view;
pub mod runtime;
pub mod toolbox;

/// Installs the TLS crypto provider reqwest needs before a client is built.
pub fn install_crypto() {
    buddy_providers::install_crypto_provider();
}
