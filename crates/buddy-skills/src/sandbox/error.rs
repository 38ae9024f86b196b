//! Why the sandbox refused a path or a file, written for the model to read and correct.

use std::path::PathBuf;

/// Why a path or file was refused.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox directory `{path}` cannot be used: {source}")]
    Root {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("path `{0}` is absolute; use a path relative to the sandbox directory")]
    Absolute(String),
    #[error("path `{0}` leaves the sandbox directory; use a path inside it")]
    Escapes(String),
    #[error("path `{0}` contains a NUL byte; use a plain relative path")]
    Invalid(String),
    #[error(
        "path `{0}` goes through a symlink that points outside the sandbox (or is absolute); it cannot be used"
    )]
    SymlinkEscapes(String),
    #[error("{}", symlink_message(path, *walk))]
    Symlink { path: String, walk: bool },
    #[error("`{path}` is {kind}; the file skills only use regular files and directories")]
    NotRegular { path: String, kind: &'static str },
    #[error("`{0}` is not a directory (or a part of its path is a file)")]
    NotDirectory(String),
    #[error("`{0}` is a directory")]
    IsDirectory(String),
    #[error(
        "`{path}` has {links} hard links, so it may also be a file outside the sandbox; it is not used (reading such files can be allowed with `read_hard_links = true` under [skills]; writing them never is)"
    )]
    HardLinked { path: String, links: u64 },
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn symlink_message(path: &str, walk: bool) -> String {
    if walk {
        format!(
            "path `{path}` is or goes through a symlink; on this system the file skills do not follow symlinks"
        )
    } else {
        format!("path `{path}` goes through a symlink loop or a link that cannot be followed")
    }
}
