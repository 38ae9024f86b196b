#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[cfg(unix)]
mod on_unix {
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::Path;

    use crate::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_new_file_is_0600_and_new_directories_0700() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        create_private_dirs(&nested).unwrap();
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        let file = nested.join("store.db");
        let opened = open_private(&file).unwrap();
        assert!(opened.created);
        assert_eq!(mode(&file), 0o600);
        assert_eq!(open_to_others(&file), None);
        // Opened again: the same file, not created, nothing to narrow.
        let again = open_private(&file).unwrap();
        assert!(!again.created && again.narrowed_from.is_none());
    }

    #[test]
    fn a_planted_symlink_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("theirs");
        std::fs::write(&target, b"planted").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o666)).unwrap();
        let path = dir.path().join("buddy.db");
        symlink(&target, &path).unwrap();
        let error = open_private(&path).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read(&target).unwrap(), b"planted");
        assert_eq!(mode(&target), 0o666);
        // A dangling one: nothing is created where it points.
        let nowhere = dir.path().join("nowhere");
        let dangling = dir.path().join("tokens.json");
        symlink(&nowhere, &dangling).unwrap();
        assert!(open_private(&dangling).is_err());
        assert!(read_private(&dangling).is_err());
        assert!(!nowhere.exists());
    }

    #[test]
    fn a_planted_hard_link_is_refused_and_its_other_name_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, b"keep").unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path = dir.path().join("buddy.db");
        std::fs::hard_link(&elsewhere, &path).unwrap();
        let error = open_private(&path).unwrap_err();
        assert!(error.to_string().contains("hard links"), "{error}");
        assert!(read_private(&path).is_err());
        assert_eq!(mode(&elsewhere), 0o644, "not narrowed either");
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep");
    }

    #[test]
    fn an_existing_file_open_to_others_is_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        std::fs::write(&path, b"x").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(open_to_others(&path), Some(0o644));
        let opened = open_private(&path).unwrap();
        assert_eq!(opened.narrowed_from, Some(0o644));
        assert_eq!(mode(&path), 0o600);
        assert_eq!(open_to_others(&path), None);
    }

    #[test]
    fn another_users_file_or_directory_is_refused() {
        if rustix::process::geteuid().as_raw() != 0 {
            return; // Only root can give a file to another user.
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("planted.json");
        std::fs::write(&path, b"{}").unwrap();
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        let error = open_private(&path).unwrap_err();
        assert!(error.to_string().contains("uid 65534"), "{error}");
        assert!(read_private(&path).is_err());
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::os::unix::fs::chown(&shared, Some(65534), Some(65534)).unwrap();
        assert!(private_dir(&shared).is_err());
        assert!(write_private(&shared.join("t.json"), b"secret").is_err());
        assert!(!shared.join("t.json").exists());
    }

    #[test]
    fn a_write_replaces_a_planted_symlink_or_temp_file_and_never_writes_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::create_dir(&tokens).unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o777)).unwrap();
        let theirs = dir.path().join("theirs");
        std::fs::write(&theirs, b"").unwrap();
        let path = tokens.join("server.json");
        symlink(&theirs, &path).unwrap();
        // The temporary name the old code used, planted open to everyone.
        let old_temporary = tokens.join("server.json.tmp");
        symlink(&theirs, &old_temporary).unwrap();
        write_private(&path, b"secret").unwrap();
        assert_eq!(mode(&tokens), 0o700, "the directory is narrowed");
        assert_eq!(std::fs::read(&theirs).unwrap(), b"", "nothing went through");
        assert!(
            !std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(mode(&path), 0o600);
        assert_eq!(read_private(&path).unwrap().unwrap(), b"secret");
        assert_eq!(read_private(&tokens.join("missing.json")).unwrap(), None);
        let strays = std::fs::read_dir(&tokens)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        assert_eq!(strays, 1, "only the planted one remains");
    }
}

#[test]
fn the_journal_files_sit_beside_the_database() {
    let [wal, shm, journal] = sqlite_companions(std::path::Path::new("/d/buddy.db"));
    assert_eq!(wal, std::path::Path::new("/d/buddy.db-wal"));
    assert_eq!(shm, std::path::Path::new("/d/buddy.db-shm"));
    assert_eq!(journal, std::path::Path::new("/d/buddy.db-journal"));
}
