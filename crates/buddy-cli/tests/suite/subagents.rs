//! Sub-agents through the `buddy` binary: the built-in scenarios by name, the tree's
//! one ledger in `done` stats, replay of a tree from its record, and declarations in
//! buddy.toml checked with errors that say what to change.

use serde_json::Value;

use super::buddy;

/// `buddy ARGS` in `dir`, run to its end.
fn run(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    buddy(dir).args(args).output().expect("runs")
}

/// The JSON lines of `buddy run --json` (the last one is the terminal event).
fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn fan_out_against_nine_model_calls_answers_within_nine_over_the_whole_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run(
        dir.path(),
        &[
            "run",
            "--scenario",
            "subagents_fanout",
            "--policy",
            "max_model_calls=9",
            "--json",
        ],
    );
    let events = events(&out.stdout);
    let done = events.last().expect("a terminal event");
    assert_eq!(done["type"], "done", "{done}");
    let calls = done["stats"]["model_calls"].as_u64().expect("model calls");
    assert!(calls <= 9, "{calls} model calls over the tree against 9");
    assert!(
        done["stats"]["delegated"]["agents"]
            .as_u64()
            .is_some_and(|n| n >= 1),
        "the stats say what the sub-agents did: {done}"
    );
    assert!(!done["answer"].as_str().unwrap_or("").trim().is_empty());
    // The children's own model calls are in the stream, under their path.
    let nested_calls = events
        .iter()
        .filter(|e| e["type"] == "agent" && e["event"]["type"] == "iteration_stats")
        .count() as u64;
    assert_eq!(
        nested_calls,
        done["stats"]["delegated"]["model_calls"]
            .as_u64()
            .unwrap_or(0)
    );
}

#[test]
fn a_self_spawning_agent_is_refused_visibly_and_the_turn_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run(
        dir.path(),
        &["run", "--scenario", "subagents_recursive", "--json"],
    );
    assert_eq!(out.status.code(), Some(0));
    let events = events(&out.stdout);
    assert_eq!(events.last().expect("done")["reason"], "completed");
    let refusal = events.iter().find(|e| {
        e["type"] == "agent"
            && e["event"]["type"] == "guard_tripped"
            && e["event"]["guard"] == "delegation"
            && e["event"]["action"] == "refused"
    });
    let refusal = refusal.expect("the refusal is in the stream");
    assert_eq!(refusal["path"][0]["agent"], "researcher");
    // The human view shows the child's steps indented under its name.
    let human = run(dir.path(), &["run", "--scenario", "subagents_recursive"]);
    let shown = String::from_utf8_lossy(&human.stderr);
    assert!(
        shown.contains(
            "  [researcher: the history of the archive] ! guard delegation [researcher]: refused"
        ),
        "{shown}"
    );
}

/// Three researchers run side by side: each line says which one it is (its number among
/// its caller's researchers and its task), so their interleaved steps are told apart.
#[test]
fn parallel_children_of_one_agent_are_labelled_by_number_and_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run(dir.path(), &["run", "--scenario", "subagents_research"]);
    assert_eq!(out.status.code(), Some(0));
    let shown = String::from_utf8_lossy(&out.stderr);
    for (n, archive) in ["A", "B", "C"].iter().enumerate() {
        let label = format!("  [researcher#{}: archive {archive}] ", n + 1);
        let lookups: Vec<&str> = shown
            .lines()
            .filter(|l| l.starts_with(&label) && l.contains("→ lookup"))
            .collect();
        // Its 7 lookups, each of its own archive.
        assert_eq!(lookups.len(), 7, "{label}: {shown}");
        let own = format!("archive {archive} part");
        assert!(lookups.iter().all(|l| l.contains(&own)), "{lookups:?}");
    }
    assert!(!shown.contains("  [researcher] "), "{shown}");
}

#[test]
fn a_cancel_mid_fan_out_ends_the_tree_cancelled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run(
        dir.path(),
        &["run", "--scenario", "subagents_cancel", "--json"],
    );
    assert_eq!(out.status.code(), Some(130), "cancelled");
    let events = events(&out.stdout);
    let done = events.last().expect("done");
    assert_eq!(done["reason"], "cancelled");
    assert_eq!(
        done["stats"]["delegated"]["agents"], 4,
        "4 ran, 4 waited: {done}"
    );
}

#[test]
fn a_tree_replays_from_its_record_without_running_anything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run(
        dir.path(),
        &["run", "--scenario", "subagents_research", "--json"],
    );
    assert_eq!(out.status.code(), Some(0));
    let record = dir.path().join("tree.jsonl");
    std::fs::write(&record, &out.stdout).expect("written");
    let replay = buddy(dir.path())
        .args(["replay", "--file"])
        .arg(&record)
        .output()
        .expect("replays");
    let shown = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(0), "{shown}");
    assert!(shown.contains("same stop, same calls"), "{shown}");
}

#[test]
fn agents_in_buddy_toml_are_offered_and_a_bad_one_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[[agents]]\nname = \"summariser\"\ndescription = \"Sums up a text.\"\ninstructions = \"Be brief.\"\n",
    )
    .expect("written");
    let doctor = run(dir.path(), &["run", "--scenario", "plain_chat", "--json"]);
    assert_eq!(
        doctor.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&doctor.stderr)
    );
    let offered = events(&doctor.stdout)
        .iter()
        .find(|e| e["type"] == "iteration_stats")
        .and_then(|e| e["tools_offered"].as_u64());
    assert_eq!(
        offered,
        Some(1),
        "plain_chat has no tools; the agent is the one offered"
    );
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[[agents]]\nname = \"summariser\"\ndescription = \"Sums up.\"\nagents = [\"ghost\"]\n",
    )
    .expect("written");
    let bad = run(dir.path(), &["run", "--scenario", "plain_chat"]);
    let said = String::from_utf8_lossy(&bad.stderr);
    assert_ne!(bad.status.code(), Some(0));
    assert!(
        said.contains("summariser") && said.contains("ghost"),
        "{said}"
    );
}

#[test]
fn an_agent_may_name_one_of_the_configured_providers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = |provider: &str| {
        format!(
            "[providers.other]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"small\"\n\n[[agents]]\nname = \"summariser\"\ndescription = \"Sums up a text.\"\nprovider = \"{provider}\"\n"
        )
    };
    std::fs::write(dir.path().join("buddy.toml"), toml("other")).expect("written");
    let ok = run(dir.path(), &["run", "--scenario", "plain_chat"]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    std::fs::write(dir.path().join("buddy.toml"), toml("nowhere")).expect("written");
    let bad = run(dir.path(), &["run", "--scenario", "plain_chat"]);
    let said = String::from_utf8_lossy(&bad.stderr);
    assert_ne!(bad.status.code(), Some(0));
    assert!(said.contains("nowhere"), "{said}");
}
