//! `buddy serve`'s health of its MCP servers (`GET /v1/health`): one that runs with its
//! protocol, one that could not start with the reason and when it is tried again.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};

use serde_json::json;

use super::server::get_json;

fn time_server() -> String {
    let path = std::env::var_os("BUDDY_MCP_TIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("target/mcp-venv/bin/mcp-server-time")
        });
    assert!(
        path.exists(),
        "{} is missing: run scripts/mcp-servers.sh",
        path.display()
    );
    path.display().to_string()
}

/// Kills the server when the test ends, passed or not.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `buddy serve` in `dir`; returns it, its base URL and the stderr lines before
/// the address.
fn serve(dir: &std::path::Path) -> (Serving, String, Vec<String>) {
    let db = dir.join("buddy.db");
    let mut child = super::buddy(dir)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let serving = Serving(child);
    let mut before = Vec::new();
    let url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "buddy serve ended: {before:?}"
        );
        if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
            break url.to_owned();
        }
        before.push(line);
    };
    std::thread::spawn(move || for _ in stderr.lines() {});
    (serving, url, before)
}

#[tokio::test]
async fn a_server_that_could_not_start_is_in_the_health_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[mcp]]\nname = \"time\"\ncommand = [{:?}]\n\n[[mcp]]\nname = \"gone\"\ncommand = [\"/no/such/docker\"]\nrequired = false\n",
        time_server()
    );
    std::fs::write(dir.path().join("buddy.toml"), toml).unwrap();
    let (_serving, url, before) = serve(dir.path());
    assert!(
        before
            .iter()
            .any(|l| l.contains("MCP server `gone` is not running")),
        "{before:?}"
    );
    let health = get_json(&format!("{url}/v1/health")).await;
    assert_eq!(health["status"], "degraded", "{health}");
    let servers = health["mcp"].as_array().unwrap();
    assert_eq!(servers.len(), 2, "{health}");
    let time = &servers[0];
    assert_eq!(
        (&time["name"], &time["state"], &time["required"]),
        (&json!("time"), &json!("running"), &json!(true)),
        "{health}"
    );
    assert!(time["protocol"].is_string(), "{health}");
    assert!(time.get("error").is_none(), "{health}");
    let gone = &servers[1];
    assert_eq!(
        (&gone["name"], &gone["state"], &gone["required"]),
        (&json!("gone"), &json!("down"), &json!(false)),
        "{health}"
    );
    let error = gone["error"].as_str().unwrap();
    assert!(error.contains("/no/such/docker"), "{health}");
    assert_eq!(gone["retry"], "background", "{health}");
    let next = gone["next_retry_in_secs"].as_f64().unwrap();
    assert!((0.0..=60.0).contains(&next), "{health}");
    // `/healthz` stays a bare liveness check.
    let live = get_json(&format!("{url}/healthz")).await;
    assert_eq!(live, json!({"status": "ok"}));
}
