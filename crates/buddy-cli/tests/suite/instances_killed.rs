//! Three `buddy serve` processes on one PostgreSQL, one killed (SIGKILL) while every one
//! runs turns: no turn a client saw start is lost — each is on record through the
//! instances left, which go on serving. (The measured version, under a steady load,
//! with the release of the dead instance's leases: `scripts/bench_kill_instance.py`.)

use std::process::Child;

use serde_json::json;

use super::crash::{conversation, next_turn, spawn_buddy};
use super::server::{all_scenarios, sse_events, start_slow_turn};

/// The PostgreSQL `scripts/test.sh` started.
fn postgres_url() -> String {
    std::env::var("BUDDY_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!("BUDDY_TEST_POSTGRES_URL is not set: run the suite with scripts/test.sh, which starts a throw-away PostgreSQL")
    })
}

/// Kills every instance still running when the test ends, however it ends.
struct Instances(Vec<(Child, String)>);

impl Drop for Instances {
    fn drop(&mut self) {
        for (child, _) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_instances_one_killed_lose_no_acknowledged_turn() {
    let (dir, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let store = postgres_url();
    let args = [
        "serve".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--store".as_ref(),
        std::ffi::OsStr::new(&store),
        "--scenarios".as_ref(),
        scenarios.path().as_os_str(),
    ];
    let mut instances = Instances(
        (0..3)
            .map(|_| spawn_buddy(&args, dir.path(), &[]))
            .collect(),
    );

    // Two turns on each instance, acknowledged (their `conversation` event came) and
    // running a tool that takes a minute.
    let mut turns = Vec::new();
    for (at, (_, url)) in instances.0.iter().enumerate() {
        for _ in 0..2 {
            let (stream, id) = start_slow_turn(url).await;
            turns.push((at, id, stream));
        }
    }

    let (killed, _) = &mut instances.0[0];
    killed.kill().unwrap();
    killed.wait().unwrap();
    let left: Vec<String> = instances.0[1..]
        .iter()
        .map(|(_, url)| url.clone())
        .collect();

    // Every acknowledged turn is on record, read through either instance left: its
    // user message and the call message written before its tool ran.
    for (n, (at, id, _)) in turns.iter().enumerate() {
        let detail = conversation(&left[n % 2], id).await;
        let messages = detail["messages"].as_array().unwrap();
        assert_eq!(
            messages[0],
            json!({"role": "user", "content": "wait for it"}),
            "turn {n} of instance {at}: {detail}"
        );
        assert_eq!(messages[1]["tool_calls"][0]["name"], "wait_a_minute");
        let recorded = detail["turns"].as_array().unwrap();
        assert_eq!(recorded.len(), 1, "{detail}");
        // Not finished yet: the killed instance's turns are recorded `interrupted` once
        // its heartbeat lapses; the others' still run their tool.
        assert!(recorded[0]["finished_at_ms"].is_null(), "{detail}");
    }

    // The instances left go on serving new turns.
    for url in &left {
        let (mut stream, id) = super::server::start_chat(
            url,
            json!({"message": "what time is it?", "model": "scripted:offline_assistant"}),
        )
        .await;
        let mut body = String::new();
        while let Some(chunk) = stream.chunk().await.unwrap() {
            body.push_str(&String::from_utf8_lossy(&chunk));
        }
        let events = sse_events(&body);
        assert_eq!(events.last().unwrap().1["reason"], "completed", "{body}");
        // …and a conversation begun there goes on on the other.
        let other = left.iter().find(|u| *u != url).unwrap();
        let events = sse_events(&next_turn(other, &id).await);
        assert_eq!(events.last().unwrap().1["reason"], "completed");
    }
}
