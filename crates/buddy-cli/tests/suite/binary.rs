//! The real `buddy` binary: exit codes, output streams, config, environment, signals.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use buddy_core::{ChatEvent, StopReason};

use super::{buddy, scenarios_dir};

fn scenario(name: &str) -> String {
    scenarios_dir()
        .join(format!("{name}.json"))
        .display()
        .to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().unwrap()
}

#[test]
fn demo_runs_every_scenario_and_reports_all_met() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path())
        .args(["demo", "--dir"])
        .arg(scenarios_dir()));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("met their expected outcome, 0 did not"),
        "{stdout}"
    );
    for name in ["get_time_forever", "ab_cycle", "paging_12", "polling"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(name) && l.ends_with("yes")),
            "{name}: {stdout}"
        );
    }
}

#[test]
fn demo_exits_non_zero_when_a_scenario_misses_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(scenario("get_time_forever"), dir.path().join("a.json")).unwrap();
    // Loop detection off: the same scenario now hits the model-call cap instead.
    let out = run(buddy(dir.path()).args(["demo", "--dir", ".", "--no-loop-detection"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("NO: stop reason max_model_calls (expected loop_detected)"));
}

#[test]
fn run_json_prints_one_event_per_line_and_maps_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        run(buddy(dir.path()).args(["run", "--json", "--scenario", &scenario("get_time_forever")]));
    assert_eq!(out.status.code(), Some(4), "loop_detected exits 4");
    let events: Vec<ChatEvent> = text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect();
    assert!(matches!(
        events.last(),
        Some(ChatEvent::Done {
            reason: StopReason::LoopDetected,
            ..
        })
    ));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ChatEvent::GuardTripped { .. }))
    );
    assert!(
        out.stderr.is_empty(),
        "--json keeps stderr quiet: {}",
        text(&out.stderr)
    );
}

#[test]
fn run_streams_text_to_stdout_and_readable_lines_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args(["run", "--scenario", &scenario("chain_3_steps")]));
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(stdout.contains("129.90 EUR"), "{stdout}");
    assert!(
        stderr.contains("→ find_user {\"email\":\"ada@example.com\"}"),
        "{stderr}"
    );
    assert!(
        stderr.contains("← get_invoice: invoice for o_7"),
        "{stderr}"
    );
    assert!(
        stderr
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("■ stop: completed (4 model calls, 3 tool calls")
    );
}

#[test]
fn limits_and_errors_have_their_own_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        run(buddy(dir.path()).args(["run", "--scenario", &scenario("runaway_on_limit_error")]));
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("■ error: max_model_calls"),
        "{}",
        text(&out.stderr)
    );
    let out = run(buddy(dir.path()).args(["run", "--scenario", &scenario("circuit_breaker")]));
    assert_eq!(out.status.code(), Some(3), "tools_exhausted is a limit");
}

