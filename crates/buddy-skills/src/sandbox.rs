//! The directory the file skills are confined to. Every path a model sends is resolved
//! here and refused if it would leave the sandbox: `..`, absolute paths, and symlinks
//! (including dangling ones) that point outside.

use std::path::{Component, Path, PathBuf};

/// Why a path was refused. The message is written for the model to read and correct.
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
    #[error("path `{0}` is a symlink pointing outside the sandbox; it cannot be used")]
    SymlinkEscapes(String),
    #[error("cannot access `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A sandbox rooted at a canonical directory.
#[derive(Clone, Debug)]
pub struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    /// A sandbox at `root`, which must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let path = root.as_ref();
        let root = path.canonicalize().map_err(|source| SandboxError::Root {
            path: path.to_owned(),
            source,
        })?;
        if !root.is_dir() {
            return Err(SandboxError::Root {
                path: path.to_owned(),
                source: std::io::Error::other("not a directory"),
            });
        }
        Ok(Sandbox { root })
    }

    /// The canonical sandbox directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `requested` (relative to the root) to a real path inside the sandbox.
    /// The path need not exist yet; whatever part of it exists is resolved through
    /// symlinks and must stay inside.
    pub fn resolve(&self, requested: &str) -> Result<PathBuf, SandboxError> {
        let requested = requested.trim();
        let rel = Path::new(if requested.is_empty() { "." } else { requested });
        let mut normal = PathBuf::new();
        for component in rel.components() {
            match component {
                Component::Prefix(_) | Component::RootDir => {
                    return Err(SandboxError::Absolute(requested.to_owned()));
                }
                Component::CurDir => {}
                Component::ParentDir => {
                    if !normal.pop() {
                        return Err(SandboxError::Escapes(requested.to_owned()));
                    }
                }
                Component::Normal(part) => normal.push(part),
            }
        }
        let joined = self.root.join(&normal);
        // Walk up to the deepest part that exists, resolve it, and re-attach the rest.
        let mut existing = joined.as_path();
        let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
        loop {
            match std::fs::symlink_metadata(existing) {
                Ok(meta) => {
                    let real = match existing.canonicalize() {
                        Ok(real) => real,
                        Err(_) if meta.file_type().is_symlink() => {
                            return Err(SandboxError::SymlinkEscapes(requested.to_owned()));
                        }
                        Err(source) => {
                            return Err(SandboxError::Io {
                                path: requested.to_owned(),
                                source,
                            });
                        }
                    };
                    if !real.starts_with(&self.root) {
                        return Err(SandboxError::SymlinkEscapes(requested.to_owned()));
                    }
                    let mut out = real;
                    out.extend(rest.iter().rev());
                    return Ok(out);
                }
                Err(_) => match (existing.parent(), existing.file_name()) {
                    (Some(parent), Some(name)) => {
                        rest.push(name);
                        existing = parent;
                    }
                    _ => return Err(SandboxError::Escapes(requested.to_owned())),
                },
            }
        }
    }

    /// `path` relative to the root, for messages the model reads.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_escapes_and_accepts_paths_inside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.txt"), "a").unwrap();
        let sb = Sandbox::new(dir.path()).unwrap();
        assert_eq!(
            sb.resolve("sub/a.txt").unwrap(),
            sb.root().join("sub/a.txt")
        );
        assert_eq!(
            sb.resolve("sub/../sub/./a.txt").unwrap(),
            sb.root().join("sub/a.txt")
        );
        assert_eq!(
            sb.resolve("new/dir/file.txt").unwrap(),
            sb.root().join("new/dir/file.txt")
        );
        assert_eq!(sb.resolve("").unwrap(), sb.root());
        assert!(matches!(sb.resolve("../x"), Err(SandboxError::Escapes(_))));
        assert!(matches!(
            sb.resolve("sub/../../x"),
            Err(SandboxError::Escapes(_))
        ));
        assert!(matches!(
            sb.resolve("/etc/passwd"),
            Err(SandboxError::Absolute(_))
        ));
    }

    #[cfg(unix)]
    #[test]
    fn refuses_symlinks_that_point_outside_even_dangling_ones() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("dirlink")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("nope"), dir.path().join("dangling"))
            .unwrap();
        std::fs::write(dir.path().join("inside"), "i").unwrap();
        std::os::unix::fs::symlink(dir.path().join("inside"), dir.path().join("goodlink")).unwrap();
        let sb = Sandbox::new(dir.path()).unwrap();
        assert!(matches!(
            sb.resolve("link"),
            Err(SandboxError::SymlinkEscapes(_))
        ));
        assert!(matches!(
            sb.resolve("dirlink/secret"),
            Err(SandboxError::SymlinkEscapes(_))
        ));
        assert!(matches!(
            sb.resolve("dirlink/new.txt"),
            Err(SandboxError::SymlinkEscapes(_))
        ));
        assert!(matches!(
            sb.resolve("dangling"),
            Err(SandboxError::SymlinkEscapes(_))
        ));
        assert_eq!(sb.resolve("goodlink").unwrap(), sb.root().join("inside"));
    }
}
