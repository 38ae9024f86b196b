//! OAuth credentials kept between runs: one file per MCP server, readable by its
//! owner only, tied to the server's URL.

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
        let text = match tokio::fs::read(&self.path).await {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
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
        let written = tokio::task::spawn_blocking(move || write_private(&path, &text)).await;
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

/// Writes `text` to `path` through a temporary file, mode 0600, then renames it.
fn write_private(path: &Path, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let temporary = path.with_extension("json.tmp");
    let mut file = options.open(&temporary)?;
    file.write_all(text)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
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
        let mode = std::fs::metadata(store.path())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[tokio::test]
    async fn a_damaged_file_reads_as_no_tokens() {
        let dir = tempfile::tempdir().expect("dir");
        let store = FileCredentialStore::new(dir.path(), "s", "u");
        std::fs::write(store.path(), b"{not json").expect("write");
        assert!(store.load().await.expect("load").is_none());
    }
}