#[test]
fn policy_flags_and_environment_override_the_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args([
        "run",
        "--json",
        "--max-model-calls",
        "3",
        "--scenario",
        &scenario("paging_12"),
    ]));
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stdout).contains(r#""reason":"max_model_calls""#));
    let out = run(buddy(dir.path())
        .env("BUDDY_MAX_MODEL_CALLS", "3")
        .env("BUDDY_ON_LIMIT", "error")
        .args(["run", "--json", "--scenario", &scenario("paging_12")]));
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stdout).contains(r#""type":"error""#));
    // Flags win over the environment.
    let out = run(buddy(dir.path()).env("BUDDY_MAX_MODEL_CALLS", "3").args([
        "run",
        "--max-model-calls",
        "25",
        "--scenario",
        &scenario("paging_12"),
    ]));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn bad_values_are_refused_with_the_field_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args(["run", "--max-model-calls", "1", "hi"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("max_model_calls"),
        "{}",
        text(&out.stderr)
    );
    let out = run(buddy(dir.path())
        .env("BUDDY_MAX_TOOL_CALLS", "lots")
        .args(["run", "hi"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("BUDDY_MAX_TOOL_CALLS"),
        "{}",
        text(&out.stderr)
    );
    let out = run(buddy(dir.path()).args(["run", "--policy", "max_turns=3", "hi"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown policy field `max_turns`"),
        "{}",
        text(&out.stderr)
    );
    let out = run(buddy(dir.path()).args(["run", "--scenario", "missing.json"]));
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no scenario file `missing.json` and no built-in scenario of that name")
            && stderr.contains("ab_cycle, "),
        "{stderr}"
    );
    let out = run(buddy(dir.path()).args(["run", "--scenario", "elsewhere/missing.json"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot read scenario `elsewhere/missing.json`"),
        "{}",
        text(&out.stderr)
    );
}

/// `--scenario NAME` plays the built-in scenario of that name when no such file exists
/// (the README's `--scenario ab_cycle`, run anywhere); a file of that name comes first.
#[test]
fn a_built_in_scenario_is_played_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args(["run", "--json", "--scenario", "ab_cycle"]));
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("\"reason\":\"loop_detected\""),
        "{}",
        text(&out.stdout)
    );
    let mut own =
        buddy_scripted::Scenario::load(std::path::Path::new(&scenario("plain_chat"))).unwrap();
    own.name = "own".into();
    std::fs::write(
        dir.path().join("ab_cycle"),
        serde_json::to_string(&own).unwrap(),
    )
    .unwrap();
    let out = run(buddy(dir.path()).args(["run", "--scenario", "ab_cycle"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Hello"), "{}", text(&out.stdout));
}

#[test]
fn a_command_skill_from_buddy_toml_runs_in_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        r#"
[skills]
builtin = []

[[skills.command]]
name = "shout"
description = "Upper-cases a text"
command = ["sh", "-c", "tr a-z A-Z"]
semantics = "pure"
[skills.command.parameters]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("shout.json"),
        r#"{
  "name": "shout", "prompt": "shout hello",
  "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
  "rules": [
    {"when": {"tool_results": 0}, "reply": {"tool_calls": [{"name": "shout", "arguments": {"text": "hello"}}]}},
    {"when": {}, "reply": {"text": "Shouted: {last_result}"}}
  ]
}"#,
    )
    .unwrap();
    // ./buddy.toml is picked up without --config.
    let out = run(buddy(dir.path()).args(["run", "--scenario", "shout.json"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(r#"Shouted: {"TEXT":"HELLO"}"#),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn chat_keeps_the_conversation_until_end_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = buddy(dir.path())
        .arg("chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"what time is it?\nlist the files\n")
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("The current time is"), "{stdout}");
    assert!(stdout.contains("The workspace holds"), "{stdout}");
}

#[cfg(unix)]
#[test]
fn ctrl_c_cancels_the_running_turn_with_exit_code_130() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("slow.json"),
        r#"{
  "name": "slow", "prompt": "wait",
  "tools": [{"name": "wait", "results": ["waited"], "delay_ms": 60000}],
  "expect": {"stop_reason": "cancelled", "model_calls": 1, "tool_calls": 0},
  "rules": [{"when": {"tool_results": 0}, "reply": {"tool_calls": [{"name": "wait"}]}}, {"when": {}, "reply": {"text": "done"}}]
}"#,
    )
    .unwrap();
    let mut child = buddy(dir.path())
        .args(["run", "--scenario", "slow.json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with("→ wait"), "{line}");
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("buddy did not stop after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("■ stop: cancelled"), "{rest}");
}

#[test]
fn help_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let top = text(&run(buddy(dir.path()).arg("--help")).stdout);
    for word in ["run", "chat", "demo", "--config", "Exit codes"] {
        assert!(top.contains(word), "buddy --help lacks {word}: {top}");
    }
    let run_help = text(&run(buddy(dir.path()).args(["run", "--help"])).stdout);
    for flag in [
        "--json",
        "--scenario",
        "--sandbox",
        "--model",
        "--max-model-calls",
        "--max-tool-calls",
        "--on-limit",
        "--substantive-answer-chars",
        "--policy",
    ] {
        assert!(run_help.contains(flag), "buddy run --help lacks {flag}");
    }
}

#[test]
fn a_reader_that_goes_away_ends_buddy_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = buddy(dir.path())
        .args(["demo", "--dir", &scenarios_dir().display().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `buddy demo | head -1`: read one line, then close the pipe.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert!(first.starts_with("scenario"), "{first:?} {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        output.status.code(),
        Some(141),
        "128 + SIGPIPE, as shells report it"
    );
}

#[test]
fn each_error_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args(["run", "--scenario", "/nonexistent.json", "hi"]));
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
    let out = run(buddy(dir.path())
        .env("BUDDY_MAX_MODEL_CALLS", "abc")
        .args(["run", "hi"]));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("invalid type").count(), 1, "{stderr}");
    // Without a buddy.toml, the provider error does not show an empty list.
    let out = run(buddy(dir.path()).args(["run", "--provider", "nosuch", "hi"]));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no buddy.toml declares any provider") && !stderr.contains("[]"),
        "{stderr}"
    );
}

#[test]
fn counts_are_said_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args(["run", "What time is it?"]));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("2 model calls, 1 tool call,") && !stderr.contains("1 tool calls"),
        "{stderr}"
    );
}

