//! Roots that keep what the user configured, with the real server-filesystem (npm):
//! it replaces the directories on its command line by the roots it is offered, a
//! moment after it starts. Each check waits until the server has asked for its roots.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_core::SkillError;
use buddy_mcp::{McpServerConfig, McpSource, Roots};
use serde_json::json;

use super::npm_server;

struct Dirs {
    _notes: tempfile::TempDir,
    _sandbox: tempfile::TempDir,
    notes: PathBuf,
    sandbox: PathBuf,
}

fn dirs() -> Dirs {
    let notes = tempfile::tempdir().unwrap();
    let sandbox = tempfile::tempdir().unwrap();
    let dirs = Dirs {
        notes: notes.path().canonicalize().unwrap(),
        sandbox: sandbox.path().canonicalize().unwrap(),
        _notes: notes,
        _sandbox: sandbox,
    };
    std::fs::write(dirs.notes.join("todo.md"), "buy oat milk").unwrap();
    dirs
}

/// server-filesystem started with `notes` on its command line, `sandbox` as buddy's
/// sandbox, and `roots`; started, and given time to ask for and take its roots.
async fn filesystem(dirs: &Dirs, roots: Roots) -> Arc<McpSource> {
    let mut config = McpServerConfig::stdio(
        "fs",
        &[
            &npm_server("mcp-server-filesystem"),
            &dirs.notes.display().to_string(),
        ],
    );
    config.sandbox = Some(dirs.sandbox.clone());
    let asks = roots != Roots::Off;
    config.roots = roots;
    let source = McpSource::new(config);
    source.start().await.unwrap();
    let started = Instant::now();
    while asks && source.roots_asked() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server never asked for its roots"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // It answers `roots/list` then validates and takes the directories.
    tokio::time::sleep(Duration::from_millis(500)).await;
    source
}

async fn allowed(source: &McpSource) -> String {
    source
        .call("list_allowed_directories", json!({}))
        .await
        .unwrap()
}

async fn read(source: &McpSource, path: &Path) -> Result<String, SkillError> {
    source
        .call(
            "read_text_file",
            json!({"path": path.display().to_string()}),
        )
        .await
}

#[tokio::test]
async fn the_directory_on_its_command_line_stays_allowed_after_it_takes_its_roots() {
    let dirs = dirs();
    let source = filesystem(&dirs, Roots::Auto).await;
    let offered: Vec<PathBuf> = source.roots().iter().map(|r| r.dir.clone()).collect();
    assert_eq!(offered, std::slice::from_ref(&dirs.notes));
    let listed = allowed(&source).await;
    assert!(
        listed.contains(&dirs.notes.display().to_string()),
        "{listed}"
    );
    assert!(
        !listed.contains(&dirs.sandbox.display().to_string()),
        "{listed}"
    );
    let text = read(&source, &dirs.notes.join("todo.md")).await.unwrap();
    assert!(text.contains("buy oat milk"), "{text}");
}

/// What issue 58 saw, kept as a choice: `roots = "sandbox"` replaces the configured
/// directory (so the check above can fail), and `roots = "none"` offers nothing.
#[tokio::test]
async fn sandbox_replaces_the_directory_and_none_offers_nothing() {
    let dirs = dirs();
    let source = filesystem(&dirs, Roots::Sandbox).await;
    let listed = allowed(&source).await;
    assert!(
        listed.contains(&dirs.sandbox.display().to_string()),
        "{listed}"
    );
    assert!(
        !listed.contains(&dirs.notes.display().to_string()),
        "{listed}"
    );
    let denied = read(&source, &dirs.notes.join("todo.md")).await;
    assert!(denied.is_err(), "{denied:?}");

    let source = filesystem(&dirs, Roots::Off).await;
    assert_eq!(
        source.roots_asked(),
        0,
        "no roots capability, no roots/list"
    );
    let listed = allowed(&source).await;
    assert!(
        listed.contains(&dirs.notes.display().to_string()),
        "{listed}"
    );
    assert!(read(&source, &dirs.notes.join("todo.md")).await.is_ok());

    // A list of directories: those, whatever the command line says.
    let other = tempfile::tempdir().unwrap();
    let other = other.path().canonicalize().unwrap();
    let source = filesystem(&dirs, Roots::Dirs(vec![other.clone()])).await;
    let listed = allowed(&source).await;
    assert!(listed.contains(&other.display().to_string()), "{listed}");
    assert!(
        !listed.contains(&dirs.notes.display().to_string()),
        "{listed}"
    );
}
