//! Opening beneath the root handle: by the kernel in one step, or name by name.

use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::RelPath;

/// A directory to list or descend into.
pub const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);
/// A file to read: non-blocking, so a FIFO or device cannot hold the open.
pub const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);
/// A file to write, created if missing; never truncated by the open itself.
pub const WRITE_FLAGS: OFlags = OFlags::WRONLY
    .union(OFlags::CREATE)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// Whether this kernel (and any seccomp filter) lets `openat2` resolve beneath a handle.
pub fn kernel_resolves(root: &OwnedFd) -> bool {
    !matches!(
        rustix::fs::openat2(root, ".", DIR_FLAGS, Mode::empty(), BENEATH),
        Err(Errno::NOSYS | Errno::PERM)
    )
}

/// One `openat2` from the root: the kernel refuses every step out of it (`EXDEV`).
pub fn beneath(
    root: &OwnedFd,
    path: &RelPath,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    loop {
        match rustix::fs::openat2(root, path.as_os_string(), flags, mode, BENEATH) {
            // The kernel asks for a retry when a rename raced the lookup.
            Err(Errno::AGAIN) => continue,
            other => return other,
        }
    }
}

/// Name by name from the root with `O_NOFOLLOW`: a symlink anywhere is refused (`ELOOP`).
pub fn walk(root: &OwnedFd, path: &RelPath, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    let Some((last, parents)) = path.names().split_last() else {
        return rustix::fs::openat(root, ".", flags, mode);
    };
    let mut dir: Option<OwnedFd> = None;
    for name in parents {
        let at = dir.as_ref().unwrap_or(root);
        dir = Some(rustix::fs::openat(
            at,
            name,
            DIR_FLAGS | OFlags::NOFOLLOW,
            Mode::empty(),
        )?);
    }
    let at = dir.as_ref().unwrap_or(root);
    rustix::fs::openat(at, last, flags | OFlags::NOFOLLOW, mode)
}