#[test]
fn logs_to_a_file_or_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args(["-v", "run", "What time is it?"]));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("DEBUG"), "verbose logs are there: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "no escape codes: {stderr:?}");
}

#[test]
fn a_hosted_provider_without_a_key_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).env_remove("ANTHROPIC_API_KEY").args([
        "run",
        "--provider",
        "anthropic",
        "--model",
        "claude-x",
        "hi",
    ]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no API key") && stderr.contains("ANTHROPIC_API_KEY"),
        "{stderr}"
    );
    assert!(!stderr.contains("retrying"), "nothing was sent: {stderr}");
}

#[test]
fn serve_without_keys_on_a_public_address_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args(["serve", "--listen", "0.0.0.0:0"]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("refusing to listen"), "{stderr}");
    assert!(!stderr.contains("serving on"), "{stderr}");
    assert!(
        !dir.path().join("buddy.db").exists(),
        "no database was created"
    );
}

#[test]
fn serve_says_when_it_shuts_down_and_when_it_has_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = buddy(dir.path())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--shutdown-grace-secs",
            "1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("serving on"), "{line}");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status} {rest}");
    assert!(
        rest.contains("shutting down") && rest.contains("stopped"),
        "{rest}"
    );
}

#[test]
fn version_names_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).arg("--version"));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.starts_with(&format!("buddy {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{stdout}"
    );
    assert!(
        !stdout.contains("(commit unknown)"),
        "built in a checkout: {stdout}"
    );
}

#[test]
fn a_bad_sandbox_in_buddy_toml_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[skills]\nsandbox = \"no-such-dir\"\n",
    )
    .unwrap();
    let out = run(buddy(dir.path()).args(["--config", "buddy.toml", "run", "hi"]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("[skills] sandbox in buddy.toml") && !stderr.contains("--sandbox"),
        "{stderr}"
    );
}

