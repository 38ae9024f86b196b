use std::sync::Arc;
use std::time::Duration;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError, Toolbox};
use buddy_skills::builtin::FileLimits;
use buddy_skills::{RegistryError, SkillRegistry};
use serde_json::{Value, json};

use super::{SkillArc, builtins, invoke};

/// A skill whose behaviour the test picks.
struct Scripted {
    name: &'static str,
    behaviour: fn(Value) -> Result<String, SkillError>,
    delay: Duration,
}

impl Skill for Scripted {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "test"
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 2}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
            "additionalProperties": false
        })
    }
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(100))
    }
    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            (self.behaviour)(args)
        })
    }
}

fn registry_with(
    behaviour: fn(Value) -> Result<String, SkillError>,
    delay: Duration,
) -> SkillRegistry {
    let mut registry = SkillRegistry::new().with_max_result_bytes(64);
    registry
        .register(Arc::new(Scripted {
            name: "weather",
            behaviour,
            delay,
        }) as SkillArc)
        .unwrap();
    registry
}

fn ok_weather(args: Value) -> Result<String, SkillError> {
    Ok(format!("sunny in {}", args["city"].as_str().unwrap_or("?")))
}

#[tokio::test]
async fn valid_arguments_run_the_skill() {
    let registry = registry_with(ok_weather, Duration::ZERO);
    let out = invoke(&registry, "weather", r#"{"city":"Paris"}"#).await;
    assert_eq!(
        (out.content.as_str(), out.is_error),
        ("sunny in Paris", false)
    );
}

fn echo_args(args: Value) -> Result<String, SkillError> {
    Ok(args.to_string())
}

#[tokio::test]
async fn a_null_optional_argument_counts_as_not_given_but_a_null_required_one_is_refused() {
    let registry = registry_with(echo_args, Duration::ZERO);
    let out = invoke(&registry, "weather", r#"{"city":"Oslo","days":null}"#).await;
    assert_eq!(
        (out.content.as_str(), out.is_error),
        (r#"{"city":"Oslo"}"#, false)
    );
    let out = invoke(&registry, "weather", r#"{"city":null}"#).await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("/city"), "{}", out.content);
}

#[tokio::test]
async fn each_kind_of_bad_argument_is_an_error_result_the_model_can_read() {
    let registry = registry_with(ok_weather, Duration::ZERO);
    let cases = [
        ("{\"city\": \"Par", "not valid JSON"),
        ("[1, 2]", "invalid arguments for `weather`"),
        ("{}", "\"city\" is a required property"),
        (r#"{"city": 7}"#, "/city"),
        (r#"{"city": "P"}"#, "/city"),
        (r#"{"city": "Paris", "days": 0}"#, "/days"),
        (r#"{"city": "Paris", "extra": true}"#, "extra"),
    ];
    for (args, expected) in cases {
        let out = invoke(&registry, "weather", args).await;
        assert!(out.is_error, "{args} should fail");
        assert!(!out.fatal);
        assert!(out.content.contains(expected), "{args}: {}", out.content);
    }
}

#[tokio::test]
async fn a_huge_argument_that_breaks_the_schema_is_named_by_its_start_and_size_not_echoed() {
    let mut registry = SkillRegistry::new();
    registry
        .register(Arc::new(Scripted {
            name: "weather",
            behaviour: ok_weather,
            delay: Duration::ZERO,
        }) as SkillArc)
        .unwrap();
    // `days` must be an integer: a 2 MB string there was quoted whole in the refusal.
    let args = json!({"city": "Paris", "days": "7".repeat(2_000_000)}).to_string();
    let out = invoke(&registry, "weather", &args).await;
    assert!(out.is_error && !out.fatal, "{}", out.content);
    assert!(out.content.contains("/days"), "{}", out.content);
    assert!(
        out.content.contains("(2000000 characters)"),
        "{}",
        out.content
    );
    assert!(out.content.len() < 2_000, "{} bytes", out.content.len());
    // A short wrong value is still quoted whole.
    let out = invoke(
        &registry,
        "weather",
        r#"{"city": "Paris", "days": "seven"}"#,
    )
    .await;
    assert!(
        out.content.contains(r#""seven" is not of type "integer""#),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn empty_arguments_mean_an_empty_object() {
    let registry = registry_with(ok_weather, Duration::ZERO);
    let out = invoke(&registry, "weather", "  ").await;
    assert!(
        out.is_error && out.content.contains("required"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn unknown_tools_list_what_exists() {
    let (_dir, registry) = builtins(FileLimits::default());
    let out = invoke(&registry, "get_tiem", "{}").await;
    assert!(out.is_error);
    assert!(
        out.content.contains("unknown tool `get_tiem`") && out.content.contains("get_time"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn skill_errors_timeouts_and_panics_become_error_results() {
    let failing = registry_with(
        |_| Err(SkillError::Failed("upstream said no".into())),
        Duration::ZERO,
    );
    let out = invoke(&failing, "weather", r#"{"city":"Paris"}"#).await;
    assert_eq!(
        (out.content.as_str(), out.is_error, out.fatal),
        ("upstream said no", true, false)
    );

    let fatal = registry_with(
        |_| Err(SkillError::Fatal("credentials revoked".into())),
        Duration::ZERO,
    );
    let out = invoke(&fatal, "weather", r#"{"city":"Paris"}"#).await;
    assert!(out.is_error && out.fatal);

    let slow = registry_with(ok_weather, Duration::from_secs(60));
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        invoke(&slow, "weather", r#"{"city":"Paris"}"#),
    )
    .await
    .expect("the skill's own timeout must fire");
    assert!(
        out.is_error && out.content.contains("timed out"),
        "{}",
        out.content
    );

    let panicking = registry_with(|_| panic!("bug in skill"), Duration::ZERO);
    let out = invoke(&panicking, "weather", r#"{"city":"Paris"}"#).await;
    assert!(
        out.is_error && out.content.contains("crashed"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn long_results_keep_their_head_and_tail_with_a_note() {
    let registry = registry_with(
        |_| Ok(format!("{}the end", "x".repeat(993))),
        Duration::ZERO,
    );
    let out = invoke(&registry, "weather", r#"{"city":"Paris"}"#).await;
    assert!(!out.is_error);
    assert!(out.content.starts_with(&"x".repeat(32)));
    assert!(out.content.ends_with("the end"), "{}", out.content);
    assert!(
        out.content.contains(
            "[truncated: 936 of 1000 bytes cut here (line 1); the first 32 and the last 32"
        ),
        "{}",
        out.content
    );
}

#[test]
fn registration_refuses_duplicates_bad_names_and_bad_schemas() {
    let mut registry = registry_with(ok_weather, Duration::ZERO);
    let again = Arc::new(Scripted {
        name: "weather",
        behaviour: ok_weather,
        delay: Duration::ZERO,
    });
    assert_eq!(
        registry.register(again),
        Err(RegistryError::Duplicate("weather".into()))
    );
    let bad_name = Arc::new(Scripted {
        name: "has space",
        behaviour: ok_weather,
        delay: Duration::ZERO,
    });
    assert!(matches!(
        registry.register(bad_name),
        Err(RegistryError::InvalidName(_))
    ));

    struct BadSchema;
    impl Skill for BadSchema {
        fn name(&self) -> &str {
            "bad"
        }
        fn description(&self) -> &str {
            "bad"
        }
        fn parameters(&self) -> Value {
            json!({"type": "no-such-type"})
        }
        fn execute<'a>(
            &'a self,
            _: Value,
            _: SkillContext,
        ) -> BoxFuture<'a, Result<String, SkillError>> {
            Box::pin(async { Ok(String::new()) })
        }
    }
    assert!(matches!(
        registry.register(Arc::new(BadSchema)),
        Err(RegistryError::InvalidSchema { .. })
    ));
    assert_eq!(registry.names(), vec!["weather"]);
}

#[test]
fn builtins_declare_their_repeat_semantics() {
    let (_dir, registry) = builtins(FileLimits::default());
    assert_eq!(registry.semantics("get_time"), Some(RepeatSemantics::Pure));
    assert_eq!(
        registry.semantics("write_file"),
        Some(RepeatSemantics::Effectful)
    );
    assert_eq!(registry.semantics("missing"), None);
    let names: Vec<&str> = registry.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "get_time",
            "read_file",
            "write_file",
            "list_dir",
            "search_files"
        ]
    );
}
