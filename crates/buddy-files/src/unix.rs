//! The Unix way: modes given to `open(2)` and `mkdir(2)`, `O_EXCL | O_NOFOLLOW`, and the
//! owner read from the open descriptor.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::{Opened, refused};

/// `O_NOFOLLOW`: the last component of the path must not be a symlink.
fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// The user buddy runs as.
fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// A symlink met where `O_NOFOLLOW` forbade one reads as a refusal that says so.
fn no_symlink(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        refused(
            path,
            "is a symbolic link; buddy keeps private files only in files of its own",
        )
    } else {
        io::Error::new(e.kind(), format!("{}: {e}", path.display()))
    }
}

/// Refuses what is not a regular file of its own: a device, a FIFO, or a file with
/// another name elsewhere (a hard link planted to make buddy write into another file).
fn one_regular_file(path: &Path, meta: &std::fs::Metadata) -> io::Result<()> {
    if !meta.is_file() {
        return Err(refused(path, "is not a regular file"));
    }
    if meta.nlink() > 1 {
        return Err(refused(
            path,
            "has other hard links; buddy keeps private files only in files of its own",
        ));
    }
    Ok(())
}

/// Checks an opened file is a regular file of buddy's user; narrows it to 0600 when
/// others may read it. Returns the mode it had then.
fn own(path: &Path, file: &File) -> io::Result<Option<u32>> {
    let meta = file.metadata()?;
    one_regular_file(path, &meta)?;
    if meta.uid() != me() {
        return Err(refused(
            path,
            &format!(
                "belongs to uid {}, not to the user buddy runs as (uid {}); buddy does not keep secrets in a file another user made",
                meta.uid(),
                me()
            ),
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 == 0 {
        return Ok(None);
    }
    file.set_permissions(Permissions::from_mode(0o600))?;
    tracing::warn!(
        path = %path.display(),
        mode = format!("{mode:o}"),
        "the file was open to other users; narrowed to 0600"
    );
    Ok(Some(mode))
}

/// Opens `path` as a file only buddy's user may read: created 0600 in one step when it is
/// missing, never through a symlink; an existing one must be a regular file of this user
/// (one open to others is narrowed to 0600).
pub fn open_private(path: &Path) -> io::Result<Opened> {
    let created = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(no_follow())
        .open(path);
    match created {
        Ok(file) => {
            return Ok(Opened {
                file,
                created: true,
                narrowed_from: None,
            });
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(no_symlink(path, e)),
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(no_follow())
        .open(path)
        .map_err(|e| no_symlink(path, e))?;
    let narrowed_from = own(path, &file)?;
    Ok(Opened {
        file,
        created: false,
        narrowed_from,
    })
}

/// Creates `dir` and its missing parents 0700 (each in the `mkdir` that makes it); an
/// existing directory is left as it is.
pub fn create_private_dirs(dir: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))
}

/// Makes `dir` a directory only buddy's user may enter: created 0700 when missing; an
/// existing one must belong to this user (one others may enter is narrowed to 0700), so
/// nobody else can plant a file or a symlink in it.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    create_private_dirs(dir)?;
    let meta = std::fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(refused(dir, "is not a directory"));
    }
    if meta.uid() != me() {
        return Err(refused(
            dir,
            &format!(
                "belongs to uid {}, not to the user buddy runs as (uid {}); give buddy a directory of its own",
                meta.uid(),
                me()
            ),
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, Permissions::from_mode(0o700))?;
        tracing::warn!(
            path = %dir.display(),
            mode = format!("{mode:o}"),
            "the directory was open to other users; narrowed to 0700"
        );
    }
    Ok(())
}

/// Writes `bytes` to `path` whole, in a private directory: into a new file of a fresh
/// name created 0600 with `O_EXCL` (a planted file or symlink is never written through),
/// then renamed over `path`.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    private_dir(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..64u32 {
        let temporary = dir.join(format!(
            ".{name}.{}.{stamp:x}.{attempt}.tmp",
            std::process::id()
        ));
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(no_follow())
            .open(&temporary);
        let mut file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(no_symlink(&temporary, e)),
        };
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&temporary, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        return written;
    }
    Err(refused(
        dir,
        "every temporary name buddy tried was taken; remove the stray .*.tmp files",
    ))
}

/// Reads a private file: `None` when it does not exist; refused when it is a symlink or
/// another user's file (what someone planted is never taken as buddy's own).
pub fn read_private(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(no_follow())
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(no_symlink(path, e)),
    };
    let meta = file.metadata()?;
    one_regular_file(path, &meta)?;
    if meta.uid() != me() {
        return Err(refused(
            path,
            &format!(
                "belongs to uid {}, not to the user buddy runs as; buddy does not read secrets from a file another user made",
                meta.uid()
            ),
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}
