//! `roots` of an `[[mcp]]` entry: the directories buddy offers a server (`roots/list`).
//!
//! By default a server started with directories on its command line is offered exactly
//! those directories, and any other server the sandbox. server-filesystem (and every
//! server that follows roots) replaces the directories it was started with by the roots
//! it is offered: offering the sandbox would take away what the user configured, and
//! offering the sandbox beside them would widen it. Offering the command line's own
//! directories keeps what the user wrote, whichever way a server reads roots.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Which directories a server is offered as its roots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Roots {
    /// The directories on its command line, or the sandbox when it names none.
    #[default]
    Auto,
    /// buddy's sandbox.
    Sandbox,
    /// None: buddy does not offer roots to it at all (no `roots` capability).
    Off,
    /// These directories.
    Dirs(Vec<PathBuf>),
}

impl<'de> Deserialize<'de> for Roots {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Word(String),
            Dirs(Vec<PathBuf>),
        }
        match Given::deserialize(d)? {
            Given::Word(word) => match word.as_str() {
                "sandbox" => Ok(Roots::Sandbox),
                "none" => Ok(Roots::Off),
                "auto" => Ok(Roots::Auto),
                other => Err(serde::de::Error::custom(format!(
                    "roots = {other:?} is not one buddy knows: give \"sandbox\", \"none\", \"auto\", or a list of directories"
                ))),
            },
            Given::Dirs(dirs) => Ok(Roots::Dirs(dirs)),
        }
    }
}

/// One root offered: the directory and the name shown to the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// An absolute directory.
    pub dir: PathBuf,
    /// Its name: `sandbox`, or the directory's last component.
    pub name: String,
}

impl Roots {
    /// The roots offered to a server with these `args`, working directory `cwd` (relative
    /// paths are taken from there) and `sandbox` (none: no sandbox to offer).
    pub fn offered(&self, args: &[String], cwd: &Path, sandbox: Option<&Path>) -> Vec<Root> {
        let sandbox_root = || {
            sandbox
                .map(|dir| Root {
                    dir: dir.to_path_buf(),
                    name: "sandbox".to_owned(),
                })
                .into_iter()
                .collect::<Vec<_>>()
        };
        let named = |dir: PathBuf| {
            let dir = dir.canonicalize().unwrap_or(dir);
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| dir.display().to_string());
            Root { dir, name }
        };
        match self {
            Roots::Off => Vec::new(),
            Roots::Sandbox => sandbox_root(),
            Roots::Dirs(dirs) => dirs.iter().map(|d| named(cwd.join(d))).collect(),
            Roots::Auto => {
                let given: Vec<Root> = args
                    .iter()
                    .filter(|a| !a.starts_with('-'))
                    .map(|a| cwd.join(a))
                    .filter(|p| p.is_dir())
                    .map(named)
                    .collect();
                if given.is_empty() {
                    sandbox_root()
                } else {
                    given
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(roots: &[Root]) -> Vec<PathBuf> {
        roots.iter().map(|r| r.dir.clone()).collect()
    }

    #[test]
    fn a_server_started_with_directories_is_offered_those_not_the_sandbox() {
        let notes = tempfile::tempdir().unwrap();
        let sandbox = tempfile::tempdir().unwrap();
        let notes_dir = notes.path().canonicalize().unwrap();
        let args = vec![
            "-y".to_owned(),
            "@modelcontextprotocol/server-filesystem".to_owned(),
            notes_dir.display().to_string(),
            "/no/such/dir".to_owned(),
        ];
        let offered = Roots::Auto.offered(&args, Path::new("/"), Some(sandbox.path()));
        assert_eq!(dirs(&offered), std::slice::from_ref(&notes_dir));
        // A relative directory is taken from the server's working directory.
        let name = notes_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let parent = notes_dir.parent().unwrap();
        let offered =
            Roots::Auto.offered(std::slice::from_ref(&name), parent, Some(sandbox.path()));
        assert_eq!(
            offered,
            [Root {
                dir: notes_dir.clone(),
                name
            }]
        );
        // No directory on the command line: the sandbox.
        let offered = Roots::Auto.offered(&["--x".to_owned()], parent, Some(sandbox.path()));
        assert_eq!(offered[0].name, "sandbox");
        assert_eq!(dirs(&offered), [sandbox.path().to_path_buf()]);
    }

    #[test]
    fn roots_can_be_the_sandbox_none_or_a_list() {
        #[derive(Deserialize)]
        struct Entry {
            roots: Roots,
        }
        let parse = |text: &str| toml::from_str::<Entry>(text).map(|e| e.roots);
        assert_eq!(parse("roots = \"sandbox\"").unwrap(), Roots::Sandbox);
        assert_eq!(parse("roots = \"none\"").unwrap(), Roots::Off);
        assert_eq!(
            parse("roots = [\"/srv/notes\"]").unwrap(),
            Roots::Dirs(vec![PathBuf::from("/srv/notes")])
        );
        let err = parse("roots = \"everything\"").unwrap_err().to_string();
        assert!(err.contains("\"sandbox\", \"none\""), "{err}");
        assert!(parse("roots = 3").is_err());
        let sandbox = Path::new("/sandbox");
        let args = ["/".to_owned()];
        assert_eq!(Roots::Off.offered(&args, sandbox, Some(sandbox)), []);
        assert_eq!(
            dirs(&Roots::Sandbox.offered(&args, sandbox, Some(sandbox))),
            [sandbox.to_path_buf()]
        );
        assert_eq!(Roots::Sandbox.offered(&args, sandbox, None), []);
    }
}
