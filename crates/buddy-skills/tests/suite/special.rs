//! Files that are not plain files: hard links to files outside, FIFOs, sockets and
//! devices reached through links. Each is refused with a clear error, at once, by every
//! file skill, under both ways of resolving paths.

use std::path::Path;
use std::time::Duration;

use buddy_core::ToolOutcome;
use buddy_skills::builtin::{FileLimits, builtin_skills};
use buddy_skills::{Resolution, Sandbox, SkillRegistry};

use super::invoke;

const MODES: [Resolution; 2] = [Resolution::Kernel, Resolution::Walk];

fn registry(sandbox: &Sandbox) -> SkillRegistry {
    let mut registry = SkillRegistry::new();
    registry
        .register_all(builtin_skills(sandbox, FileLimits::default()))
        .unwrap();
    registry
}

/// A call that must end by itself, quickly: a blocked open would hang here.
async fn call(registry: &SkillRegistry, tool: &str, args: &str) -> ToolOutcome {
    tokio::time::timeout(Duration::from_secs(10), invoke(registry, tool, args))
        .await
        .unwrap_or_else(|_| panic!("{tool} {args} blocked"))
}

fn refused(out: &ToolOutcome, words: &str) {
    assert!(
        out.is_error && out.content.contains(words),
        "expected an error containing {words:?}: {}",
        out.content
    );
}

#[tokio::test]
async fn a_hard_link_to_a_file_outside_is_neither_read_found_nor_written() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        // Same file system (both under the temp dir), so the link can be made.
        std::fs::hard_link(&secret, dir.path().join("linked.txt")).unwrap();
        let sandbox = Sandbox::with_resolution(dir.path(), mode).unwrap();
        let r = registry(&sandbox);
        refused(
            &call(&r, "read_file", r#"{"path":"linked.txt"}"#).await,
            "hard links",
        );
        let found = call(&r, "search_files", r#"{"query":"SECRET"}"#).await;
        assert!(
            found.content.starts_with("no matches")
                && found
                    .content
                    .contains("1 hard-linked file(s) were not searched"),
            "{mode:?}: {}",
            found.content
        );
        for append in [true, false] {
            let args = format!(r#"{{"path":"linked.txt","content":"pwned","append":{append}}}"#);
            refused(&call(&r, "write_file", &args).await, "hard links");
        }
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP SECRET\n");

        // An operator may allow reading them; writing stays refused.
        let r = registry(&sandbox.clone().read_hard_links(true));
        let read = call(&r, "read_file", r#"{"path":"linked.txt"}"#).await;
        assert_eq!(
            (read.content.as_str(), read.is_error),
            ("TOP SECRET\n", false)
        );
        refused(
            &call(&r, "write_file", r#"{"path":"linked.txt","content":"x"}"#).await,
            "hard links",
        );
        std::fs::remove_file(dir.path().join("linked.txt")).unwrap();
    }
}

fn make_fifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_bits_truncate(0o644),
        0,
    )
    .unwrap();
}

#[tokio::test]
async fn a_fifo_is_refused_without_blocking() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        make_fifo(&dir.path().join("pipe"));
        std::fs::write(dir.path().join("note.txt"), "the pipe is here\n").unwrap();
        let r = registry(&Sandbox::with_resolution(dir.path(), mode).unwrap());
        refused(&call(&r, "read_file", r#"{"path":"pipe"}"#).await, "FIFO");
        // Nobody reads the pipe: a blocking open for writing would wait forever.
        refused(
            &call(&r, "write_file", r#"{"path":"pipe","content":"x"}"#).await,
            "FIFO",
        );
        let found = call(&r, "search_files", r#"{"query":"pipe"}"#).await;
        assert_eq!(found.content, "note.txt:1: the pipe is here", "{mode:?}");
        let listed = call(&r, "list_dir", "{}").await;
        assert_eq!(
            listed.content,
            "note.txt (17 bytes)\npipe (a FIFO (named pipe))"
        );
    }
}

#[tokio::test]
async fn a_fifo_with_a_reader_is_still_refused_for_writing() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("pipe");
    make_fifo(&pipe);
    // Hold the read end open (non-blocking), so an open for writing would succeed.
    let _reader = rustix::fs::open(
        &pipe,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let r = registry(&Sandbox::new(dir.path()).unwrap());
    refused(
        &call(&r, "write_file", r#"{"path":"pipe","content":"x"}"#).await,
        "FIFO",
    );
}

#[tokio::test]
async fn a_socket_is_refused() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let _listener =
            std::os::unix::net::UnixListener::bind(dir.path().join("control.sock")).unwrap();
        let r = registry(&Sandbox::with_resolution(dir.path(), mode).unwrap());
        refused(
            &call(&r, "read_file", r#"{"path":"control.sock"}"#).await,
            "socket",
        );
        refused(
            &call(&r, "write_file", r#"{"path":"control.sock","content":"x"}"#).await,
            "socket",
        );
        let listed = call(&r, "list_dir", "{}").await;
        assert_eq!(listed.content, "control.sock (a socket)");
    }
}

#[tokio::test]
async fn a_device_reached_through_a_link_is_never_read() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
        let depth = dir.path().components().count();
        let relative = format!("{}dev/urandom", "../".repeat(depth));
        std::os::unix::fs::symlink(&relative, dir.path().join("random")).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("/dev", dir.path().join("sub/devices")).unwrap();
        let r = registry(&Sandbox::with_resolution(dir.path(), mode).unwrap());
        for path in ["zero", "random", "sub/devices/zero", "sub/devices/null"] {
            let args = format!(r#"{{"path":"{path}"}}"#);
            refused(&call(&r, "read_file", &args).await, "symlink");
            let args = format!(r#"{{"path":"{path}","content":"x"}}"#);
            refused(&call(&r, "write_file", &args).await, "symlink");
        }
        refused(
            &call(&r, "list_dir", r#"{"path":"sub/devices"}"#).await,
            "symlink",
        );
        let found = call(&r, "search_files", r#"{"query":"x"}"#).await;
        assert_eq!(found.content, "no matches for `x`", "{mode:?}");
    }
}

#[tokio::test]
async fn links_that_stay_inside_are_followed_by_the_kernel_and_refused_by_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("v2")).unwrap();
    std::fs::write(dir.path().join("v2/notes.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink("v2", dir.path().join("latest")).unwrap();
    let kernel = registry(&Sandbox::with_resolution(dir.path(), Resolution::Kernel).unwrap());
    let out = call(&kernel, "read_file", r#"{"path":"latest/notes.txt"}"#).await;
    assert_eq!((out.content.as_str(), out.is_error), ("inside\n", false));
    let walk = registry(&Sandbox::with_resolution(dir.path(), Resolution::Walk).unwrap());
    let out = call(&walk, "read_file", r#"{"path":"latest/notes.txt"}"#).await;
    refused(&out, "do not follow symlinks");
}

#[test]
fn new_picks_the_kernel_resolution_where_openat2_exists() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(dir.path()).unwrap();
    // Linux 5.6+ has openat2; the fallback is for older kernels and seccomp filters.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    if (major, minor) >= (5, 6) {
        assert_eq!(sandbox.resolution(), Resolution::Kernel, "kernel {release}");
    }
}
