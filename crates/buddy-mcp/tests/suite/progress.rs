//! A call's progress and its task's status reach the turn (`SkillContext::progress`),
//! and a server's sampling is drawn from the turn's budget (`SkillContext::budget`) —
//! against a small Python server.

use std::sync::{Arc, Mutex};

use buddy_core::{BoxFuture, CallBudget, Progress, ProgressSink, Skill, SkillContext, Usage};
use buddy_mcp::{McpServerConfig, McpSkill, McpSource};
use serde_json::json;

/// The test server: `flood` sends 300 progress notifications, `export` runs as a task
/// through `working`, `input_required`, `working` and `completed`, `ask` samples three
/// times (see the script).
fn server(name: &str) -> McpServerConfig {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/servers/progress_server.py"
    );
    McpServerConfig::stdio(name, &["python3", script])
}

/// Keeps every update it gets.
#[derive(Debug, Default)]
struct Seen(Mutex<Vec<Progress>>);

impl ProgressSink for Seen {
    fn report(&self, update: Progress) {
        self.0.lock().unwrap().push(update);
    }
}

async fn skill(name: &str) -> Arc<dyn Skill> {
    let source = McpSource::new(server("p"));
    let skills = McpSkill::all(source).await.unwrap();
    skills
        .into_iter()
        .find(|s| s.name() == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

// Multi-threaded, as `buddy run` and `buddy serve` are: rmcp handles each notification in
// a task of its own, so they come out of order, some after the call's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_sink_in_order_and_ends_with_the_last_one_sent() {
    let flood = skill("p__flood").await;
    for _ in 0..5 {
        let seen = Arc::new(Seen::default());
        let ctx = SkillContext {
            progress: Some(seen.clone()),
            ..SkillContext::default()
        };
        let text = flood.execute(json!({}), ctx).await.unwrap();
        assert_eq!(text, "flooded");
        let seen = seen.0.lock().unwrap();
        let values: Vec<f64> = seen.iter().filter_map(|p| p.progress).collect();
        // Stale ones (handled after a later one) are dropped; the rest are in order.
        assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
        assert_eq!(
            seen.last(),
            Some(&Progress {
                progress: Some(300.0),
                total: Some(300.0),
                message: Some("row 300".into()),
                status: None,
            }),
            "{values:?}"
        );
    }
}

#[tokio::test]
async fn a_tasks_status_changes_reach_the_sink_with_their_messages() {
    let export = skill("p__export").await;
    let seen = Arc::new(Seen::default());
    let ctx = SkillContext {
        progress: Some(seen.clone()),
        ..SkillContext::default()
    };
    let text = export.execute(json!({}), ctx).await.unwrap();
    assert_eq!(text, "exported 48,213 rows");
    let statuses: Vec<(Option<String>, Option<String>)> = seen
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|p| (p.status.clone(), p.message.clone()))
        .collect();
    let owned = |s: &str, m: Option<&str>| (Some(s.to_owned()), m.map(str::to_owned));
    assert_eq!(
        statuses,
        [
            owned("working", Some("queued")),
            owned("working", Some("copying rows")),
            owned("input_required", Some("waiting for an answer")),
            owned("working", Some("writing")),
            owned("completed", None),
        ]
    );
}

/// A budget of `left` model calls that keeps what it was asked and booked.
#[derive(Debug)]
struct Budget {
    left: Mutex<u32>,
    booked: Mutex<Vec<(String, Option<Usage>)>>,
}

impl CallBudget for Budget {
    fn draw<'a>(&'a self, server: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut left = self.left.lock().unwrap();
            if *left == 0 {
                return Err(format!("no model call left for `{server}`"));
            }
            *left -= 1;
            Ok(())
        })
    }

    fn book<'a>(
        &'a self,
        _server: &'a str,
        model: &'a str,
        usage: Option<Usage>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move { self.booked.lock().unwrap().push((model.to_owned(), usage)) })
    }
}

/// A model that answers every call with `text`.
fn answering(text: &str) -> buddy_mcp::Sampler {
    let script = json!({"name": "sampler", "prompt": "",
        "expect": {"stop_reason": "completed", "model_calls": 1, "tool_calls": 0},
        "rules": [{"when": {}, "reply": {"text": text}}]});
    let scenario = buddy_scripted::Scenario::parse(&script.to_string(), "sampler").unwrap();
    buddy_mcp::Sampler {
        provider: Arc::new(buddy_scripted::ScriptedProvider::new(Arc::new(scenario))),
        model: "scripted:sampler".into(),
    }
}

#[tokio::test]
async fn sampling_is_drawn_from_the_callers_budget_and_refused_past_it() {
    let mut config = server("p");
    config.sampling = true;
    let source = McpSource::new(config);
    source.set_sampler(answering("a line"));
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    let ask = skills.iter().find(|s| s.name() == "p__ask").unwrap();
    let budget = Arc::new(Budget {
        left: Mutex::new(2),
        booked: Mutex::new(Vec::new()),
    });
    let ctx = SkillContext {
        budget: Some(budget.clone()),
        ..SkillContext::default()
    };
    let text = ask.execute(json!({}), ctx).await.unwrap();
    assert_eq!(
        text,
        "got: a line\ngot: a line\nrefused: no model call left for `p`"
    );
    let booked = budget.booked.lock().unwrap();
    assert_eq!(booked.len(), 2, "{booked:?}");
    assert!(booked.iter().all(|(model, _)| model == "scripted:sampler"));
    // The per-server count has the two answered ones only.
    assert_eq!(source.sampling_use().requests, 2);
}
