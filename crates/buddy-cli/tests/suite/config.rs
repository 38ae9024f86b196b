use buddy_cli::config::BuddyConfig;
use buddy_engine::OnLimit;

#[test]
fn buddy_toml_sets_policy_per_model_and_declares_command_skills() {
    let config = BuddyConfig::parse(
        r#"
        [policy]
        max_model_calls = 30
        on_limit = "error"

        [policy.model."qwen*"]
        max_model_calls = 8
        substantive_answer_chars = 200

        [skills]
        builtin = ["get_time", "read_file"]
        timeout_secs = 10

        [[skills.command]]
        name = "weather"
        description = "Weather for a city"
        command = ["python3", "weather.py"]
        semantics = "pure"
        timeout_secs = 5
        [skills.command.parameters]
        type = "object"
        required = ["city"]
        properties.city = { type = "string" }
        "#,
        "test.toml",
    )
    .unwrap();
    let qwen = config.policy.resolve("qwen2.5-7b", &[]).unwrap();
    assert_eq!(
        (
            qwen.max_model_calls,
            qwen.substantive_answer_chars,
            qwen.on_limit
        ),
        (8, Some(200), OnLimit::Error)
    );
    let other = config.policy.resolve("gpt-4o", &[]).unwrap();
    assert_eq!(
        (other.max_model_calls, other.substantive_answer_chars),
        (30, None)
    );
    assert_eq!(config.skills.builtin, vec!["get_time", "read_file"]);
    let weather = &config.skills.command[0];
    assert_eq!(weather.parameters["properties"]["city"]["type"], "string");
}

