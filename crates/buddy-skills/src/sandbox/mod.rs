//! The directory the file skills are confined to. Every file skill works through
//! handles beneath the sandbox's root: a path is resolved and opened in one step by the
//! kernel (`openat2` with `RESOLVE_BENEATH`), or component by component from the root
//! handle without following symlinks where `openat2` is missing. A path string is never
//! checked and then opened again, so a directory swapped for a symlink while a skill
//! runs cannot lead outside. Only regular files and directories are used.

mod error;
mod open;
mod path;

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

pub use error::SandboxError;
pub use path::RelPath;

/// How paths are resolved beneath the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// One `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` per path: the kernel
    /// refuses any step that leaves the root. Relative symlinks that stay inside are
    /// followed; absolute ones and ones leading out are refused.
    Kernel,
    /// Component by component from the root handle with `O_NOFOLLOW`: no symlink is
    /// followed at all. Used where the kernel has no `openat2` (before Linux 5.6).
    Walk,
}

/// A sandbox: the root's canonical path (for messages and command skills) and an open
/// handle to it (for everything the file skills do).
#[derive(Clone, Debug)]
pub struct Sandbox {
    root: PathBuf,
    handle: Arc<OwnedFd>,
    resolution: Resolution,
    read_hard_links: bool,
}

/// What a file skill opened: the file and what its handle says about it.
#[derive(Debug)]
pub struct OpenFile {
    pub file: File,
    /// Size in bytes, from the handle.
    pub len: u64,
}

