//! OAuth credentials kept between runs: one file per MCP server, readable by its
//! owner only, tied to the server's URL, in a directory only buddy's user may enter
//! (`buddy_files`: created 0700 / 0600 in one step, never through a planted symlink).

use std::path::{Path, PathBuf};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// A server's tokens in `DIR/NAME.json`; empty when the file names another URL.
#[derive(Clone, Debug)]
pub struct FileCredentialStore {
    path: PathBuf,
    url: String,
}

/// What the file holds.
#[derive(Serialize, Deserialize)]
struct Saved {
    url: String,
    credentials: StoredCredentials,
}

impl FileCredentialStore {
    /// The store of server `name` at `url` under `dir`.
    pub fn new(dir: &Path, name: &str, url: &str) -> Self {
        let file: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        FileCredentialStore {
            path: dir.join(format!("{file}.json")),
            url: url.to_owned(),
        }
    }

    /// Where the tokens are kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn failed(&self, what: &str, e: impl std::fmt::Display) -> AuthError {
        AuthError::CredentialStoreError(format!("cannot {what} {}: {e}", self.path.display()))
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let path = self.path.clone();
        // Never through a symlink or from a file another user made (planted tokens).
        let read = tokio::task::spawn_blocking(move || buddy_files::read_private(&path)).await;
        let text = match read {
            Ok(Ok(Some(text))) => text,
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(e)) => return Err(self.failed("read", e)),
            Err(e) => return Err(self.failed("read", e)),
        };
        // A file buddy cannot read is not fatal: authorizing again rewrites it.
        Ok(serde_json::from_slice::<Saved>(&text)
            .ok()
            .filter(|saved| saved.url == self.url)
            .map(|saved| saved.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let saved = Saved {
            url: self.url.clone(),
            credentials,
        };
        let text = serde_json::to_vec_pretty(&saved).map_err(|e| self.failed("write", e))?;
        let path = self.path.clone();
        let written =
            tokio::task::spawn_blocking(move || buddy_files::write_private(&path, &text)).await;
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.failed("write", e)),
            Err(e) => Err(self.failed("write", e)),
        }
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match tokio::fs::remove_file(&self.path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.failed("remove", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.to_owned(), None, vec!["mcp".into()], Some(7))
    }

    #[tokio::test]
    async fn tokens_come_back_for_the_same_server_and_url_only() {
        let dir = tempfile::tempdir().expect("dir");
        let store = FileCredentialStore::new(dir.path(), "docs/x", "https://a.example/mcp");
        assert!(store.load().await.expect("load").is_none());
        store.save(credentials("c1")).await.expect("save");
        assert_eq!(store.path(), dir.path().join("docs_x.json"));
        let loaded = store.load().await.expect("load").expect("saved");
        assert_eq!(loaded.client_id, "c1");
        assert_eq!(loaded.granted_scopes, vec!["mcp".to_owned()]);
        // The same name at another URL: the tokens are not sent there.
        let moved = FileCredentialStore::new(dir.path(), "docs/x", "https://b.example/mcp");
        assert!(moved.load().await.expect("load").is_none());
        store.clear().await.expect("clear");
        assert!(store.load().await.expect("load").is_none());
        store.clear().await.expect("clearing twice is fine");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_file_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let store = FileCredentialStore::new(&dir.path().join("new"), "s", "u");
        store.save(credentials("c")).await.expect("save");
        let mode =
            |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(store.path()), 0o600);
        assert_eq!(mode(&dir.path().join("new")), 0o700);
    }

    /// A token directory others can write to (shared, or made by hand): a symlink or a
    /// temporary file planted there never receives the token, nor is read as one.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_planted_symlink_or_temporary_file_never_sees_the_token() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let dir = tempfile::tempdir().expect("dir");
        let shared = dir.path().join("tokens");
        std::fs::create_dir(&shared).expect("dir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let theirs = dir.path().join("theirs");
        std::fs::write(&theirs, b"").expect("write");
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let store = FileCredentialStore::new(&shared, "s", "u");
        symlink(&theirs, store.path()).expect("symlink");
        // What the old code wrote through: NAME.json.tmp.
        symlink(&theirs, shared.join("s.json.tmp")).expect("symlink");
        let refused = store.load().await.expect_err("a symlink is not read");
        assert!(refused.to_string().contains("symbolic link"), "{refused}");
        store
            .save(credentials("secret-client"))
            .await
            .expect("save");
        assert_eq!(
            std::fs::read(&theirs).expect("read"),
            b"",
            "nothing written through"
        );
        let mode = std::fs::metadata(&shared)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "the directory is made private");
        let loaded = store.load().await.expect("load").expect("saved");
        assert_eq!(loaded.client_id, "secret-client");
    }

    #[tokio::test]
    async fn a_damaged_file_reads_as_no_tokens() {
        let dir = tempfile::tempdir().expect("dir");
        let store = FileCredentialStore::new(dir.path(), "s", "u");
        std::fs::write(store.path(), b"{not json").expect("write");
        assert!(store.load().await.expect("load").is_none());
    }
}
