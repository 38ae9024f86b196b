//! buddy-cli integration tests: every scenario end to end, event snapshots, and the
//! real `buddy` binary.

mod anthropic_sdk;
mod approvals;
mod binary;
mod config;
mod crash;
mod crash_task;
mod doc_links;
mod doctor;
mod elicit_forms;
mod instances_killed;
mod judge;
mod lockout;
mod mcp;
mod mcp_health;
mod mcp_login;
mod mcp_messages;
mod mcp_tasks;
mod mcp_tolerant;
mod mock;
mod person_messages;
mod private_files;
mod providers;
mod readme;
mod real_claude;
mod real_codex;
mod replay;
mod scenarios;
mod secrets;
mod server;
mod sessions;
mod snapshots;
mod subagents;

use std::path::PathBuf;

use buddy_scripted::Scenario;
use buddy_scripted::library::scenario_files;
use buddy_scripted::run::{ScenarioReport, run_scenario};
use buddy_skills::Sandbox;

/// The repository's `scenarios/` directory.
/// `buddy` with a clean slate: run in `cwd`, no inherited BUDDY_* variables.
pub fn buddy(cwd: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_buddy"));
    cmd.current_dir(cwd).env_remove("RUST_LOG");
    for (key, _) in std::env::vars() {
        if key.starts_with("BUDDY_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

pub fn scenarios_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios"))
}

/// The path of `scenarios/<name>.json`.
pub fn scenario_of(name: &str) -> PathBuf {
    scenarios_dir().join(format!("{name}.json"))
}

/// Loads `scenarios/<name>.json`.
pub fn load(name: &str) -> Scenario {
    Scenario::load(&scenarios_dir().join(format!("{name}.json"))).unwrap()
}

/// Runs every scenario file under its own policy.
pub async fn run_all() -> Vec<(Scenario, ScenarioReport)> {
    let sandbox_dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(sandbox_dir.path()).unwrap();
    let mut reports = Vec::new();
    for file in scenario_files(&scenarios_dir()).unwrap() {
        let scenario = Scenario::load(&file).unwrap();
        let report = run_scenario(scenario.clone(), &sandbox, &[]).await.unwrap();
        reports.push((scenario, report));
    }
    reports
}

/// A Python script run as a local server that prints its port on its first line;
/// stopped when dropped.
pub struct PythonServer {
    child: std::process::Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

impl PythonServer {
    /// Writes `source` to `dir/name` and runs it.
    pub fn start(dir: &std::path::Path, name: &str, source: &str) -> Self {
        use std::io::BufRead;
        std::fs::write(dir.join(name), source).unwrap();
        let mut child = std::process::Command::new("python3")
            .arg(dir.join(name))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap();
        PythonServer { child, port }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
