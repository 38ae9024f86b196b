//! `[[mcp]]` in buddy.toml: `buddy mcp list`, and a turn of `buddy run` using a tool of
//! the real `mcp-server-time` (installed, pinned, by scripts/test.sh).

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

fn time_server() -> String {
    let path = std::env::var_os("BUDDY_MCP_TIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/mcp-venv/bin/mcp-server-time"
            ))
        });
    assert!(
        path.exists(),
        "{} is missing: run scripts/test.sh (or scripts/mcp-servers.sh), or set BUDDY_MCP_TIME",
        path.display()
    );
    path.display().to_string()
}

fn buddy(dir: &Path, args: &[&str]) -> Output {
    super::buddy(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn config(dir: &Path, extra: &str) {
    let text = format!(
        "[[mcp]]\nname = \"time\"\ncommand = [{:?}]\n{extra}",
        time_server()
    );
    std::fs::write(dir.join("buddy.toml"), text).unwrap();
}

#[test]
fn mcp_list_shows_each_server_its_state_and_tools() {
    let dir = tempfile::tempdir().unwrap();
    config(
        dir.path(),
        "\n[[mcp]]\nname = \"ghost\"\ncommand = [\"/no/such/server\"]\n\n[approval.skills]\n\"time__convert_time\" = \"always\"\n",
    );
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "one server is down: {stdout}");
    assert!(stdout.contains("running: mcp-time"), "{stdout}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name}: {stdout}"))
            .to_owned()
    };
    assert!(line("time__get_current_time").contains("runs without asking"));
    assert!(line("time__convert_time").contains("asks first"));
    assert!(stdout.contains("ghost"), "{stdout}");
    assert!(
        stdout.contains("not available") && stdout.contains("/no/such/server"),
        "{stdout}"
    );
}

#[test]
fn a_run_calls_a_tool_of_a_configured_mcp_server() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "");
    let scenario = r#"{"name": "clock", "prompt": "time?", "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
      "rules": [
        {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]}},
        {"when": {}, "reply": {"text": "Now: {last_result}"}}]}"#;
    std::fs::write(dir.path().join("clock.json"), scenario).unwrap();
    let out = buddy(dir.path(), &["run", "--scenario", "clock.json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("Now: "), "{stdout}");
    let result = stderr
        .lines()
        .find(|l| l.starts_with("← time__get_current_time"))
        .unwrap_or_else(|| panic!("no result line: {stderr}"));
    assert!(result.contains("\"timezone\": \"UTC\""), "{result}");
}

#[test]
fn a_bad_mcp_entry_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[[mcp]]\nname = \"x\"\ncommand = [\"a\"]\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("both `command` and `url`"), "{stderr}");
}

/// A Claude Desktop configuration with two servers: `mcp_import` takes both into
/// buddy (their tools listed by `buddy mcp list`), and `buddy mcp import` prints them as
/// `[[mcp]]` entries that buddy.toml accepts as they are.
#[test]
fn servers_come_from_a_claude_desktop_config() {
    let dir = tempfile::tempdir().unwrap();
    let claude = serde_json::json!({"mcpServers": {
        "time": {"command": time_server(), "args": []},
        "clock": {"command": time_server(), "args": ["--local-timezone", "Europe/Paris"],
                  "env": {"TZ": "Europe/Paris"}},
    }});
    std::fs::write(
        dir.path().join("claude_desktop_config.json"),
        claude.to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "mcp_import = [\"claude_desktop_config.json\"]\n",
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for tool in ["time__get_current_time", "clock__get_current_time"] {
        assert!(stdout.contains(tool), "{tool} missing:\n{stdout}");
    }
    assert!(stdout.contains("--local-timezone Europe/Paris"), "{stdout}");

    let out = buddy(dir.path(), &["mcp", "import", "claude_desktop_config.json"]);
    let toml = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{toml}");
    assert_eq!(toml.matches("[[mcp]]").count(), 2, "{toml}");
    std::fs::write(dir.path().join("buddy.toml"), &toml).unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The same server in both places is refused by name.
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!("mcp_import = [\"claude_desktop_config.json\"]\n{toml}"),
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("also an [[mcp]] entry"), "{stderr}");
}

