//! A path the model sent, checked without touching the file system: relative, no NUL,
//! and `..` never above the root. What it names is only ever opened beneath the root.

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path};

use super::SandboxError;

/// A path inside the sandbox as plain names, `..` and `.` already folded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelPath {
    names: Vec<OsString>,
}

impl RelPath {
    /// Checks a path the model sent; an empty path is the root.
    pub fn parse(requested: &str) -> Result<Self, SandboxError> {
        let requested = requested.trim();
        if requested.contains('\0') {
            return Err(SandboxError::Invalid(requested.replace('\0', "\\0")));
        }
        let rel = Path::new(if requested.is_empty() { "." } else { requested });
        let mut names: Vec<OsString> = Vec::new();
        for component in rel.components() {
            match component {
                Component::Prefix(_) | Component::RootDir => {
                    return Err(SandboxError::Absolute(requested.to_owned()));
                }
                Component::CurDir => {}
                Component::ParentDir => {
                    if names.pop().is_none() {
                        return Err(SandboxError::Escapes(requested.to_owned()));
                    }
                }
                Component::Normal(part) => names.push(part.to_owned()),
            }
        }
        Ok(RelPath { names })
    }

    /// How many names the path has (0 for the root).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True for the root itself.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The names, outermost first.
    pub fn names(&self) -> &[OsString] {
        &self.names
    }

    /// The first `end` names.
    pub fn prefix(&self, end: usize) -> RelPath {
        RelPath {
            names: self.names[..end.min(self.names.len())].to_vec(),
        }
    }

    /// The parent and the last name; `None` for the root.
    pub fn split_last(&self) -> Option<(RelPath, OsString)> {
        let (last, parent) = self.names.split_last()?;
        Some((
            RelPath {
                names: parent.to_vec(),
            },
            last.clone(),
        ))
    }

    /// The path with one more name.
    pub fn join(&self, name: &OsStr) -> RelPath {
        let mut names = self.names.clone();
        names.push(name.to_owned());
        RelPath { names }
    }

    /// The path as the kernel takes it relative to the root (`.` for the root).
    pub fn as_os_string(&self) -> OsString {
        if self.names.is_empty() {
            return OsString::from(".");
        }
        let mut out = OsString::new();
        for (i, name) in self.names.iter().enumerate() {
            if i > 0 {
                out.push("/");
            }
            out.push(name);
        }
        out
    }

    /// The path for messages the model reads.
    pub fn display(&self) -> String {
        self.as_os_string().to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_dots_and_refuses_what_leaves_the_root() {
        assert_eq!(
            RelPath::parse("sub/../sub/./a.txt").unwrap().display(),
            "sub/a.txt"
        );
        assert_eq!(RelPath::parse("").unwrap().display(), ".");
        assert_eq!(RelPath::parse("  ./ ").unwrap().len(), 0);
        assert!(matches!(
            RelPath::parse("../x"),
            Err(SandboxError::Escapes(_))
        ));
        assert!(matches!(
            RelPath::parse("sub/../../x"),
            Err(SandboxError::Escapes(_))
        ));
        assert!(matches!(
            RelPath::parse("/etc/passwd"),
            Err(SandboxError::Absolute(_))
        ));
        assert!(matches!(
            RelPath::parse("a\0b"),
            Err(SandboxError::Invalid(_))
        ));
        let p = RelPath::parse("a/b/c").unwrap();
        assert_eq!(p.prefix(2).display(), "a/b");
        let (parent, last) = p.split_last().unwrap();
        assert_eq!(
            (parent.display().as_str(), last.to_str()),
            ("a/b", Some("c"))
        );
        assert_eq!(parent.join(OsStr::new("d")).display(), "a/b/d");
    }
}
