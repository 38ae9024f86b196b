//! The README's `buddy …` command lines that run offline are run, so the README cannot
//! drift from the binary: each must be a valid command line (no usage or config error,
//! exit 2) in a fresh directory beside the repository's `scenarios/`. Lines that need a
//! model server, a running server, a terminal or files of the reader's are left out, by
//! rule (below), not by a list.

use std::path::Path;
use std::process::Stdio;

/// Every `buddy …` line of the README's shell blocks, comments and redirections cut.
fn readme_commands() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let mut out = Vec::new();
    let mut in_shell = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_shell = !in_shell && (line == "```sh" || line == "```bash");
            continue;
        }
        if !in_shell {
            continue;
        }
        let Some(command) = line.trim().strip_prefix("buddy ") else {
            continue;
        };
        // Cut a trailing comment, a redirection or a pipe, and optional [parts].
        let mut command = command
            .split(" #")
            .next()
            .unwrap_or_default()
            .split(['>', '|'])
            .next()
            .unwrap_or_default()
            .split("&&")
            .next()
            .unwrap_or_default()
            .to_owned();
        while let (Some(a), Some(b)) = (command.find('['), command.find(']')) {
            if b < a {
                break;
            }
            command.replace_range(a..=b, "");
        }
        out.push(command.trim().to_owned());
    }
    out
}

/// Why a line cannot run here, if it cannot.
fn offline_skip(command: &str) -> Option<&'static str> {
    let first = command.split_whitespace().next().unwrap_or_default();
    if command.contains("--provider") || command.contains("--base-url") {
        return Some("calls a model server");
    }
    match first {
        "serve" | "mock-server" => Some("runs until stopped"),
        "chat" => Some("needs a terminal"),
        "bench" => Some("a benchmark (minutes)"),
        "replay" | "mcp" => Some("needs the reader's stored turns or servers"),
        "judge" => Some("needs the reader's recorded runs (tests/suite/judge.rs runs its own)"),
        _ if command.contains('…') || command.contains('$') => Some("a placeholder"),
        _ => None,
    }
}

fn run(command: &str, scenarios: &Path) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(scenarios, dir.path().join("scenarios")).unwrap();
    let mut args = Vec::new();
    // Quoted arguments ("What time is it?") stay whole.
    let mut rest = command;
    while !rest.is_empty() {
        rest = rest.trim_start();
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            args.push(quoted[..end].to_owned());
            rest = quoted.get(end + 1..).unwrap_or_default();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            args.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    super::buddy(dir.path())
        .args(args.iter().filter(|a| !a.is_empty()))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn every_offline_readme_command_line_is_one_buddy_takes() {
    let commands = readme_commands();
    assert!(commands.len() >= 20, "{commands:?}");
    let scenarios = super::scenarios_dir().canonicalize().unwrap();
    let mut ran = 0;
    for command in &commands {
        if offline_skip(command).is_some() {
            continue;
        }
        let out = run(command, &scenarios);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(
            out.status.code(),
            Some(2),
            "README: `buddy {command}` is refused:\n{stderr}"
        );
        assert!(
            out.status.code().is_some(),
            "README: `buddy {command}` died: {stderr}"
        );
        eprintln!(
            "README line ran: buddy {command} (exit {:?})",
            out.status.code()
        );
        ran += 1;
    }
    // run (3), demo, --help, init, completions, man at least.
    assert!(ran >= 8, "only {ran} README lines ran: {commands:?}");
}

/// The README's shell lines that install the bash completions work as written on a fresh
/// account, where `~/.local/share/bash-completion/completions` does not exist yet.
#[test]
fn the_readme_completions_install_works_in_a_fresh_home() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let lines: Vec<&str> = readme
        .lines()
        .filter(|l| l.contains("~/.local/share/bash-completion/completions"))
        .map(|l| l.split(" #").next().unwrap_or_default().trim())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("buddy completions bash")),
        "{lines:?}"
    );
    let home = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_buddy")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg("-ec")
        .arg(lines.join("\n"))
        .env("HOME", home.path())
        .env("PATH", path)
        .current_dir(home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "README: {lines:?} fails on a fresh HOME: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = std::fs::read_to_string(
        home.path()
            .join(".local/share/bash-completion/completions/buddy"),
    )
    .unwrap();
    assert!(script.contains("complete"), "{script}");
}

/// The README's "Clients tested" table names the versions the suite installs: the pins
/// of `scripts/test.sh` (PyPI) and `clients/node/package-lock.json` (npm).
#[test]
fn the_tested_client_versions_are_the_pinned_ones() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let table: String = readme
        .lines()
        .skip_while(|l| !l.starts_with("**Clients tested**"))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(table.contains("LangChain"), "no clients table: {table}");
    let script = std::fs::read_to_string(root.join("scripts/test.sh")).unwrap();
    let mut pins: Vec<(String, String)> = script
        .split('\'')
        .filter_map(|quoted| quoted.split_once("=="))
        .filter(|(name, version)| {
            let word = |s: &str, extra: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
            };
            word(name, "-_.") && word(version, ".")
        })
        .map(|(name, version)| (name.to_owned(), version.to_owned()))
        .collect();
    assert!(pins.len() >= 4, "{pins:?}");
    let lock: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("clients/node/package-lock.json")).unwrap(),
    )
    .unwrap();
    for name in ["openai", "ai", "@ai-sdk/openai"] {
        let version = lock["packages"][format!("node_modules/{name}")]["version"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} is not in clients/node/package-lock.json"));
        pins.push((name.to_owned(), version.to_owned()));
    }
    for (name, version) in &pins {
        assert!(
            table.lines().any(|row| row.contains(version.as_str())),
            "README's clients table lacks {name} {version}:\n{table}"
        );
    }
}
