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
