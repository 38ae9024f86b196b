//! `buddy replay`: every scenario turn a real `buddy serve` stored replays exactly under
//! the policy it ran with; a `buddy run --json` output replays too, and a larger cap
//! than the recording's says where it leaves the recording.

use buddy_scripted::Scenario;
use buddy_scripted::library::scenario_files;
use serde_json::{Value, json};

use super::crash::spawn_server;
use super::server::{all_scenarios, chat};
use super::{buddy, scenario_of, scenarios_dir};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_scenario_turn_a_server_stored_replays_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("buddy.db");
    let scenarios = all_scenarios();
    // A server of its own (a process): its turns stay out of this process's metrics.
    let (mut server, url) = spawn_server(&db, scenarios.path(), dir.path(), &[]);
    // A scenario that scripts the client's Ctrl-C (`cancel_after_ms`) is played by
    // `buddy run`; a server has no client to press it, so its turn would run its slow
    // tools out: it is left to `buddy run`'s tests.
    let files: Vec<_> = scenario_files(&scenarios_dir())
        .unwrap()
        .into_iter()
        .filter(|f| Scenario::load(f).unwrap().cancel_after_ms.is_none())
        .collect();
    for file in &files {
        let scenario = Scenario::load(file).unwrap();
        let (status, body) = chat(
            &url,
            json!({"message": scenario.prompt, "model": format!("scripted:{}", scenario.name)}),
        )
        .await;
        assert_eq!(status, 200, "{}: {body}", scenario.name);
    }
    let _ = server.kill();
    let _ = server.wait();

    let out = buddy(dir.path())
        .args(["replay", "--all", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let replays: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replays.len(), files.len(), "one stored turn per scenario");
    for line in &replays {
        let replay = &line["replay"];
        assert_eq!(replay["same_stop"], true, "{line}");
        assert!(replay.get("beyond").is_none(), "{line}");
        assert_eq!(replay["recorded"], replay["replayed"], "{line}");
    }

    // The summary a person reads.
    let out = buddy(dir.path())
        .args(["replay", "--all", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let summary = text(&out.stdout);
    assert!(
        summary.contains(&format!("replayed {} turn(s)", files.len()))
            && summary.contains(&format!("{:>6} stop as recorded", files.len()))
            && summary.contains("     0 stop differently"),
        "{summary}"
    );

    // A tighter limit changes some stops, and says how.
    let out = buddy(dir.path())
        .args(["replay", "--all", "--max-tool-calls", "2", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let summary = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{summary}");
    assert!(
        summary.contains("completed → max_tool_calls, its final answer beyond the recording"),
        "{summary}"
    );
}

/// `buddy replay --all` over a store with a damaged conversation: it is named and
/// skipped, every other turn is replayed, and the exit is 2 (issue 60: it stopped at the
/// first bad row).
#[tokio::test(flavor = "multi_thread")]
async fn replay_all_skips_and_names_a_damaged_conversation_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("buddy.db");
    let scenarios = all_scenarios();
    let (mut server, url) = spawn_server(&db, scenarios.path(), dir.path(), &[]);
    for name in ["chain_3_steps", "ab_cycle", "empty_answer"] {
        let (status, body) = chat(
            &url,
            json!({"message": "go", "model": format!("scripted:{name}")}),
        )
        .await;
        assert_eq!(status, 200, "{name}: {body}");
    }
    let _ = server.kill();
    let _ = server.wait();
    let raw = rusqlite::Connection::open(&db).unwrap();
    let damaged: String = raw
        .query_row(
            "SELECT id FROM conversations ORDER BY rowid LIMIT 1 OFFSET 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    raw.execute(
        "UPDATE messages SET body = '{\"role\": 7}' WHERE conversation_id = ?1",
        [&damaged],
    )
    .unwrap();
    drop(raw);

    let out = buddy(dir.path())
        .args(["replay", "--all", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("conversation {damaged}: not replayable"))
            && stderr.contains("the replay is incomplete"),
        "{stderr}"
    );
    assert!(stdout.contains("replayed 2 turn(s)"), "{stdout}");
    assert!(stdout.contains("1 could not be replayed"), "{stdout}");
}

#[test]
fn a_run_json_output_replays_and_a_larger_cap_goes_beyond_the_recording() {
    let dir = tempfile::tempdir().unwrap();
    let out = buddy(dir.path())
        .args(["run", "--json", "--max-model-calls", "5", "--scenario"])
        .arg(scenario_of("paging_12"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "max_model_calls");
    let file = dir.path().join("paging.jsonl");
    std::fs::write(&file, &out.stdout).unwrap();

    let same = buddy(dir.path())
        .args(["replay", "--file"])
        .arg(&file)
        .output()
        .unwrap();
    let shown = text(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{shown}");
    assert!(shown.contains("= same stop, same calls"), "{shown}");

    let larger = buddy(dir.path())
        .args(["replay", "--max-model-calls", "40", "--file"])
        .arg(&file)
        .output()
        .unwrap();
    let shown = text(&larger.stdout);
    assert_eq!(larger.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("max_model_calls = 40 (recorded 5)")
            && shown.contains("beyond the recording after call 4")
            && shown
                .contains("trips only in the recording: model_call_limit finalize after call 4"),
        "{shown}"
    );
}

#[test]
fn replay_says_what_is_wrong_with_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = buddy(dir.path()).args(["replay"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no conversation store at buddy.db"),
        "{}",
        text(&out.stderr)
    );
    let file = dir.path().join("old.jsonl");
    std::fs::write(&file, "{\"type\":\"text_delta\",\"text\":\"hi\"}\n").unwrap();
    let out = buddy(dir.path())
        .args(["replay", "--file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("holds no recording"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(&file, "not json\n").unwrap();
    let out = buddy(dir.path())
        .args(["replay", "--file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains("old.jsonl:1: not an event of `buddy run --json`"),
        "{}",
        text(&out.stderr)
    );
    // A recording that is there but cannot be read is no success (issue 46, item 11).
    std::fs::write(
        &file,
        "{\"type\":\"recording\",\"recording\":{\"tape\":7}}\n",
    )
    .unwrap();
    let out = buddy(dir.path())
        .args(["replay", "--file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("its recording is unreadable")
            && text(&out.stderr).contains("the replay is incomplete"),
        "{}",
        text(&out.stderr)
    );
}

/// What terminations v3 and v4 changed: the scenario turns recorded under the v2 rules
/// (`tests/fixtures/recordings-v2/`), replayed under today's. Each change is explained in
/// BENCHMARKS.md ("Termination v3: what changed", "Termination v4: what changed"): under
/// v4 a new action is progress, so the loops of undeclared skills that v2 stopped by their
/// fourth call go on past the end of their recording; every other stop is as recorded.
#[test]
fn the_v2_recordings_change_only_where_the_v3_and_v4_rules_say() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recordings-v2");
    let mut files: Vec<_> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut cmd = buddy(dir.path());
    cmd.args(["replay", "--json"]);
    for file in &files {
        cmd.arg("--file").arg(file);
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "some stops change");
    let mut changed = Vec::new();
    for line in text(&out.stdout).lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        let replay = &line["replay"];
        if replay["same_stop"] == true {
            continue;
        }
        let name = line["turn"].as_str().unwrap_or_default();
        let scenario = name
            .rsplit('/')
            .next()
            .and_then(|f| f.split(".jsonl").next())
            .unwrap_or_default()
            .to_owned();
        let recorded = replay["recorded"]["reason"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        let replayed = match (
            &replay["replayed"]["reason"],
            replay["beyond"]["wanted"].as_str(),
        ) {
            (Value::String(reason), Some("final_answer")) => format!("{reason}, answer beyond"),
            (_, Some(_)) => "beyond the recording".to_owned(),
            (Value::String(reason), None) => reason.clone(),
            _ => "?".to_owned(),
        };
        changed.push(format!("{scenario}: {recorded} → {replayed}"));
    }
    assert_eq!(
        changed,
        [
            "answer_echoes_note: completed → beyond the recording",
            "chain_result_tokens: loop_detected → beyond the recording",
            "cycle_period_3: loop_detected → beyond the recording",
            "echo_search_growing: loop_detected → beyond the recording",
            "empty_answer: no_answer → beyond the recording",
            "empty_reply_reasked: no_answer → beyond the recording",
            "failing_varied_args: tools_exhausted → beyond the recording",
            "finalize_call_as_text: loop_detected → beyond the recording",
            "finalize_echo: loop_detected → beyond the recording",
            "finalize_omits_result: loop_detected → beyond the recording",
            "fix_failing_test: tools_exhausted → beyond the recording",
            "growing_args: loop_detected → beyond the recording",
            "identical_seven_tools: loop_detected → beyond the recording",
            "junk_args_many_skills: loop_detected → beyond the recording",
            "noisy_poll: max_model_calls → loop_detected, answer beyond",
            "provider_refuses_loop: provider_error → provider_refused_loop, answer beyond",
            "small_window: context_overflow → beyond the recording",
        ]
    );
}
