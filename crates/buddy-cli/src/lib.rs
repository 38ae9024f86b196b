//! The `buddy` command's library half: configuration, wiring, the scenario runner and
//! the event printers, kept here so tests drive exactly what the binary runs.

pub mod backend;
pub mod bench_load;
pub mod bench_loops;
pub mod bench_memory;
pub mod config;
pub mod doctor;
pub mod exit_code;
pub mod mock_server;
pub mod printer;
pub mod replay_view;
pub mod scenario_run;
pub mod toolbox;

/// Installs the TLS crypto provider reqwest needs before a client is built.
pub fn install_crypto() {
    buddy_providers::install_crypto_provider();
}

/// The built-in offline scenario `buddy run` and `buddy chat` use without `--scenario`.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../scenarios/offline_assistant.json");

include!(concat!(env!("OUT_DIR"), "/builtin_scenarios.rs"));
