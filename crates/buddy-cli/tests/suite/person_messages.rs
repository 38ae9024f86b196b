//! Messages a person reads (issue 58, item 7): the man page's NAME line in plain words,
//! provider kinds named as their makers write them, `buddy init --local` against buddy's
//! own server, `buddy doctor` on `[[agents]]`, and the startup lines naming the sandbox.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use super::buddy;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_man_pages_name_line_is_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let out = buddy(dir.path()).arg("man").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = text(&out.stdout);
    let name = page
        .lines()
        .skip_while(|l| *l != ".SH NAME")
        .nth(1)
        .unwrap_or_default();
    assert!(name.starts_with("buddy \\- an LLM agent runtime"), "{name}");
    assert!(!name.contains('`'), "{name}");
}

#[test]
fn a_provider_kind_is_named_as_its_maker_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "default_provider = \"work\"\n[providers.work]\nkind = \"openai\"\nmodel = \"gpt-4o-mini\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let out = buddy(dir.path())
        .args(["run", "--scenario", "plain_chat"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the OpenAI provider `work`"), "{stderr}");
    assert!(!stderr.contains("Openai"), "{stderr}");
}

/// Against buddy's own server (`buddy serve` or `mock-server` list their scenarios by
/// name, loop demos first), `init --local` writes buddy's scripted assistant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_against_buddys_own_server_takes_its_assistant_not_a_loop_demo() {
    let dir = tempfile::tempdir().unwrap();
    let listed = serde_json::json!({"object": "list", "data": [
        {"id": "scripted:ab_cycle", "object": "model", "owned_by": "buddy-mock"},
        {"id": "scripted:answer_plus_call", "object": "model", "owned_by": "buddy-mock"},
        {"id": "scripted:offline_assistant", "object": "model", "owned_by": "buddy-mock"}]});
    let models =
        buddy_testkit::MockServer::always(buddy_testkit::MockResponse::json(200, &listed)).await;
    let local = format!("{}/v1", models.url());
    let path = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        buddy(&path)
            .args(["init", "--local", &local])
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(dir.path().join("buddy.toml")).unwrap();
    assert!(
        written.contains("model = \"scripted:offline_assistant\""),
        "{written}"
    );
}

#[test]
fn doctor_checks_every_declared_agent() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[providers.small]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"small-1\"\n\n\
         [skills]\nbuiltin = [\"read_file\", \"list_dir\"]\n\n\
         [[agents]]\nname = \"reader\"\ndescription = \"Reads files.\"\nskills = [\"read_*\"]\n\n\
         [[agents]]\nname = \"lead\"\ndescription = \"Hands out work.\"\nagents = [\"reader\", \"ghost\"]\n\
         skills = [\"grep\"]\nprovider = \"small\"\n\n\
         [[agents]]\nname = \"greedy\"\ndescription = \"Asks much.\"\nhistory = 1000\n",
    )
    .unwrap();
    let out = buddy(dir.path()).arg("doctor").output().unwrap();
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}{}", text(&out.stderr));
    assert!(said.contains("agents    reader: ok"), "{said}");
    for problem in [
        "agents    lead: ✗ agent `lead` runs on provider `small` without a `model`",
        "`model = \"small-1\"`, the provider's",
        "agents    lead: ✗ agent `lead` may use `grep`, which names no skill or tool here (there are read_file, list_dir)",
        "agents    lead: ✗ agent `lead` lists agent `ghost`, which is not declared",
        "agents    greedy: ✗ agent `greedy` asks for 1000 history messages",
    ] {
        assert!(said.contains(problem), "{problem}: {said}");
    }
}

#[test]
fn serve_and_an_attended_run_name_the_sandbox_when_they_start() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = dir.path().join("work");
    std::fs::create_dir(&sandbox).unwrap();
    let mut child = buddy(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--sandbox", "work"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert!(line.contains("serving on"), "{line}");
    assert!(line.contains(", sandbox "), "{line}");
    assert!(line.trim_end().ends_with("work)"), "{line}");

    let (code, shown) = super::approvals::on_terminal(
        dir.path(),
        &[],
        &["run", "--sandbox", "work", "What time is it?"],
    );
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("buddy run — model scripted"), "{shown}");
    assert!(shown.contains("work"), "{shown}");
    // Piped, a run says nothing before its answer.
    let out = buddy(dir.path())
        .args(["run", "--sandbox", "work", "What time is it?"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !text(&out.stderr).contains("buddy run —"),
        "{}",
        text(&out.stderr)
    );
}
