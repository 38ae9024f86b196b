//! The programs buddy starts cannot read its secrets: a command skill that reads
//! `/proc/<buddy>/environ` (its parent's) gets nothing, and its own environment is clean.
//! Run as root, the check runs buddy as `nobody` (root may read any process).

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

const SECRET: &str = "sk-proc-secret-7f3a9c";

/// `buddy ARGS` as this user, or as `nobody` when this is root.
fn buddy_unprivileged(cwd: &std::path::Path, args: &[&str]) -> Command {
    let root = rustix::process::getuid().is_root();
    let mut cmd = if root {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_buddy"));
        cmd
    } else {
        Command::new(env!("CARGO_BIN_EXE_buddy"))
    };
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", cwd)
        .env("OPENAI_API_KEY", SECRET)
        .env("NO_COLOR", "1");
    cmd
}

#[test]
fn a_command_skill_cannot_read_buddys_environment() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        r#"
[skills]
sandbox = "."
builtin = []
[[skills.command]]
name = "peek"
description = "Reads what it can of its parent."
command = ["sh", "-c", "exec 2>&1; tr '\\0' '\\n' < /proc/$PPID/environ; echo; env"]
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("peek.json"),
        r#"{"name": "peek", "prompt": "peek", "tools": [],
  "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
  "rules": [
    {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "peek", "arguments": {}}]}},
    {"when": {}, "reply": {"text": "Saw: {last_result}"}}]}"#,
    )
    .unwrap();
    for file in ["buddy.toml", "peek.json"] {
        std::fs::set_permissions(
            dir.path().join(file),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    }
    let out = buddy_unprivileged(dir.path(), &["run", "--json", "--scenario", "peek.json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The skill ran (and saw its own, clean environment)…
    assert!(stdout.contains("tool_call_result"), "{stdout}{stderr}");
    assert!(stdout.contains("BUDDY_SKILL=peek"), "{stdout}{stderr}");
    // …but not buddy's: reading its parent's environment is refused.
    assert!(stdout.contains("Permission denied"), "{stdout}{stderr}");
    assert!(!stdout.contains(SECRET), "the secret leaked: {stdout}");
}

/// A file key: what `ps` and `/proc/<buddy>/cmdline` must never show.
const SERVER_KEY: &str = "bk-file-key-4d91e2";

/// Starts `buddy serve ARGS` on a free loopback port in `dir`; its child process and address
/// once it says it serves, with what it printed before.
fn serve(dir: &std::path::Path, args: &[&str]) -> (std::process::Child, String, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_buddy"))
        .args(["serve", "--listen", "127.0.0.1:0", "--db", "buddy.db"])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    while let Some(Ok(line)) = lines.next() {
        said.push_str(&line);
        said.push('\n');
        if let Some(rest) = line.split("serving on http://").nth(1) {
            let addr = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
            // The rest of its stderr is drained so it never blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return (child, addr, said);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("buddy serve did not start: {said}");
}

/// The status code of `GET path` with `key`, over a plain socket.
fn status_of(addr: &str, path: &str, key: Option<&str>) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).into_owned()
}

#[test]
fn api_keys_from_a_file_stay_off_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys");
    std::fs::write(&file, format!("# the server's keys\n{SERVER_KEY}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (mut child, addr, said) = serve(dir.path(), &["--api-key-file", "keys"]);
    // What `ps` shows of buddy to every local user, skill and MCP server.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    let keyed = status_of(&addr, "/v1/models", Some(SERVER_KEY));
    let unkeyed = status_of(&addr, "/v1/models", None);
    let _ = child.kill();
    let _ = child.wait();
    assert!(cmdline.contains("--api-key-file keys"), "{cmdline}");
    assert!(
        !cmdline.contains(SERVER_KEY),
        "the key is on the command line: {cmdline}"
    );
    assert_eq!((keyed.as_str(), unkeyed.as_str()), ("200", "401"), "{said}");
    assert!(!said.contains("WARNING"), "{said}");
}

#[test]
fn a_key_on_the_command_line_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, said) = serve(dir.path(), &["--api-key", SERVER_KEY]);
    let keyed = status_of(&addr, "/v1/models", Some(SERVER_KEY));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(keyed, "200", "--api-key still works");
    assert!(
        said.contains("WARNING: --api-key puts the key on the command line")
            && said.contains("--api-key-file"),
        "{said}"
    );
}

/// What a program buddy starts reports of itself and tries on the processes named by its
/// arguments (buddy, and for a command skill its reaper) and on a file of buddy's user.
const PROBE: &str = r#"exec 2>&1
echo "uid=$(id -u)"
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status | tr '\t' ' '
for p in "$@"; do
  if env=$(tr '\0' ' ' < /proc/$p/environ); then echo "environ $p: READ $env"; else echo "environ $p: refused"; fi
  if (exec 3< /proc/$p/mem); then echo "mem $p: OPENED"; else echo "mem $p: refused"; fi
done
if secret=$(cat buddys-file); then echo "file: READ $secret"; else echo "file: refused"; fi
"#;

/// A stdio MCP server with one tool, `peek`, that runs the probe on its parent (buddy).
const MCP_SERVER: &str = r#"import json, os, subprocess, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "probe", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "peek", "description": "Peeks.", "inputSchema": {"type": "object"},
                             "annotations": {"readOnlyHint": True}}]}
    elif method == "tools/call":
        out = subprocess.run(["sh", "probe.sh", str(os.getppid())], capture_output=True, text=True).stdout
        result = {"content": [{"type": "text", "text": out}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

const FILE_SECRET: &str = "file-secret-0600-b7c1";

/// Runs, as root, a turn that calls a command skill and a stdio MCP server that both
/// probe buddy; `run_as` goes under `[skills]`. The two tool results.
fn probe_as_root(run_as: Option<&str>) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let run_as = run_as.map_or(String::new(), |r| format!("run_as = \"{r}\"\n"));
    let files = [
        ("probe.sh", PROBE.to_owned()),
        ("server.py", MCP_SERVER.to_owned()),
        (
            "buddy.toml",
            format!(
                r#"
[skills]
sandbox = "."
builtin = []
{run_as}
[[skills.command]]
name = "peek"
description = "Peeks at buddy."
command = ["sh", "-c", "exec sh probe.sh $PPID $(cut -d' ' -f4 /proc/$PPID/stat)"]

[[mcp]]
name = "probe"
command = ["python3", "server.py"]
cwd = "."
"#
            ),
        ),
        (
            "peek.json",
            r#"{"name": "peek", "prompt": "peek", "tools": [],
  "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 2},
  "rules": [
    {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "peek", "arguments": {}},
                                                      {"name": "probe__peek", "arguments": {}}]}},
    {"when": {}, "reply": {"text": "done"}}]}"#
                .to_owned(),
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
        std::fs::set_permissions(
            dir.path().join(name),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    }
    let file = dir.path().join("buddys-file");
    std::fs::write(&file, FILE_SECRET).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_buddy"))
        .args(["run", "--json", "--scenario", "peek.json"])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir.path())
        .env("OPENAI_API_KEY", SECRET)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let results: Vec<String> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["type"] == "tool_call_result")
        .map(|event| event.to_string())
        .collect();
    assert_eq!(results.len(), 2, "{stdout}{stderr}");
    let of = |tool: &str| {
        results
            .iter()
            .find(|r| r.contains(&format!("\"{tool}\"")))
            .cloned()
            .unwrap_or_else(|| panic!("no result of {tool}: {stdout}{stderr}"))
    };
    (of("peek"), of("probe__peek"))
}