impl Sandbox {
    /// A sandbox at `root`, which must be an existing directory; paths are resolved by
    /// the kernel where it can, else by the handle-by-handle walk.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let mut sandbox = Sandbox::with_resolution(root, Resolution::Kernel)?;
        if !open::kernel_resolves(&sandbox.handle) {
            sandbox.resolution = Resolution::Walk;
        }
        Ok(sandbox)
    }

    /// A sandbox that resolves paths the given way (tests use it to check the fallback).
    pub fn with_resolution(
        root: impl AsRef<Path>,
        resolution: Resolution,
    ) -> Result<Self, SandboxError> {
        let path = root.as_ref();
        let root_error = |source: std::io::Error| SandboxError::Root {
            path: path.to_owned(),
            source,
        };
        let root = path.canonicalize().map_err(root_error)?;
        let handle = rustix::fs::open(
            &root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| root_error(e.into()))?;
        Ok(Sandbox {
            root,
            handle: Arc::new(handle),
            resolution,
            read_hard_links: false,
        })
    }

    /// Allows reading files with more than one hard link (writing them stays refused).
    pub fn read_hard_links(mut self, allow: bool) -> Self {
        self.read_hard_links = allow;
        self
    }

    /// The canonical sandbox directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How this sandbox resolves paths.
    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    /// Opens a directory for listing or walking.
    pub fn open_dir(&self, path: &RelPath, action: &'static str) -> Result<OwnedFd, SandboxError> {
        let fd = self
            .open(path, open::DIR_FLAGS, Mode::empty())
            .map_err(|e| self.error(path, action, e))?;
        Ok(fd)
    }

    /// Opens a regular file for reading, without blocking on a FIFO or device: anything
    /// but a regular file is refused, as is a hard-linked file unless allowed.
    pub fn open_read(
        &self,
        path: &RelPath,
        action: &'static str,
    ) -> Result<OpenFile, SandboxError> {
        let fd = self
            .open(path, open::READ_FLAGS, Mode::empty())
            .map_err(|e| self.error(path, action, e))?;
        self.checked(path, fd, !self.read_hard_links)
    }

    /// Opens (creating it and its parent directories) a regular file for writing; a
    /// file with more than one hard link is refused. Nothing is truncated here.
    pub fn open_write(&self, path: &RelPath, append: bool) -> Result<OpenFile, SandboxError> {
        let Some((parent, _)) = path.split_last() else {
            return Err(SandboxError::IsDirectory(path.display()));
        };
        self.create_dirs(&parent)
            .map_err(|e| self.error(&parent, "create the directory for", e))?;
        let mut flags = open::WRITE_FLAGS;
        if append {
            flags |= OFlags::APPEND;
        }
        let fd = self
            .open(path, flags, Mode::from_bits_truncate(0o644))
            .map_err(|e| self.error(path, "open for writing", e))?;
        self.checked(path, fd, true)
    }

    /// The type, size and link count of `name` inside an open directory, never
    /// following a symlink.
    pub fn stat_in(&self, dir: &OwnedFd, name: &std::ffi::OsStr) -> Option<Stat> {
        rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()
    }

    /// Opens a child of an open directory without following a symlink (walks use it):
    /// `None` for anything that is not what was asked for.
    pub fn child(&self, dir: &OwnedFd, name: &std::ffi::OsStr, want_dir: bool) -> Option<OwnedFd> {
        let flags = if want_dir {
            open::DIR_FLAGS
        } else {
            open::READ_FLAGS
        };
        rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, Mode::empty()).ok()
    }

    /// Whether a file may be read, judged on its handle: a regular file, and a single
    /// link unless hard-linked reads are allowed.
    pub fn readable(&self, stat: &Stat) -> bool {
        FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
            && (self.read_hard_links || links(stat) <= 1)
    }

    fn open(&self, path: &RelPath, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
        match self.resolution {
            Resolution::Kernel => open::beneath(&self.handle, path, flags, mode),
            Resolution::Walk => open::walk(&self.handle, path, flags, mode),
        }
    }

    /// Creates the missing directories of `path`, each opened beneath the root.
    fn create_dirs(&self, path: &RelPath) -> Result<(), Errno> {
        for end in 1..=path.len() {
            let prefix = path.prefix(end);
            match self.open(&prefix, open::DIR_FLAGS, Mode::empty()) {
                Ok(_) => continue,
                Err(Errno::NOENT) => {}
                Err(e) => return Err(e),
            }
            let (parent, name) = prefix.split_last().ok_or(Errno::INVAL)?;
            let parent = self.open(&parent, open::DIR_FLAGS, Mode::empty())?;
            match rustix::fs::mkdirat(&parent, &name, Mode::from_bits_truncate(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Checks an opened handle: only a regular file, and (if `single_link`) one link.
    fn checked(
        &self,
        path: &RelPath,
        fd: OwnedFd,
        single_link: bool,
    ) -> Result<OpenFile, SandboxError> {
        let stat = rustix::fs::fstat(&fd).map_err(|e| self.error(path, "inspect", e))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(SandboxError::IsDirectory(path.display())),
            other => {
                return Err(SandboxError::NotRegular {
                    path: path.display(),
                    kind: kind_name(other),
                });
            }
        }
        if single_link && links(&stat) > 1 {
            return Err(SandboxError::HardLinked {
                path: path.display(),
                links: links(&stat),
            });
        }
        Ok(OpenFile {
            file: File::from(fd),
            len: u64::try_from(stat.st_size).unwrap_or(0),
        })
    }

    /// Turns an errno from opening `path` into words the model can act on.
    fn error(&self, path: &RelPath, action: &'static str, errno: Errno) -> SandboxError {
        let shown = path.display();
        match errno {
            Errno::XDEV => SandboxError::SymlinkEscapes(shown),
            Errno::LOOP => SandboxError::Symlink {
                path: shown,
                walk: self.resolution == Resolution::Walk,
            },
            Errno::NXIO => SandboxError::NotRegular {
                path: shown,
                kind: "a FIFO, socket or device",
            },
            Errno::ISDIR => SandboxError::IsDirectory(shown),
            Errno::NOTDIR if self.resolution == Resolution::Walk && self.has_symlink(path) => {
                SandboxError::Symlink {
                    path: shown,
                    walk: true,
                }
            }
            Errno::NOTDIR => SandboxError::NotDirectory(shown),
            other => SandboxError::Io {
                action,
                path: shown,
                source: other.into(),
            },
        }
    }

    /// Whether some component of `path` is a symlink (only to word an error).
    fn has_symlink(&self, path: &RelPath) -> bool {
        (1..=path.len()).any(|end| {
            let prefix = path.prefix(end);
            let Some((parent, name)) = prefix.split_last() else {
                return false;
            };
            open::walk(&self.handle, &parent, open::DIR_FLAGS, Mode::empty())
                .ok()
                .and_then(|dir| self.stat_in(&dir, &name))
                .is_some_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink)
        })
    }
}

/// A name for a file type, for messages.
pub fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Symlink => "a symlink",
        FileType::Directory => "a directory",
        FileType::RegularFile => "a regular file",
        _ => "not a regular file",
    }
}

/// The link count of a file (its width differs between targets).
#[allow(clippy::useless_conversion)]
pub fn links(stat: &Stat) -> u64 {
    u64::from(stat.st_nlink)
}

/// Lets the names of a directory be read through its handle.
pub fn entries(dir: &OwnedFd) -> Result<Vec<(OsString, FileType)>, Errno> {
    use std::os::unix::ffi::OsStrExt;
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        names.push((
            std::ffi::OsStr::from_bytes(name).to_owned(),
            entry.file_type(),
        ));
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(names)
}
