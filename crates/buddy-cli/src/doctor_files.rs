//! `buddy doctor`'s look at the files only buddy should read: the SQLite store and its
//! journal files, the MCP OAuth token directory and its tokens, a buddy.toml that names
//! a store password. Each one its group or other users may read is named with its mode.

use std::path::{Path, PathBuf};

/// A private file (or directory) other local users may read or write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its permission bits.
    pub mode: u32,
    /// What it holds, in words.
    pub what: &'static str,
}

impl OpenFile {
    /// The line doctor prints for it.
    pub fn warning(&self) -> String {
        let fix = if self.what.ends_with("directory") {
            "chmod 700"
        } else {
            "chmod 600"
        };
        format!(
            "! {} ({}) is open to other users (mode {:o}): {fix} it",
            self.path.display(),
            self.what,
            self.mode
        )
    }
}

/// What doctor checks: where each private thing is (missing ones are skipped).
#[derive(Clone, Debug, Default)]
pub struct PrivateFiles<'a> {
    /// The SQLite store (none when the store is PostgreSQL).
    pub sqlite: Option<&'a Path>,
    /// The MCP OAuth token directory.
    pub token_dir: Option<&'a Path>,
    /// buddy.toml, when it holds a store URL with a password.
    pub config_with_secret: Option<&'a Path>,
}

impl PrivateFiles<'_> {
    /// Every one of them its group or other users may read or write.
    pub fn open_to_others(&self) -> Vec<OpenFile> {
        let mut out = Vec::new();
        let mut check = |path: &Path, what: &'static str| {
            if let Some(mode) = buddy_files::open_to_others(path) {
                out.push(OpenFile {
                    path: path.to_owned(),
                    mode,
                    what,
                });
            }
        };
        if let Some(db) = self.sqlite {
            check(db, "the conversation store");
            for journal in buddy_files::sqlite_companions(db) {
                check(&journal, "the store's journal");
            }
        }
        if let Some(dir) = self.token_dir {
            check(dir, "the MCP OAuth token directory");
            let mut tokens: Vec<PathBuf> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| entry.path())
                .collect();
            tokens.sort();
            for token in tokens {
                check(&token, "MCP OAuth tokens");
            }
        }
        if let Some(config) = self.config_with_secret {
            check(config, "config naming the store's password");
        }
        out
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn files_others_may_read_are_named_and_private_ones_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let chmod = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        let db = dir.path().join("buddy.db");
        std::fs::write(&db, b"").unwrap();
        chmod(&db, 0o644);
        let wal = dir.path().join("buddy.db-wal");
        std::fs::write(&wal, b"").unwrap();
        chmod(&wal, 0o600);
        let tokens = dir.path().join("tokens");
        std::fs::create_dir(&tokens).unwrap();
        chmod(&tokens, 0o755);
        let token = tokens.join("docs.json");
        std::fs::write(&token, b"{}").unwrap();
        chmod(&token, 0o640);
        let files = PrivateFiles {
            sqlite: Some(&db),
            token_dir: Some(&tokens),
            config_with_secret: None,
        };
        let open: Vec<(PathBuf, u32)> = files
            .open_to_others()
            .into_iter()
            .map(|f| (f.path, f.mode))
            .collect();
        assert_eq!(
            open,
            vec![(db.clone(), 0o644), (tokens.clone(), 0o755), (token, 0o640)]
        );
        let warning = files.open_to_others()[1].warning();
        assert!(
            warning.contains("mode 755") && warning.contains("chmod 700"),
            "{warning}"
        );
        chmod(&db, 0o600);
        chmod(&tokens, 0o700);
        assert_eq!(
            files.open_to_others().len(),
            1,
            "the token file is still open"
        );
    }
}
