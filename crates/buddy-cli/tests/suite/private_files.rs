//! Files only buddy reads (issue 60, items 3 and 7): the store a server writes, with its
//! `-wal` and `-shm`, is 0600 while it runs (another local user — a command skill run as
//! `nobody` — cannot read a key's messages from it); `buddy doctor` names private files
//! others may read; a store password on the command line is warned about, and
//! `$BUDDY_STORE` or `--store-file` keep it off it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::json;

use super::buddy;
use super::crash::spawn_server;
use super::server::{all_scenarios, chat};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn with_suffix(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_store_a_server_writes_is_unreadable_to_other_users() {
    let dir = tempfile::tempdir().unwrap();
    // A directory every user may enter, as a shared data directory is.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.path().join("buddy.db");
    let scenarios = all_scenarios();
    let (mut server, url) = spawn_server(&db, scenarios.path(), dir.path(), &[]);
    let (status, body) = chat(
        &url,
        json!({"message": "my password is hunter2", "model": "scripted:chain_3_steps"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let files = [
        db.clone(),
        with_suffix(&db, "-wal"),
        with_suffix(&db, "-shm"),
    ];
    for file in &files {
        assert_eq!(
            mode(file),
            0o600,
            "{} while the server runs",
            file.display()
        );
    }
    if rustix::process::getuid().is_root() {
        // The attack as it was seen: another user reads the store's pages.
        for file in &files {
            let out = Command::new("setpriv")
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "--",
                    "cat",
                ])
                .arg(file)
                .output()
                .unwrap();
            assert!(!out.status.success(), "nobody read {}", file.display());
        }
    }
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn doctor_names_private_files_other_users_may_read() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::create_dir(&tokens).unwrap();
    let token = tokens.join("docs.json");
    std::fs::write(&token, "{}").unwrap();
    let db = dir.path().join("buddy.db");
    std::fs::write(&db, "").unwrap();
    let chmod = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    chmod(&db, 0o644);
    chmod(&tokens, 0o755);
    chmod(&token, 0o644);
    let doctor = || {
        let out = buddy(dir.path())
            .arg("doctor")
            .env("BUDDY_MCP_TOKENS", &tokens)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, stdout) = doctor();
    assert_eq!(code, Some(1), "{stdout}");
    for line in [
        "buddy.db (the conversation store) is open to other users (mode 644): chmod 600 it"
            .to_owned(),
        format!(
            "{} (the MCP OAuth token directory) is open to other users (mode 755): chmod 700 it",
            tokens.display()
        ),
        format!(
            "{} (MCP OAuth tokens) is open to other users (mode 644): chmod 600 it",
            token.display()
        ),
    ] {
        assert!(stdout.contains(&line), "{line}\n{stdout}");
    }
    chmod(&db, 0o600);
    chmod(&tokens, 0o700);
    chmod(&token, 0o600);
    let (code, stdout) = doctor();
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains(
            "files     the store and the tokens it keeps are readable by buddy's user only"
        ),
        "{stdout}"
    );
}

#[test]
fn a_store_password_on_the_command_line_is_warned_and_not_from_a_file_or_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    // A URL that fails at once (an sslmode no server has), after the warning would be said.
    let url = "postgres://buddy:s3cret@127.0.0.1:1/buddy?sslmode=bogus";
    let file = dir.path().join("store-url");
    std::fs::write(&file, format!("# the store\n{url}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let stderr_of = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "the store does not open");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let warned = "--store puts the database password on the command line";
    for command in [
        vec!["serve", "--listen", "127.0.0.1:0", "--store", url],
        vec!["replay", "--all", "--store", url],
    ] {
        let said = stderr_of(buddy(dir.path()).args(&command));
        assert!(said.contains(warned), "{command:?}: {said}");
        assert!(said.contains("$BUDDY_STORE or --store-file FILE"), "{said}");
        let quiet = stderr_of(
            buddy(dir.path())
                .args(&command[..command.len() - 2])
                .env("BUDDY_STORE", url),
        );
        assert!(
            !quiet.contains(warned),
            "{command:?} with $BUDDY_STORE: {quiet}"
        );
        let from_file = stderr_of(
            buddy(dir.path())
                .args(&command[..command.len() - 2])
                .arg("--store-file")
                .arg(&file),
        );
        assert!(
            !from_file.contains(warned),
            "{command:?} --store-file: {from_file}"
        );
        assert!(
            from_file.contains("PostgreSQL"),
            "the file's URL was used: {from_file}"
        );
    }
    // Without a password there is nothing to warn about.
    let said = stderr_of(buddy(dir.path()).args([
        "replay",
        "--all",
        "--store",
        "postgres://buddy@127.0.0.1:1/buddy?sslmode=bogus",
    ]));
    assert!(!said.contains(warned), "{said}");
}
