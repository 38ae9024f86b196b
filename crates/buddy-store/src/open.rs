//! Opening a store from where it lives: a SQLite file (a path, or `sqlite:FILE`) or a
//! PostgreSQL URL (`postgres://` / `postgresql://`), so callers choose by location in
//! one place instead of testing URL prefixes themselves.

use std::path::PathBuf;
use std::sync::Arc;

use crate::coordinate::{Coordinator, LocalCoordinator};
use crate::error::StoreError;
use crate::postgres::PgStore;
use crate::sqlite::SqliteStore;
use crate::store::Store;

/// What a store location may be, said in every error about one.
const EXPECTED: &str = "give a SQLite file (a path, or sqlite:FILE) or a PostgreSQL URL (postgres://user:password@host:port/database)";

/// A store location could not be read, or the store there could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The location names a scheme buddy has no store for (`mysql://…`).
    #[error("store `{location}`: buddy has no `{scheme}` store; {EXPECTED}")]
    UnknownScheme { location: String, scheme: String },
    /// The location (or the file after `sqlite:`) is empty.
    #[error("the store location is empty; {EXPECTED}")]
    Empty,
    /// The store itself refused to open.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a store lives, read from a location string by [`StoreLocation::parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite database file (created on first open).
    Sqlite(PathBuf),
    /// A PostgreSQL URL, shared by every instance given it.
    Postgres(String),
}

/// An open store, the coordinator that goes with it, and how to name it to a person.
pub struct OpenedStore {
    /// The conversations.
    pub store: Arc<dyn Store>,
    /// Who may run a turn now: the PostgreSQL store itself, or this process's own.
    pub coordinator: Arc<dyn Coordinator>,
    /// The file, or `PostgreSQL, instance …` (for the line a server prints on start).
    pub shown: String,
}

impl StoreLocation {
    /// Reads `location`: `postgres://` or `postgresql://` is PostgreSQL; `sqlite:FILE`
    /// (or `sqlite://FILE`) and anything without a `scheme://` is a SQLite file.
    pub fn parse(location: &str) -> Result<Self, OpenError> {
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres(location.to_owned()));
        }
        let file = match location.strip_prefix("sqlite:") {
            Some(rest) => rest.strip_prefix("//").unwrap_or(rest),
            None => {
                if let Some((scheme, _)) = location.split_once("://")
                    && is_scheme(scheme)
                {
                    return Err(OpenError::UnknownScheme {
                        location: location.to_owned(),
                        scheme: scheme.to_owned(),
                    });
                }
                location
            }
        };
        if file.is_empty() {
            return Err(OpenError::Empty);
        }
        Ok(StoreLocation::Sqlite(PathBuf::from(file)))
    }

    /// Whether the location carries a password (`postgres://user:password@…` or a
    /// `password=` parameter): such a location must not be shown to other users.
    pub fn names_password(&self) -> bool {
        let StoreLocation::Postgres(url) = self else {
            return false;
        };
        let (before_query, query) = url.split_once('?').unwrap_or((url, ""));
        let rest = before_query.split_once("://").map_or("", |(_, rest)| rest);
        let in_userinfo = rest
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'));
        let in_query = query.split('&').any(|pair| {
            pair.split('=')
                .next()
                .is_some_and(|key| key.eq_ignore_ascii_case("password"))
        });
        in_userinfo || in_query
    }

    /// Opens the store to serve: a SQLite file is created and migrated; PostgreSQL gets
    /// its schema and registers this instance.
    pub async fn open(&self) -> Result<OpenedStore, OpenError> {
        Ok(match self {
            StoreLocation::Sqlite(path) => OpenedStore {
                store: Arc::new(SqliteStore::open(path)?),
                coordinator: Arc::new(LocalCoordinator::default()),
                shown: path.display().to_string(),
            },
            StoreLocation::Postgres(url) => {
                let pg = PgStore::connect(url).await?;
                let shown = format!("PostgreSQL, instance {}", pg.instance());
                OpenedStore {
                    store: Arc::new(pg.clone()),
                    coordinator: Arc::new(pg),
                    shown,
                }
            }
        })
    }

    /// Opens an existing store to read only (beside running servers): nothing is
    /// created, migrated, registered or written.
    pub async fn open_read_only(&self) -> Result<OpenedStore, OpenError> {
        Ok(match self {
            StoreLocation::Sqlite(path) => OpenedStore {
                store: Arc::new(SqliteStore::open_read_only(path)?),
                coordinator: Arc::new(LocalCoordinator::default()),
                shown: path.display().to_string(),
            },
            StoreLocation::Postgres(url) => {
                let pg = PgStore::connect_reader(url).await?;
                OpenedStore {
                    store: Arc::new(pg.clone()),
                    coordinator: Arc::new(pg),
                    shown: "PostgreSQL (read only)".to_owned(),
                }
            }
        })
    }
}

