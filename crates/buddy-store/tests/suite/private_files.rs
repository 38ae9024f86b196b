//! The SQLite store is buddy's alone: the database, its `-wal` and `-shm` are created
//! 0600 (a directory buddy makes for it 0700), never opened through a planted symlink.

#![cfg(unix)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use buddy_store::SqliteStore;
use buddy_store::prelude::*;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

fn companion(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

#[tokio::test]
async fn the_store_and_its_journal_files_are_created_0600_in_a_0700_directory() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state/buddy.db");
    let store = SqliteStore::open(&db).unwrap();
    let id = store.create_conversation("k").await.unwrap();
    assert!(store.get_conversation(&id).await.unwrap().is_some());
    assert_eq!(mode(&dir.path().join("state")), 0o700);
    for path in [db.clone(), companion(&db, "-wal"), companion(&db, "-shm")] {
        assert!(path.exists(), "{}", path.display());
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
}

#[tokio::test]
async fn a_store_left_open_to_others_is_narrowed_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    drop(SqliteStore::open(&db).unwrap());
    // As an older buddy left it: readable by every local user.
    for path in [db.clone(), companion(&db, "-wal"), companion(&db, "-shm")] {
        if path.exists() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    let store = SqliteStore::open(&db).unwrap();
    store.create_conversation("k").await.unwrap();
    for path in [db.clone(), companion(&db, "-wal"), companion(&db, "-shm")] {
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
}

#[test]
fn a_planted_symlink_for_the_store_or_its_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::write(&theirs, b"").unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o666)).unwrap();
    let db = dir.path().join("buddy.db");
    symlink(&theirs, &db).unwrap();
    let error = SqliteStore::open(&db).err().unwrap().to_string();
    assert!(error.contains("symbolic link"), "{error}");

    let db = dir.path().join("other.db");
    symlink(&theirs, companion(&db, "-wal")).unwrap();
    let error = SqliteStore::open(&db).err().unwrap().to_string();
    assert!(
        error.contains("-wal") && error.contains("symbolic link"),
        "{error}"
    );
    assert_eq!(
        std::fs::read(&theirs).unwrap(),
        b"",
        "nothing written through"
    );
}