#[test]
fn mistakes_in_buddy_toml_are_named() {
    let err = BuddyConfig::parse("[policy]\nmax_model_cals = 3\n", "b.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("max_model_cals") && err.contains("b.toml"),
        "{err}"
    );
    let err = BuddyConfig::parse("[policy]\nmax_tool_calls = 0\n", "b.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_tool_calls"), "{err}");
    let err = BuddyConfig::parse("[skills]\nbuiltin = [\"rm_rf\"]\n", "b.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("rm_rf"), "{err}");
    let err = BuddyConfig::parse("[skils]\n", "b.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("skils"), "{err}");
}

#[test]
fn the_server_refuses_model_names_its_providers_do_not_serve() {
    use buddy_server::Backend;
    buddy_providers::install_crypto_provider();
    let config = BuddyConfig::parse(
        r#"
        default_provider = "main"
        [providers.main]
        kind = "openai"
        base_url = "http://127.0.0.1:9/v1"
        model = "model-one"
        models = ["model-two"]
        [providers.open]
        kind = "openai"
        base_url = "http://127.0.0.1:9/v1"
        model = "open-default"
        any_model = true
        "#,
        "test",
    )
    .unwrap();
    let sandbox = tempfile::tempdir().unwrap();
    let backend = buddy_cli::backend::ConfiguredBackend::new(
        &config,
        buddy_skills::Sandbox::new(sandbox.path()).unwrap(),
        None,
        &|_| Some("sk-test".into()),
    )
    .unwrap();
    let mut listed = backend.models();
    listed.sort();
    assert_eq!(listed, ["model-one", "model-two", "open-default"]);
    for model in ["model-one", "model-two"] {
        assert_eq!(
            backend.resolve(None, Some(model)).ok().map(|r| r.model),
            Some(model.to_owned())
        );
    }
    let refused = backend
        .resolve(None, Some("gpt-9"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("unknown model `gpt-9`") && refused.contains("[model-one, model-two]"),
        "{refused}"
    );
    let refused = backend
        .resolve(Some("main"), Some("gpt-9"))
        .err()
        .unwrap()
        .to_string();
    assert!(refused.contains("any_model = true"), "{refused}");
    // The operator let any name through for this provider.
    assert_eq!(
        backend
            .resolve(Some("open"), Some("anything-at-all"))
            .ok()
            .map(|r| r.model),
        Some("anything-at-all".to_owned())
    );
}

/// `buddy run` with a priced provider shows the turn's cost on its stop line, and a
/// money budget ends the turn `cost_budget` (exit 3) with an answer; a budget on a model
/// without a price is refused.
#[test]
fn prices_in_buddy_toml_show_the_cost_and_cap_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        r#"
        [providers.s]
        kind = "scripted"
        [providers.s.prices]
        "*" = { input = 1000, output = 2000 }
        "#,
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = super::buddy(dir.path())
            .args(["run", "--provider", "s"])
            .args(args)
            .arg("What time is it?")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, out) = run(&[]);
    assert_eq!(code, Some(0), "{out}");
    // Two calls of a few dozen tokens at $1,000 / $2,000 per million: a few cents.
    let stop = out
        .lines()
        .find(|l| l.starts_with("■ stop:"))
        .unwrap_or_default();
    assert!(
        stop.starts_with("■ stop: completed (2 model calls") && stop.contains(" ms, $0.0"),
        "{out}"
    );
    // The first call costs about $0.02: no room for the answer call under $0.03.
    let (code, out) = run(&["--max-turn-cost-usd", "0.03"]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("■ stop: cost_budget (1 model call"), "{out}");
    assert!(
        out.contains("get_time:"),
        "answered from the tool result: {out}"
    );

    let out = super::buddy(dir.path())
        .args(["run", "--max-turn-cost-usd", "0.5", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("knows no price for model `scripted:"),
        "{text}"
    );
}

/// `[telemetry]` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) makes `buddy run` export its turn over
/// OTLP/HTTP before it exits, in the trace `TRACEPARENT` names; a bad endpoint is refused
/// with what to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_exports_its_spans_in_the_callers_trace_before_it_exits() {
    let collector = buddy_testkit::MockServer::always(buddy_testkit::MockResponse::status(
        200,
        "application/x-protobuf",
        Vec::new(),
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    for (toml, env) in [
        (
            format!("[telemetry]\nendpoint = \"{}\"\n", collector.url()),
            None,
        ),
        (String::new(), Some(collector.url())),
    ] {
        std::fs::write(dir.path().join("buddy.toml"), toml).unwrap();
        let before = collector.requests().len();
        let mut command = super::buddy(dir.path());
        command
            .args(["run", "What time is it?"])
            .env("TRACEPARENT", format!("00-{trace}-00f067aa0ba902b7-01"));
        if let Some(url) = env {
            command.env("OTEL_EXPORTER_OTLP_ENDPOINT", url);
        }
        let out = tokio::task::spawn_blocking(move || command.output().unwrap())
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let exports: Vec<_> = collector.requests()[before..].to_vec();
        assert!(!exports.is_empty(), "nothing was exported");
        let export = &exports[0];
        assert_eq!(export.path, "/v1/traces");
        assert_eq!(
            export.header("content-type"),
            Some("application/x-protobuf")
        );
        let body = exports
            .iter()
            .flat_map(|e| e.body.clone())
            .collect::<Vec<u8>>();
        let trace_bytes: Vec<u8> = (0..16)
            .map(|i| u8::from_str_radix(&trace[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        assert!(
            body.windows(16).any(|w| w == trace_bytes),
            "the caller's trace id is in the export"
        );
        for name in [
            "invoke_agent buddy",
            "chat scripted:",
            "execute_tool get_time",
        ] {
            assert!(
                body.windows(name.len()).any(|w| w == name.as_bytes()),
                "{name} is exported"
            );
        }
    }
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[telemetry]\nendpoint = \"127.0.0.1:4318\"\n",
    )
    .unwrap();
    let mut command = super::buddy(dir.path());
    command.args(["run", "hi"]);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("[telemetry] endpoint") && stderr.contains("http://"),
        "{stderr}"
    );
}

/// `--model` without a provider is answered by the scripted model: buddy says so, and
/// does not bill the scripted model at that model's list price.
#[test]
fn a_model_without_a_provider_is_the_scripted_model_and_buddy_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = super::buddy(dir.path())
        .args(["run", "--model", "gpt-4o", "hi"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("--model gpt-4o names no provider") && stderr.contains("--provider"),
        "{stderr}"
    );
    let stop = stderr
        .lines()
        .find(|l| l.starts_with("■ stop:"))
        .unwrap_or_default();
    assert!(
        stop.starts_with("■ stop: completed") && !stop.contains('$'),
        "{stop}"
    );
}

/// A scenario's stub tools touch nothing: an unattended `buddy run --scenario` runs them
/// (the README's polling example), while `--approval` still governs when given.
#[test]
fn scenario_stubs_do_not_wait_for_approval_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let polling = super::scenarios_dir().join("polling.json");
    let run = |extra: &[&str]| {
        let out = super::buddy(dir.path())
            .args(["run", "--scenario"])
            .arg(&polling)
            .args(extra)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run(&[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("← start_export:"),
        "start_export ran: {stderr}"
    );
    assert!(!stderr.contains("approval"), "{stderr}");
    assert!(stdout.contains("48,213 rows"), "{stdout}");
    // Asked for on the command line, approval applies to stubs too (refused unattended).
    let (_, _, stderr) = run(&["--approval", "always"]);
    assert!(stderr.contains("needs a person's approval"), "{stderr}");
}

#[test]
fn the_server_offers_the_configured_agents_and_a_scenarios_own() {
    use buddy_server::Backend;
    buddy_providers::install_crypto_provider();
    let config = BuddyConfig::parse(
        r#"
        [providers.main]
        kind = "openai"
        base_url = "http://127.0.0.1:9/v1"
        model = "model-one"
        [[agents]]
        name = "helper"
        description = "Does one thing."
        [[agents]]
        name = "second_opinion"
        description = "Checks with the other provider."
        provider = "main"
        "#,
        "test",
    )
    .unwrap();
    let sandbox = tempfile::tempdir().unwrap();
    let backend = |config: &BuddyConfig| {
        buddy_cli::backend::ConfiguredBackend::new(
            config,
            buddy_skills::Sandbox::new(sandbox.path()).unwrap(),
            Some(&super::scenarios_dir()),
            &|_| Some("sk-test".into()),
        )
    };
    let served = backend(&config).unwrap();
    let offered = |resolved: buddy_server::Resolved| -> Vec<(String, bool)> {
        let toolbox = resolved.toolbox;
        let mut names: Vec<(String, bool)> = toolbox
            .specs()
            .iter()
            .map(|s| (s.name.clone(), toolbox.is_agent(&s.name)))
            .collect();
        names.sort();
        names
    };
    // An HTTP provider's turns: the configured skills and both agents.
    let http = offered(served.resolve(Some("main"), None).unwrap());
    let agents: Vec<&str> = http
        .iter()
        .filter(|(_, agent)| *agent)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(agents, ["helper", "second_opinion"]);
    assert!(http.contains(&("read_file".to_owned(), false)), "{http:?}");
    // A scenario's model: its tools, its own agents, and the operator's.
    let scripted = offered(
        served
            .resolve(Some("scripted"), Some("subagents_research"))
            .unwrap(),
    );
    for (name, agent) in [("helper", true), ("lookup", false), ("researcher", true)] {
        assert!(
            scripted.contains(&(name.to_owned(), agent)),
            "{name}: {scripted:?}"
        );
    }
    // A declaration that cannot be offered stops the server at start, saying why.
    let broken = BuddyConfig::parse(
        r#"
        [providers.main]
        kind = "openai"
        base_url = "http://127.0.0.1:9/v1"
        model = "model-one"
        [[agents]]
        name = "helper"
        description = "Does one thing."
        provider = "elsewhere"
        "#,
        "test",
    )
    .unwrap();
    let err = backend(&broken).err().unwrap().to_string();
    assert!(
        err.contains("[[agents]]") && err.contains("provider `elsewhere`"),
        "{err}"
    );
}
