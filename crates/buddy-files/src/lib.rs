//! buddy-files: the files only buddy reads — its store, the store's journal files, OAuth
//! tokens, anything holding a secret.
//!
//! A file is created 0600 (a directory 0700) in the same call that creates it, so there
//! is no moment when another user could open it; `O_EXCL` and `O_NOFOLLOW` keep buddy from
//! writing through a symlink or into a file someone planted first, and an existing file
//! another user owns is refused. An existing file of buddy's own that others may read
//! (made by an older buddy) is narrowed through its open descriptor, with a warning.

use std::fs::File;
use std::io;
use std::path::Path;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{create_private_dirs, open_private, private_dir, read_private, write_private};

#[cfg(not(unix))]
mod portable;
#[cfg(not(unix))]
pub use portable::{create_private_dirs, open_private, private_dir, read_private, write_private};

/// A private file as [`open_private`] left it.
#[derive(Debug)]
pub struct Opened {
    /// The open file (read and write).
    pub file: File,
    /// True when this call created it.
    pub created: bool,
    /// The permission bits it had when others could read or write it, before it was
    /// narrowed to 0600.
    pub narrowed_from: Option<u32>,
}

/// The permission bits of `path` when its group or others may read or write it (`None`
/// when only its owner may, when it does not exist, or off Unix). A symlink is judged by
/// itself, not followed.
pub fn open_to_others(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        let mode = meta.permissions().mode() & 0o777;
        (mode & 0o077 != 0 && !meta.file_type().is_symlink()).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The journal files SQLite keeps beside a database (`-wal`, `-shm`, `-journal`).
pub fn sqlite_companions(db: &Path) -> [std::path::PathBuf; 3] {
    let with = |suffix: &str| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name)
    };
    [with("-wal"), with("-shm"), with("-journal")]
}

/// An error that names the file and says why buddy refused it.
fn refused(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {why}", path.display()),
    )
}

#[cfg(test)]
mod tests;