/// A Claude Desktop file as people have it, where the README says it is
/// (`~/.config/Claude/…`): stdio servers with `command`, `args` and `env`, a legacy SSE
/// server and a Streamable HTTP one. `~` is the home directory; the SSE server is
/// skipped, named with the reason, by `mcp list`, `mcp import`, `doctor` and a warning of
/// `run`; every other server comes in.
#[test]
fn a_real_claude_desktop_file_imports_all_but_what_buddy_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let claude_dir = home.path().join(".config/Claude");
    std::fs::create_dir_all(&claude_dir).unwrap();
    let claude = serde_json::json!({
        "globalShortcut": "",
        "mcpServers": {
            "time": {"command": time_server(), "args": ["--local-timezone", "Europe/Paris"],
                     "env": {"TZ": "Europe/Paris"}},
            "linear": {"type": "sse", "url": "https://mcp.linear.app/sse"},
            "remote": {"type": "http", "url": "http://127.0.0.1:1/mcp",
                       "headers": {"X-Team": "docs"}},
            "old": {"command": "npx", "args": ["-y", "retired-server"], "disabled": true},
        }
    });
    let file = claude_dir.join("claude_desktop_config.json");
    std::fs::write(&file, serde_json::to_string_pretty(&claude).unwrap()).unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "mcp_import = [\"~/.config/Claude/claude_desktop_config.json\"]\n",
    )
    .unwrap();
    let with_home = |args: &[&str]| {
        super::buddy(dir.path())
            .args(args)
            .env("HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let sse_reason = "it uses the legacy SSE transport";

    let out = with_home(&["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // `remote` is imported and tried (nothing listens on port 1), so it is not available.
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("time__get_current_time"), "{stdout}");
    assert!(stdout.contains("--local-timezone Europe/Paris"), "{stdout}");
    assert!(
        stdout.contains("remote  (http://127.0.0.1:1/mcp)\n  not available"),
        "{stdout}"
    );
    let shown = file.display().to_string();
    assert!(
        stdout.contains(&format!("linear  (from {shown})\n  skipped: {sse_reason}")),
        "{stdout}"
    );
    assert!(
        !stdout.lines().any(|line| line.starts_with("old ")),
        "a disabled server is left out: {stdout}"
    );

    let out = with_home(&[
        "mcp",
        "import",
        "~/.config/Claude/claude_desktop_config.json",
    ]);
    let toml = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(toml.matches("[[mcp]]").count(), 2, "{toml}");
    assert!(
        toml.contains("name = \"remote\"") && toml.contains("name = \"time\""),
        "{toml}"
    );
    assert!(
        stderr.contains(&format!("buddy: skipped `linear`: {sse_reason}")),
        "{stderr}"
    );

    let out = with_home(&["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "mcp       linear: skipped (from {shown}): {sse_reason}"
        )),
        "{stdout}"
    );

    // A turn starts every imported server: without the unreachable one it runs, warning
    // about the skipped one.
    let mut claude = claude;
    claude["mcpServers"]
        .as_object_mut()
        .unwrap()
        .remove("remote");
    std::fs::write(&file, claude.to_string()).unwrap();
    let out = with_home(&["run", "What time is it?"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "buddy: warning: MCP server `linear` of {shown} is skipped: {sse_reason}"
        )),
        "{stderr}"
    );
}

/// Two imported files with a server of the same name: the first file's is used, the
/// second's skipped with the reason (a `[[mcp]]` entry of that name stays an error).
#[test]
fn a_server_two_imported_files_name_is_taken_from_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let server = serde_json::json!({"mcpServers": {"time": {"command": time_server()}}});
    std::fs::write(dir.path().join("claude.json"), server.to_string()).unwrap();
    std::fs::write(dir.path().join("cursor.json"), server.to_string()).unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "mcp_import = [\"claude.json\", \"cursor.json\"]\n",
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(
        stdout.matches("time__get_current_time").count(),
        1,
        "{stdout}"
    );
    assert!(
        stdout.contains("cursor.json)\n  skipped: an earlier mcp_import file"),
        "{stdout}"
    );
}

/// `command` may name the program alone, with `args`, as MCP clients write it.
#[test]
fn command_and_args_work_in_buddy_toml() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            "[[mcp]]\nname = \"time\"\ncommand = {:?}\nargs = [\"--local-timezone\", \"UTC\"]\n",
            time_server()
        ),
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("time__get_current_time"), "{stdout}");
}

/// `buddy doctor` starts every `[[mcp]]` server: a good one is listed with its tools, one
/// that exits at once is named with what it printed, and the exit code says so.
#[test]
fn doctor_checks_every_mcp_server_and_quotes_a_failing_ones_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            "[[mcp]]\nname = \"broken\"\ncommand = [\"sh\", \"-c\", \"echo 'ModuleNotFoundError: no module named mcp_thing' >&2; exit 3\"]\n\n\
             [[mcp]]\nname = \"time\"\ncommand = [{:?}]\n",
            time_server()
        ),
    )
    .unwrap();
    let out = buddy(dir.path(), &["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let broken = stdout
        .lines()
        .find(|l| l.contains("broken:"))
        .unwrap_or_default();
    assert!(
        broken.contains("failed to start") && broken.contains("no module named mcp_thing"),
        "{stdout}"
    );
    assert!(
        !broken.contains("within"),
        "an exit is not a timeout: {broken}"
    );
    assert!(
        stdout.contains("time: ok, 2 tool(s): time__get_current_time"),
        "{stdout}"
    );
}

/// server-everything (npm, installed pinned by scripts/test.sh) as an `[[mcp]]` entry.
fn everything_config(dir: &Path) {
    let modules = std::env::var_os("BUDDY_MCP_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../clients/mcp/node_modules"
            ))
        });
    let server = modules.join(".bin/mcp-server-everything");
    assert!(
        server.exists(),
        "{} is missing: run scripts/test.sh (or scripts/mcp-servers.sh)",
        server.display()
    );
    let text = format!(
        "[[mcp]]\nname = \"e\"\ncommand = [{:?}, \"stdio\"]\n",
        server.display().to_string()
    );
    std::fs::write(dir.join("buddy.toml"), text).unwrap();
}

