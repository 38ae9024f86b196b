//! Off Unix: the same calls without modes or owners (the platform's ACLs decide who
//! reads the files).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::Opened;

/// Opens `path`, creating it when it is missing.
pub fn open_private(path: &Path) -> io::Result<Opened> {
    let created = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path);
    match created {
        Ok(file) => Ok(Opened {
            file,
            created: true,
            narrowed_from: None,
        }),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Opened {
            file: OpenOptions::new().read(true).write(true).open(path)?,
            created: false,
            narrowed_from: None,
        }),
        Err(e) => Err(e),
    }
}

/// Creates `dir` and its missing parents.
pub fn create_private_dirs(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Creates `dir` when it is missing.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Writes `bytes` to `path` through a new temporary file renamed over it.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    private_dir(dir)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = std::path::PathBuf::from(temporary);
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

/// Reads `path`; `None` when it does not exist.
pub fn read_private(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