/// Opens the store at `url` to serve (see [`StoreLocation::parse`] for what it may be).
pub async fn open(url: &str) -> Result<OpenedStore, OpenError> {
    StoreLocation::parse(url)?.open().await
}

/// A URL scheme as RFC 3986 spells it: a letter, then letters, digits, `+`, `-`, `.`.
fn is_scheme(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn sqlite(path: &str) -> StoreLocation {
        StoreLocation::Sqlite(PathBuf::from(path))
    }

    #[test]
    fn a_path_is_a_sqlite_file() {
        assert_eq!(
            StoreLocation::parse("buddy.db").unwrap(),
            sqlite("buddy.db")
        );
        assert_eq!(
            StoreLocation::parse("/var/lib/buddy/buddy.db").unwrap(),
            sqlite("/var/lib/buddy/buddy.db")
        );
        // A `://` that is no scheme (a directory name) leaves it a path.
        assert_eq!(
            StoreLocation::parse("./a://b.db").unwrap(),
            sqlite("./a://b.db")
        );
    }

    #[test]
    fn the_sqlite_scheme_names_a_file() {
        assert_eq!(
            StoreLocation::parse("sqlite:buddy.db").unwrap(),
            sqlite("buddy.db")
        );
        assert_eq!(
            StoreLocation::parse("sqlite://buddy.db").unwrap(),
            sqlite("buddy.db")
        );
        assert_eq!(
            StoreLocation::parse("sqlite:///tmp/buddy.db").unwrap(),
            sqlite("/tmp/buddy.db")
        );
    }

    #[test]
    fn both_postgres_schemes_are_postgresql() {
        for url in ["postgres://u:p@host:5432/db", "postgresql://u@127.0.0.1/db"] {
            assert_eq!(
                StoreLocation::parse(url).unwrap(),
                StoreLocation::Postgres(url.to_owned())
            );
        }
    }

    #[test]
    fn a_password_in_the_location_is_noticed() {
        for with in [
            "postgres://u:secret@host:5432/db",
            "postgresql://u:p%2Fw@host/db?sslmode=require",
            "postgres://u@host/db?sslmode=require&password=secret",
        ] {
            assert!(
                StoreLocation::parse(with).unwrap().names_password(),
                "{with}"
            );
        }
        for without in [
            "postgres://u@host:5432/db",
            "postgres://host/db?user=u",
            "buddy.db",
            "sqlite:/a:b@c.db",
        ] {
            assert!(
                !StoreLocation::parse(without).unwrap().names_password(),
                "{without}"
            );
        }
    }

    #[test]
    fn an_unknown_scheme_says_what_to_give() {
        let error = StoreLocation::parse("mysql://u@host/db").unwrap_err();
        assert!(matches!(&error, OpenError::UnknownScheme { scheme, .. } if scheme == "mysql"));
        let text = error.to_string();
        assert!(text.contains("`mysql://u@host/db`"), "{text}");
        assert!(
            text.contains("sqlite:FILE") && text.contains("postgres://"),
            "{text}"
        );
    }

    #[test]
    fn an_empty_location_says_what_to_give() {
        for empty in ["", "sqlite:", "sqlite://"] {
            let error = StoreLocation::parse(empty).unwrap_err();
            assert!(matches!(error, OpenError::Empty), "{empty}: {error}");
            assert!(error.to_string().contains("postgres://"), "{error}");
        }
    }

    #[tokio::test]
    async fn open_creates_a_sqlite_file_and_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/buddy.db");
        let location = format!("sqlite:{}", path.display());
        let opened = open(&location).await.unwrap();
        assert_eq!(opened.shown, path.display().to_string());
        assert!(path.is_file());
        drop(opened);
        let reader = StoreLocation::parse(&location)
            .unwrap()
            .open_read_only()
            .await
            .unwrap();
        assert!(
            reader
                .store
                .list_conversations(None)
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn reading_a_missing_sqlite_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.db");
        let error = match StoreLocation::Sqlite(path.clone()).open_read_only().await {
            Ok(_) => panic!("a missing file opened"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(!path.exists(), "reading must not create the file");
    }

    #[tokio::test]
    async fn open_refuses_an_unknown_scheme_before_touching_anything() {
        let error = match open("redis://localhost").await {
            Ok(_) => panic!("redis opened"),
            Err(e) => e,
        };
        assert!(matches!(error, OpenError::UnknownScheme { .. }), "{error}");
    }
}
