use std::sync::Arc;

use buddy_core::{RepeatSemantics, Skill};
use buddy_skills::{CommandSkill, CommandSkillConfig, SkillRegistry};
use serde_json::json;

use super::invoke;

fn config(name: &str, script: &str) -> CommandSkillConfig {
    CommandSkillConfig {
        name: name.into(),
        description: "test command".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        semantics: RepeatSemantics::Pure,
        command: vec!["sh".into(), "-c".into(), script.into()],
        timeout_secs: Some(5.0),
        env: [("GREETING".to_owned(), "hello".to_owned())].into(),
        cwd: None,
    }
}

fn registry(cfg: CommandSkillConfig) -> SkillRegistry {
    let dir = std::env::temp_dir();
    let mut registry = SkillRegistry::new();
    registry
        .register(Arc::new(CommandSkill::new(cfg, dir).unwrap()))
        .unwrap();
    registry
}

#[tokio::test]
async fn stdout_is_the_result_and_arguments_arrive_as_json_on_stdin() {
    let r = registry(config(
        "echo_args",
        r#"printf '%s says: ' "$GREETING"; cat"#,
    ));
    let out = invoke(&r, "echo_args", r#"{"city":"Paris"}"#).await;
    assert_eq!(
        (out.content.as_str(), out.is_error),
        (r#"hello says: {"city":"Paris"}"#, false)
    );
}

#[tokio::test]
async fn a_non_zero_exit_is_an_error_result_with_stderr() {
    let r = registry(config("broken", "echo 'no such city' >&2; exit 3"));
    let out = invoke(&r, "broken", r#"{"city":"Atlantis"}"#).await;
    assert!(out.is_error && !out.fatal);
    assert_eq!(out.content, "`broken` failed (exit status 3): no such city");
}

#[tokio::test]
async fn a_hung_command_is_killed_at_its_timeout() {
    let mut cfg = config("sleepy", "sleep 30");
    cfg.timeout_secs = Some(0.3);
    let r = registry(cfg);
    let out = invoke(&r, "sleepy", r#"{"city":"Paris"}"#).await;
    assert!(
        out.is_error && out.content.contains("timed out after 0.3 s"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn schema_is_checked_before_the_command_runs() {
    let marker = tempfile::NamedTempFile::new().unwrap();
    let script = format!("echo ran > {}", marker.path().display());
    let r = registry(config("guarded", &script));
    let out = invoke(&r, "guarded", r#"{"town":"Paris"}"#).await;
    assert!(
        out.is_error && out.content.contains("city"),
        "{}",
        out.content
    );
    assert_eq!(
        std::fs::read_to_string(marker.path()).unwrap(),
        "",
        "the command must not have run"
    );
}

#[tokio::test]
async fn a_missing_program_says_what_to_fix() {
    let mut cfg = config("ghost", "");
    cfg.command = vec!["/definitely/not/here".into()];
    let r = registry(cfg);
    let out = invoke(&r, "ghost", r#"{"city":"Paris"}"#).await;
    assert!(
        out.is_error
            && out.content.contains("could not start")
            && out.content.contains("buddy.toml"),
        "{}",
        out.content
    );
}

#[test]
fn declarations_are_checked_and_default_to_observed() {
    let parsed: CommandSkillConfig = serde_json::from_value(json!({
        "name": "deploy", "description": "Deploy the app", "command": ["./deploy.sh"]
    }))
    .unwrap();
    // A command declares nothing by default: its repeats are judged by their results.
    assert_eq!(parsed.semantics, RepeatSemantics::Observed);
    let skill = CommandSkill::new(parsed, std::env::temp_dir()).unwrap();
    assert_eq!(skill.timeout(), Some(std::time::Duration::from_secs(30)));
    let mut empty = config("x", "true");
    empty.command.clear();
    assert!(CommandSkill::new(empty, std::env::temp_dir()).is_err());
    let mut bad_timeout = config("x", "true");
    bad_timeout.timeout_secs = Some(0.0);
    assert!(CommandSkill::new(bad_timeout, std::env::temp_dir()).is_err());
    let unknown = serde_json::from_value::<CommandSkillConfig>(json!({
        "name": "x", "description": "y", "command": ["z"], "timeout": 3
    }));
    assert!(
        unknown
            .unwrap_err()
            .to_string()
            .contains("unknown field `timeout`")
    );
}