/// The capability lines of a probe, every set empty, and `no_new_privs`.
fn assert_powerless(result: &str) {
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            result.contains(&format!("{set}: 0000000000000000")),
            "{set} is not empty: {result}"
        );
    }
    assert!(result.contains("NoNewPrivs: 1"), "{result}");
    assert!(
        !result.contains("READ") && !result.contains("OPENED"),
        "{result}"
    );
    assert!(!result.contains(SECRET), "buddy's secret leaked: {result}");
}

#[test]
fn a_root_buddys_programs_have_no_capabilities_and_cannot_read_its_secrets() {
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: needs root (the attack is on a root buddy)");
        return;
    }
    let (skill, mcp) = probe_as_root(None);
    for result in [&skill, &mcp] {
        assert!(result.contains("uid=0"), "{result}");
        // Without capabilities, as root: buddy's environment and memory are refused…
        let probed = result.replace("file: READ", "");
        assert_powerless(&probed);
        assert!(result.matches("environ").count() >= 1, "{result}");
    }
    // …the command skill's reaper (its parent) and buddy (its grandparent) both.
    assert_eq!(skill.matches("environ ").count(), 2, "{skill}");
}

#[test]
fn a_root_buddys_programs_run_as_run_as_and_cannot_read_its_files() {
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: needs root (the attack is on a root buddy)");
        return;
    }
    let (skill, mcp) = probe_as_root(Some("nobody"));
    for result in [&skill, &mcp] {
        assert!(result.contains("uid=65534"), "{result}");
        assert_powerless(result);
        assert!(result.contains("file: refused"), "{result}");
        assert!(!result.contains(FILE_SECRET), "{result}");
    }
}