#[test]
fn a_bad_policy_value_is_shown_on_its_own_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // A wrong type in [policy], the 6th line.
        (
            "[skills]\nbuiltin = [\"get_time\"]\n\n[policy]\nmax_model_calls = 30\nmax_tool_calls = \"lots\"\n",
            "6 | max_tool_calls = \"lots\"",
            "max_tool_calls",
        ),
        // A misspelt field in a per-model table, the 5th line.
        (
            "[policy]\nmax_model_calls = 30\n\n[policy.model.\"qwen*\"]\nmax_modle_calls = 3\n",
            "5 | max_modle_calls = 3",
            "max_modle_calls",
        ),
        // A value out of range, the 2nd line.
        (
            "[policy]\nmax_model_calls = 1\n",
            "2 | max_model_calls = 1",
            "max_model_calls",
        ),
    ];
    for (toml, line, field) in cases {
        std::fs::write(dir.path().join("buddy.toml"), toml).unwrap();
        let out = run(buddy(dir.path()).args(["--config", "buddy.toml", "run", "hi"]));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(line), "wanted the line `{line}`:\n{stderr}");
        assert!(stderr.contains(field), "{stderr}");
        assert!(
            !stderr.contains("| [policy"),
            "points at a header:\n{stderr}"
        );
    }
}

#[test]
fn a_capped_chain_answers_with_what_it_found() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args([
        "run",
        "--json",
        "--scenario",
        &scenario("chain_15_steps"),
        "--max-model-calls",
        "5",
    ]));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let last = text(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    let done: ChatEvent = serde_json::from_str(&last).unwrap();
    let ChatEvent::Done { reason, answer, .. } = done else {
        panic!("{last}")
    };
    assert_eq!(reason, StopReason::MaxModelCalls);
    assert!(answer.starts_with("I ran out of calls"), "{answer}");
    assert!(
        answer.contains("OOMKilled"),
        "the results found are quoted: {answer}"
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_command_line_itself() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F _buddy"),
        ("zsh", "#compdef buddy"),
        ("fish", "complete -c buddy"),
    ] {
        let out = run(buddy(dir.path()).args(["completions", shell]));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        // Every subcommand completes, the new ones too.
        for sub in ["run", "serve", "doctor", "replay", "completions"] {
            assert!(script.contains(sub), "{shell} lacks {sub}");
        }
    }
    let out = run(buddy(dir.path()).args(["completions", "tcsh"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("possible values"),
        "{}",
        text(&out.stderr)
    );

    let out = run(buddy(dir.path()).arg("man"));
    assert_eq!(out.status.code(), Some(0));
    let page = text(&out.stdout);
    assert!(
        page.contains(".TH buddy 1") && page.contains("Exit codes"),
        "{page}"
    );
}

/// `buddy init` writes a buddy.toml buddy reads and runs with: the scripted model when
/// nothing is found, a local server when one answers (`--local`), the key's provider
/// when `OPENAI_API_KEY` is set; it never overwrites a file unless told to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_writes_a_config_that_works_and_fills_in_what_it_finds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let init = move |args: Vec<String>, key: Option<&'static str>| {
        let path = path.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let mut cmd = buddy(&path);
                cmd.arg("init")
                    .args(args)
                    .env_remove("OPENAI_API_KEY")
                    .env_remove("ANTHROPIC_API_KEY");
                if let Some(key) = key {
                    cmd.env("OPENAI_API_KEY", key);
                }
                cmd.stdin(Stdio::null()).output().unwrap()
            })
            .await
            .unwrap()
        }
    };
    let out = init(vec!["--local".into(), "http://127.0.0.1:9/v1".into()], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(dir.path().join("buddy.toml")).unwrap();
    assert!(written.contains("# default_provider"), "{written}");
    let turn = run(buddy(dir.path()).args(["run", "What time is it?"]));
    assert_eq!(turn.status.code(), Some(0), "{}", text(&turn.stderr));

    let again = init(vec![], None).await;
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );

    let models = buddy_testkit::MockServer::always(buddy_testkit::MockResponse::json(
        200,
        &serde_json::json!({"object": "list", "data": [{"id": "qwen2.5:7b", "object": "model"}]}),
    ))
    .await;
    let local = format!("{}/v1", models.url());
    let out = init(
        vec!["--force".into(), "--local".into(), local.clone()],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(dir.path().join("buddy.toml")).unwrap();
    assert!(
        written.contains("default_provider = \"local\"")
            && written.contains(&format!("base_url = {local:?}"))
            && written.contains("model = \"qwen2.5:7b\""),
        "{written}"
    );
    assert!(models.requests().iter().any(|r| r.path == "/v1/models"));

    let out = init(
        vec![
            "--force".into(),
            "--local".into(),
            "http://127.0.0.1:9/v1".into(),
        ],
        Some("sk-test"),
    )
    .await;
    assert_eq!(out.status.code(), Some(0));
    let written = std::fs::read_to_string(dir.path().join("buddy.toml")).unwrap();
    assert!(
        written.contains("default_provider = \"openai\""),
        "{written}"
    );
}

