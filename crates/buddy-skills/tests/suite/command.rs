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
        env_passthrough: Vec::new(),
        cwd: None,
    }
}

fn registry(cfg: CommandSkillConfig) -> SkillRegistry {
    let dir = std::env::temp_dir();
    let mut registry = SkillRegistry::new();
    registry
        .register(Arc::new(CommandSkill::new(cfg, &dir).unwrap()))
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
    let skill = CommandSkill::new(parsed, &std::env::temp_dir()).unwrap();
    assert_eq!(skill.timeout(), Some(std::time::Duration::from_secs(30)));
    let mut empty = config("x", "true");
    empty.command.clear();
    assert!(CommandSkill::new(empty, &std::env::temp_dir()).is_err());
    let mut bad_timeout = config("x", "true");
    bad_timeout.timeout_secs = Some(0.0);
    assert!(CommandSkill::new(bad_timeout, &std::env::temp_dir()).is_err());
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

/// Live (not zombie) processes whose process group is `group`, read from /proc.
fn live_in_group(group: i32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // After the command name in parentheses: state, ppid, pgrp.
            let Some((_, rest)) = stat.rsplit_once(") ") else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.len() > 2 && fields[0] != "Z" && fields[2] == group.to_string()
        })
        .collect()
}

/// Waits (at most 5 s) for a process group to have no live member; returns what is left.
async fn group_after(group: i32) -> Vec<String> {
    for _ in 0..100 {
        let left = live_in_group(group);
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    live_in_group(group)
}

fn group_of(pid_file: &std::path::Path) -> i32 {
    std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_timeout_kills_the_children_a_command_started_too() {
    let pid_file = tempfile::NamedTempFile::new().unwrap();
    // The shell is its group's leader: `$$` is the group's id.
    let script = format!(
        "echo $$ > {}; sleep 171 & sleep 172",
        pid_file.path().display()
    );
    let mut cfg = config("spawner", &script);
    cfg.timeout_secs = Some(1.0);
    let r = registry(cfg);
    let out = invoke(&r, "spawner", r#"{"city":"Paris"}"#).await;
    assert!(
        out.is_error && out.content.contains("timed out"),
        "{}",
        out.content
    );
    let group = group_of(pid_file.path());
    assert!(group > 1);
    assert_eq!(
        group_after(group).await,
        Vec::<String>::new(),
        "processes left behind"
    );
}

#[tokio::test]
async fn children_left_running_by_a_finished_command_are_killed_and_do_not_hold_its_output() {
    let pid_file = tempfile::NamedTempFile::new().unwrap();
    // The background sleep keeps stdout open; buddy must not wait for it.
    let script = format!(
        "echo $$ > {}; sleep 173 & echo done",
        pid_file.path().display()
    );
    let mut cfg = config("daemonizer", &script);
    cfg.timeout_secs = Some(20.0);
    let r = registry(cfg);
    let out = invoke(&r, "daemonizer", r#"{"city":"Paris"}"#).await;
    assert_eq!((out.content.trim(), out.is_error), ("done", false));
    let group = group_of(pid_file.path());
    assert_eq!(
        group_after(group).await,
        Vec::<String>::new(),
        "processes left behind"
    );
}

#[tokio::test]
async fn a_cancelled_call_kills_the_whole_group() {
    let pid_file = tempfile::NamedTempFile::new().unwrap();
    let script = format!(
        "echo $$ > {}; sleep 174 & sleep 175",
        pid_file.path().display()
    );
    let r = registry(config("cancelled", &script));
    // Dropping the call's future is what a cancelled turn does.
    let call = invoke(&r, "cancelled", r#"{"city":"Paris"}"#);
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), call).await;
    let group = group_of(pid_file.path());
    assert_eq!(
        group_after(group).await,
        Vec::<String>::new(),
        "processes left behind"
    );
}

#[tokio::test]
async fn endless_output_is_capped_and_the_command_stopped() {
    let r = registry(config("chatty", "yes 'all work and no play'"));
    let out = invoke(&r, "chatty", r#"{"city":"Paris"}"#).await;
    // `yes` never stops by itself: the call ends because buddy stopped it at the cap.
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("[truncated: "),
        "the result says it was cut"
    );
}

#[tokio::test]
async fn commands_get_a_clean_environment_unless_variables_are_listed() {
    // Any variable of this process that is not in the baseline (cargo sets several).
    let (name, value) = std::env::vars()
        .find(|(k, v)| {
            !buddy_skills::BASELINE_ENV.contains(&k.as_str())
                && !v.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .expect("the test process has some environment");
    let script = format!("printf '%s|%s' \"${{{name}:-unset}}\" \"${{PATH:+has-path}}\"");
    let r = registry(config("env_default", &script));
    let out = invoke(&r, "env_default", r#"{"city":"Paris"}"#).await;
    assert_eq!(out.content, "unset|has-path", "{name} must not be passed");

    let mut cfg = config("env_listed", &script);
    cfg.env_passthrough = vec![name.clone()];
    let r = registry(cfg);
    let out = invoke(&r, "env_listed", r#"{"city":"Paris"}"#).await;
    assert_eq!(out.content, format!("{value}|has-path"));
}

#[test]
fn the_working_directory_stays_inside_the_sandbox() {
    let sandbox = tempfile::tempdir().unwrap();
    std::fs::create_dir(sandbox.path().join("tools")).unwrap();
    let mut inside = config("x", "pwd");
    inside.cwd = Some("tools".into());
    assert!(CommandSkill::new(inside, sandbox.path()).is_ok());
    for outside in ["..", "/tmp", "tools/../.."] {
        let mut cfg = config("x", "pwd");
        cfg.cwd = Some(outside.into());
        let error = CommandSkill::new(cfg, sandbox.path())
            .err()
            .unwrap_or_default();
        assert!(error.contains("outside the sandbox"), "{outside}: {error}");
    }
}

/// Whether process `pid` still runs (gone or a zombie is not running).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Waits (at most 5 s) for `pid` to stop running; whether it still runs.
async fn still_running(pid: i32) -> bool {
    for _ in 0..100 {
        if !running(pid) {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    running(pid)
}

#[tokio::test]
async fn children_that_leave_the_group_end_with_the_call_too() {
    // One child starts a session of its own (setsid), another moves to a new process
    // group (setpgid); both would outlive a kill of the command's group.
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "setsid sleep 176 >/dev/null 2>&1 & echo $! > {0}/a; \
         python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(177)' >/dev/null 2>&1 & echo $! > {0}/b; \
         sleep 0.3; echo done",
        dir.path().display()
    );
    let r = registry(config("escaper", &script));
    let out = invoke(&r, "escaper", r#"{"city":"Paris"}"#).await;
    assert_eq!(
        (out.content.trim(), out.is_error),
        ("done", false),
        "{}",
        out.content
    );
    for name in ["a", "b"] {
        let pid = group_of(&dir.path().join(name));
        assert!(
            !still_running(pid).await,
            "process {name} ({pid}) outlived the call"
        );
    }
}

#[tokio::test]
async fn children_that_leave_the_group_end_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "setsid sleep 178 >/dev/null 2>&1 & echo $! > {}/a; sleep 30",
        dir.path().display()
    );
    let mut cfg = config("escaper_timeout", &script);
    cfg.timeout_secs = Some(1.0);
    let r = registry(cfg);
    let out = invoke(&r, "escaper_timeout", r#"{"city":"Paris"}"#).await;
    assert!(
        out.is_error && out.content.contains("timed out"),
        "{}",
        out.content
    );
    let pid = group_of(&dir.path().join("a"));
    assert!(
        !still_running(pid).await,
        "the session leader {pid} outlived the timeout"
    );
}

#[tokio::test]
async fn a_child_that_hides_from_the_sweep_still_ends_with_the_call() {
    // The child drops the call's tag from its environment (`env -u`), starts a session of
    // its own and makes itself non-dumpable, so neither the group kill nor the search by
    // tag can find it; the call's reaper adopts it once the command is gone.
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "setsid env -u BUDDY_SKILL_RUN python3 -c 'import ctypes, time; libc = ctypes.CDLL(None); \
         libc.prctl(4, 0, 0, 0, 0); open(\"{0}/dumpable\", \"w\").write(str(libc.prctl(3, 0, 0, 0, 0))); \
         time.sleep(179)' >/dev/null 2>&1 & echo $! > {0}/a; \
         while [ ! -s {0}/dumpable ]; do sleep 0.05; done; echo done",
        dir.path().display()
    );
    let r = registry(config("hider", &script));
    let out = invoke(&r, "hider", r#"{"city":"Paris"}"#).await;
    assert_eq!(
        (out.content.trim(), out.is_error),
        ("done", false),
        "{}",
        out.content
    );
    let dumpable = std::fs::read_to_string(dir.path().join("dumpable")).unwrap();
    assert_eq!(dumpable, "0", "the child made itself non-dumpable");
    let pid = group_of(&dir.path().join("a"));
    assert!(
        !still_running(pid).await,
        "the non-dumpable child {pid} in its own session outlived the call"
    );
}

#[tokio::test]
async fn a_child_that_hides_from_the_sweep_still_ends_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "setsid env -u BUDDY_SKILL_RUN python3 -c 'import ctypes, time; \
         ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); time.sleep(181)' >/dev/null 2>&1 & \
         echo $! > {}/a; sleep 30",
        dir.path().display()
    );
    let mut cfg = config("hider_timeout", &script);
    cfg.timeout_secs = Some(1.0);
    let r = registry(cfg);
    let out = invoke(&r, "hider_timeout", r#"{"city":"Paris"}"#).await;
    assert!(
        out.is_error && out.content.contains("timed out"),
        "{}",
        out.content
    );
    let pid = group_of(&dir.path().join("a"));
    assert!(
        !still_running(pid).await,
        "the hidden child {pid} outlived the timeout"
    );
}
