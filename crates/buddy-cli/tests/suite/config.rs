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