#[test]
fn a_servers_resources_and_prompts_are_listed_read_and_filled_in() {
    let dir = tempfile::tempdir().unwrap();
    everything_config(dir.path());
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("e__read_resource"), "{stdout}");
    assert!(
        stdout.contains("resource(s): `buddy mcp read e URI`")
            && stdout.contains("demo://resource/static/document/architecture.md"),
        "{stdout}"
    );
    assert!(
        stdout.contains("prompt(s): `buddy mcp prompt e NAME [ARG=VALUE…]`")
            && stdout.contains("args-prompt city [state]"),
        "{stdout}"
    );

    let out = buddy(
        dir.path(),
        &[
            "mcp",
            "read",
            "e",
            "demo://resource/static/document/architecture.md",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.len() > 100, "{text}");

    let out = buddy(
        dir.path(),
        &["mcp", "prompt", "e", "args-prompt", "city=Lyon"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("Lyon"), "{text}");

    let out = buddy(dir.path(), &["mcp", "prompt", "nobody", "x"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr.contains("no [[mcp]] server `nobody`"), "{stderr}");
}

/// A stdio server whose `signup` asks for a name over `input_required` and answers
/// with what came back.
const ASKING: &str = r#"
import json, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "asking", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "signup", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and "inputResponses" not in params:
        send({"jsonrpc": "2.0", "id": mid, "result": {"resultType": "input_required",
              "inputRequests": {"who": {"method": "elicitation/create", "params": {"mode": "form",
                  "message": "Who signs up?", "requestedSchema": {"type": "object",
                  "properties": {"name": {"type": "string", "default": "Ada"}}, "required": ["name"]}}}}}})
    elif method == "tools/call":
        got = json.dumps(params["inputResponses"]["who"], sort_keys=True)
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "got " + got}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"#;

/// The asking server and its scenario in `dir`.
fn signup(dir: &Path) {
    std::fs::write(dir.join("asking.py"), ASKING).unwrap();
    std::fs::write(
        dir.join("buddy.toml"),
        "[[mcp]]\nname = \"asking\"\ncommand = [\"python3\", \"asking.py\"]\n",
    )
    .unwrap();
    let scenario = r#"{"name": "signup", "prompt": "sign me up", "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
      "rules": [
        {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "asking__signup", "arguments": {}}]}},
        {"when": {}, "reply": {"text": "Result: {last_result}"}}]}"#;
    std::fs::write(dir.join("signup.json"), scenario).unwrap();
}

/// At a terminal the person fills the form in; Ctrl-C while it is asked cancels the
/// turn at once (nothing waits for Enter).
#[test]
fn at_a_terminal_the_form_is_answered_and_ctrl_c_cancels_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    signup(dir.path());
    let args = ["run", "--scenario", "signup.json", "--approval", "never"];
    let (code, text) = super::approvals::on_terminal(
        dir.path(),
        &[
            ("[a]nswer / [d]ecline / [c]ancel: ", "a\r"),
            ("> ", "Grace\r"),
        ],
        &args,
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("MCP server `asking` asks: Who signs up?"),
        "{text}"
    );
    assert!(
        text.contains(r#"Result: got {"action": "accept", "content": {"name": "Grace"}}"#),
        "{text}"
    );

    let (code, text) = super::approvals::on_terminal(
        dir.path(),
        &[("[a]nswer / [d]ecline / [c]ancel: ", "\u{3}")],
        &args,
    );
    assert_eq!(code, Some(130), "cancelled: {text}");
    assert!(!text.contains("Result: got"), "{text}");
}

/// Piped or scripted, nobody can answer a server's question: the policy declines it
/// (or cancels it, or takes the form's defaults, when told so), and the server hears that.
#[test]
fn an_unattended_run_declines_a_servers_question() {
    let dir = tempfile::tempdir().unwrap();
    signup(dir.path());
    for (extra, expected) in [
        (&[][..], r#"Result: got {"action": "decline"}"#),
        (
            &["--policy", "unattended_elicitation=cancel"][..],
            r#"Result: got {"action": "cancel"}"#,
        ),
        (
            &["--policy", "unattended_elicitation=defaults"][..],
            r#"Result: got {"action": "accept", "content": {"name": "Ada"}}"#,
        ),
    ] {
        let mut args = vec!["run", "--scenario", "signup.json"];
        args.extend_from_slice(&["--approval", "never"]);
        args.extend_from_slice(extra);
        let out = buddy(dir.path(), &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
        assert_eq!(stdout.trim_end(), expected, "{stderr}");
    }
}
