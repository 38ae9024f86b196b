//! `buddy judge`: recorded conversations of other agents, in the forms people log them,
//! judged by the real binary — one line per run it would stop, a table per source,
//! `--json` per run — and bad input named and skipped.

use serde_json::{Value, json};

use super::buddy;

/// An OpenAI-style conversation: `n` calls of `command` (each its own reply), then an answer.
fn run(id: &str, success: bool, commands: &[&str], result: &str) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "fix the build"})];
    for (i, command) in commands.iter().enumerate() {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("{id}-{i}"), "type": "function",
             "function": {"name": "bash", "arguments": json!({"command": command}).to_string()}}]}));
        messages
            .push(json!({"role": "tool", "tool_call_id": format!("{id}-{i}"), "content": result}));
    }
    messages.push(json!({"role": "assistant", "content": "Done."}));
    json!({"id": id, "source": "agents", "success": success, "messages": messages})
}

#[test]
fn judges_every_run_of_a_jsonl_file_and_names_the_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let new_work = [
        "ls",
        "mkdir repro",
        "touch repro/__init__.py",
        "cat > repro/t.py <<'EOF'\nx\nEOF",
        "python -m pytest repro",
    ];
    let lines = [
        run("fresh", true, &new_work, "").to_string(),
        run(
            "loop",
            false,
            &["make"; 9],
            "make: *** No rule to make target",
        )
        .to_string(),
        "{oops".to_owned(),
        // LangChain's dicts, as `messages_to_dict` writes them.
        json!([{"type": "human", "data": {"content": "time?"}},
               {"type": "ai", "data": {"content": "It is noon."}}])
        .to_string(),
    ];
    let file = dir.path().join("runs.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();

    let out = buddy(dir.path())
        .args(["judge", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("runs.jsonl:3: not JSON"), "{stderr}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: &str| lines.iter().find(|l| l["id"] == id).cloned().unwrap();
    assert_eq!(
        by_id("fresh")["outcome"],
        "untouched",
        "new actions with empty output"
    );
    let looped = by_id("loop");
    assert_eq!(looped["outcome"], "stopped");
    // Warned at the fifth identical result, ended at the eighth.
    assert_eq!(looped["interventions"][0]["action"], "warned");
    assert_eq!(looped["interventions"][0]["model_call"], 5);
    assert_eq!(looped["stop"]["after_model_call"], 8);
    assert_eq!(looped["stop"]["guard"], "repetition");
    assert_eq!(looped["loop_caught"], false);
    assert_eq!(looped["long_loop_ended"], true);
    assert_eq!(looped["model_calls_saved"], 1);
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["all"]["runs"], 3);
    assert_eq!(summary["all"]["unreadable"], 1);
    assert_eq!(summary["by_source"]["agents"]["false_stops"], 0);
    assert_eq!(summary["by_source"]["agents"]["unsolved_stopped"], 1);
    assert_eq!(summary["by_source"]["agents"]["warned"], 1);
    assert_eq!(summary["by_source"]["agents"]["long_loops_ended"], 1);

    // Text: the stopped run with its evidence, then the table.
    let out = buddy(dir.path()).arg("judge").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("[unsolved] loop: stopped after model call 8 of 10 (turn 1), loop_detected by repetition"),
        "{stdout}"
    );
    assert!(stdout.contains("judged 3 of 3 runs"), "{stdout}");
    assert!(stdout.contains("false stops"), "{stdout}");
}