/// The two overhead benchmarks run end to end on loopback, briefly: both loops do the same
/// work (the run fails when they make different numbers of model calls) and every request
/// through `buddy serve` is answered. Figures are not checked here (see BENCHMARKS.md);
/// the exit code is, so the rate stays off the 1,000/s that decides it.
#[test]
fn the_iteration_and_gateway_benchmarks_run_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args([
        "bench",
        "iteration",
        "--runs",
        "3",
        "--repeats",
        "1",
        "--target-us",
        "1000000",
        "--json",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Every workload by default, one report each: the short lookups, the 4 KB pages and
    // the replies streamed a few characters to an event.
    let reports: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shape: Vec<(&str, u64)> = reports
        .iter()
        .map(|r| {
            (
                r["workload"].as_str().unwrap_or_default(),
                r["model_calls_per_run"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(shape, [("lookup", 9), ("paging", 13), ("chunked", 9)]);
    for report in &reports {
        assert_eq!(report["batches"].as_array().map(Vec::len), Some(2));
        assert!(report["added_cpu_us_per_iteration"].is_number(), "{report}");
    }

    let out = run(buddy(dir.path()).args([
        "bench",
        "gateway",
        "--rate",
        "200",
        "--secs",
        "0.5",
        "--target-ms",
        "1000000",
        "--json",
    ]));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let reports: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), 2, "whole and streamed: {stdout}");
    for r in &reports {
        assert_eq!(r["gateway"], "buddy", "{r}");
        assert_eq!(r["through"]["errors"], 0, "{r}");
        assert_eq!(r["through"]["ok"], r["through"]["sent"], "{r}");
        assert_eq!(r["direct"]["ok"], r["direct"]["sent"], "{r}");
        assert!(r["gateway_peak_rss_kib"].as_u64().unwrap_or(0) > 0, "{r}");
    }
}

#[test]
fn the_gateway_benchmark_measures_anthropic_messages() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(buddy(dir.path()).args([
        "bench", "gateway", "--api", "messages", "--rate", "100", "--secs", "0.5", "--json",
    ]));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let reports: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), 2, "whole and streamed: {stdout}");
    for r in &reports {
        assert_eq!(r["api"], "messages", "{r}");
        assert_eq!(r["through"]["errors"], 0, "{r}");
        assert_eq!(r["through"]["ok"], r["through"]["sent"], "{r}");
        assert_eq!(r["direct"]["ok"], r["direct"]["sent"], "{r}");
        assert!(r["gateway_cpu_ms"].as_f64().is_some(), "{r}");
        let streamed = r["stream"] == true;
        // The first token is read from streamed replies only, the mock's and buddy's.
        for side in ["direct", "through"] {
            for q in ["ttft_p50_ms", "ttft_p99_ms"] {
                assert_eq!(r[side][q].as_f64().is_some(), streamed, "{side} {q}: {r}");
            }
        }
    }

    // Flags that do not fit are refused before anything starts.
    for bad in [
        &["--api", "responses"][..],
        &["--gateway-pid", "buddy=1"],
        &[
            "--mock",
            "http://127.0.0.1:9/v1",
            "--gateway",
            "x=http://127.0.0.1:9/v1",
            "--gateway-pid",
            "x=notapid",
        ],
    ] {
        let out = run(buddy(dir.path()).args(["bench", "gateway"]).args(bad));
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
}
