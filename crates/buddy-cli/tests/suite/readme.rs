//! The `buddy …` command lines of the README and of the book (`docs/**/*.md`) that run
//! offline are run, so the documentation cannot drift from the binary: each must be a
//! valid command line (no usage or config error, exit 2) in a fresh directory beside the
//! repository's `scenarios/`. Lines that need a model server, a running server, a
//! terminal or files of the reader's are left out, by rule (below), not by a list.

use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).to_path_buf()
}

/// Every Markdown page of the documentation, as (path from the root, text): README.md,
/// then every `docs/**/*.md` in path order.
pub(super) fn documentation() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut pages = Vec::new();
    walk(&root.join("docs"), &mut pages);
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
        .into_iter()
        .map(|path| {
            let name = path.strip_prefix(&root).unwrap().display().to_string();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect()
}

/// Every `buddy …` line of a page's shell blocks, comments and redirections cut.
fn shell_commands(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_shell = false;
    for line in page.lines() {
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

/// Every `buddy …` shell line of the documentation, once each, with the first page that
/// has it.
fn documented_commands() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (page, text) in documentation() {
        for command in shell_commands(&text) {
            if !out.iter().any(|(_, c)| *c == command) {
                out.push((page.clone(), command));
            }
        }
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
fn every_offline_command_line_of_the_readme_and_the_book_is_one_buddy_takes() {
    let commands = documented_commands();
    assert!(commands.len() >= 30, "{commands:?}");
    let scenarios = super::scenarios_dir().canonicalize().unwrap();
    let mut ran = 0;
    let mut pages = std::collections::BTreeSet::new();
    for (page, command) in &commands {
        if offline_skip(command).is_some() {
            continue;
        }
        let out = run(command, &scenarios);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(
            out.status.code(),
            Some(2),
            "{page}: `buddy {command}` is refused:\n{stderr}"
        );
        assert!(
            out.status.code().is_some(),
            "{page}: `buddy {command}` died: {stderr}"
        );
        eprintln!("{page}: ran buddy {command} (exit {:?})", out.status.code());
        ran += 1;
        pages.insert(page.as_str());
    }
    // run (3), demo, --help, init, completions, man at least; the README and the book.
    assert!(ran >= 12, "only {ran} lines ran: {commands:?}");
    assert!(pages.contains("README.md"), "{pages:?}");
    assert!(pages.iter().any(|p| p.starts_with("docs/")), "{pages:?}");
}

/// The rules that pick the shell lines: only `sh`/`bash` blocks, comments, pipes,
/// redirections and optional `[parts]` cut; other blocks and prose left alone.
#[test]
fn shell_lines_are_taken_from_shell_blocks_only() {
    let page = "Run `buddy run x` in prose.\n\
        ```sh\n\
        buddy run --scenario a   # a comment\n\
        buddy demo [--dir d] --json | head -1\n\
        cargo build\n\
        buddy man > buddy.1 && man ./buddy.1\n\
        ```\n\
        ```console\n\
        buddy run --scenario not-a-shell-block\n\
        ```\n\
        ```\n\
        buddy run --scenario output\n\
        ```\n";
    assert_eq!(
        shell_commands(page),
        ["run --scenario a", "demo  --json", "man"]
    );
    assert!(shell_commands("no blocks at all").is_empty());
}

/// The shell lines that install the bash completions (in the README, and wherever the
/// book repeats them) work as written on a fresh account, where
/// `~/.local/share/bash-completion/completions` does not exist yet.
#[test]
fn the_documented_completions_install_works_in_a_fresh_home() {
    let pages = documentation();
    let (page, text) = pages
        .iter()
        .find(|(_, text)| text.contains("buddy completions bash >"))
        .expect("no page installs the completions");
    let lines: Vec<&str> = text
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
        "{page}: {lines:?} fails on a fresh HOME: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = std::fs::read_to_string(
        home.path()
            .join(".local/share/bash-completion/completions/buddy"),
    )
    .unwrap();
    assert!(script.contains("complete"), "{script}");
}

/// The "Clients tested" table (in the book's server guide, or wherever it moves) names
/// the versions the suite installs: the pins of `scripts/test.sh` (PyPI) and
/// `clients/node/package-lock.json` (npm).
#[test]
fn the_tested_client_versions_are_the_pinned_ones() {
    let root = root();
    let pages = documentation();
    let (page, text) = pages
        .iter()
        .find(|(_, text)| text.lines().any(|l| l.starts_with("**Clients tested**")))
        .expect("no page has the \"Clients tested\" table");
    let table: String = text
        .lines()
        .skip_while(|l| !l.starts_with("**Clients tested**"))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        table.contains("LangChain"),
        "{page}: no clients table: {table}"
    );
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
            "{page}: the clients table lacks {name} {version}:\n{table}"
        );
    }
}