#[test]
fn a_policy_flag_changes_the_judgement_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.json");
    let commands: Vec<String> = (0..30).map(|i| format!("sed -n {i}p f")).collect();
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    std::fs::write(&file, run("long", true, &commands, "line").to_string()).unwrap();
    let judged = |flags: &[&str]| {
        let out = buddy(dir.path())
            .args(["judge", "--json"])
            .args(flags)
            .arg(&file)
            .output()
            .unwrap();
        let first: Value = serde_json::from_str(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .unwrap_or("null"),
        )
        .unwrap();
        first
    };
    assert_eq!(judged(&[])["outcome"], "untouched");
    let capped = judged(&["--max-model-calls", "10"]);
    assert_eq!(capped["outcome"], "stopped");
    assert_eq!(capped["stop"]["guard"], "model_call_limit");
    let out = buddy(dir.path())
        .args(["judge", "--max-model-calls", "1"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `buddy judge`'s exit codes, each shown (docs/reference/exit-codes.md): 0 with runs
/// judged (a bad line skipped and named), 1 when no run was judged, 2 for a file
/// past `--max-input-bytes` (from a path or standard input) or one that is not there.
#[test]
fn judge_reads_bounded_input_and_its_exit_codes_are_as_documented() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.jsonl");
    let good = run("ok", true, &["ls", "make"], "done").to_string();
    std::fs::write(&file, format!("{good}\nnot json\n")).unwrap();
    let judge = |args: &[&str], stdin: Option<&str>| {
        let mut child = buddy(dir.path())
            .arg("judge")
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(text) = stdin {
            // The judge may refuse before reading it all: a closed pipe is fine.
            let _ = child.stdin.take().unwrap().write_all(text.as_bytes());
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let path = file.to_str().unwrap();
    let (code, stderr) = judge(&[path], None);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("skipped"), "{stderr}");
    let size = std::fs::metadata(&file).unwrap().len();
    let (code, stderr) = judge(&["--max-input-bytes", &size.to_string(), path], None);
    assert_eq!(code, Some(0), "exactly the limit is judged: {stderr}");
    let under = (size - 1).to_string();
    let (code, stderr) = judge(&["--max-input-bytes", &under, path], None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("larger than") && stderr.contains("--max-input-bytes"),
        "{stderr}"
    );
    let big = format!("{good}\n").repeat(50);
    let (code, stderr) = judge(&["--max-input-bytes", "1000", "-"], Some(&big));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("- is larger than 1000 bytes"), "{stderr}");
    let (code, _) = judge(&["-"], Some(&big));
    assert_eq!(code, Some(0));
    let (code, stderr) = judge(&["-"], Some("not json\n{\"messages\": 7}\n"));
    assert_eq!(code, Some(1), "no run could be judged: {stderr}");
    let (code, stderr) = judge(&["-"], Some(""));
    assert_eq!(code, Some(1), "no run in the input: {stderr}");
    let (code, stderr) = judge(&["missing.jsonl"], None);
    assert_eq!(code, Some(2), "{stderr}");
}

/// The table explains itself (issue 58): under it, each column's heading and what it
/// counts — in text, with `--summary` too, never in `--json`. A solved run that only
/// repeated itself after buddy's stop is a false stop that lost no work, and the legend
/// says what that means.
#[test]
fn the_table_has_a_legend_of_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.jsonl");
    let repeated = run("repeated", true, &["make"; 9], "make: nothing to be done");
    std::fs::write(&file, repeated.to_string()).unwrap();
    for flags in [&[][..], &["--summary"][..]] {
        let out = buddy(dir.path())
            .arg("judge")
            .args(flags)
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (table, legend) = stdout.split_once("\ncolumns:\n").expect("a legend");
        // One false stop of one solved run, and it lost no work.
        let row = table.lines().find(|l| l.starts_with("agents")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[..5], ["agents", "1", "1", "1", "(100.0%)"], "{row}");
        assert_eq!(cells[5], "0", "lose work: {row}");
        for heading in [
            "false stops",
            "lose work",
            "any results",
            "unsolved stopped",
        ] {
            assert!(
                legend.lines().any(|l| l.trim_start().starts_with(heading)),
                "{heading}: {legend}"
            );
        }
        assert!(legend.contains("stopping them lost nothing"), "{legend}");
    }
    let out = buddy(dir.path())
        .args(["judge", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("columns:"), "{stdout}");
    assert!(
        stdout
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "{stdout}"
    );
}
