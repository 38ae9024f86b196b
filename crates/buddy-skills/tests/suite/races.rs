//! The sandbox against a race: a thread keeps swapping a directory inside the sandbox
//! with a symlink to a directory outside (an atomic `RENAME_EXCHANGE`), while thousands
//! of reads, listings, searches and writes go through that directory. Nothing from
//! outside may be read, listed or found, and nothing may be written outside.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use buddy_skills::builtin::{FileLimits, builtin_skills};
use buddy_skills::{Resolution, Sandbox, SkillRegistry};
use rustix::fs::{CWD, RenameFlags, renameat_with};

use super::invoke;

/// Calls per skill; the whole race is also bounded in time.
const CALLS: usize = 1_500;
const TIME_LIMIT: Duration = Duration::from_secs(60);

/// What one escape looks like in each skill's result.
const SECRET: &str = "TOP SECRET";
const OUTSIDE_ONLY: &str = "outside-only.txt";

#[derive(Default, Debug)]
struct Escapes {
    read: AtomicUsize,
    listed: AtomicUsize,
    found: AtomicUsize,
    ok_calls: AtomicUsize,
}

fn setup(outside: &Path, inside: &Path) {
    std::fs::write(
        outside.join("secret.txt"),
        format!("{SECRET}: the password\n"),
    )
    .unwrap();
    std::fs::write(outside.join(OUTSIDE_ONLY), format!("{SECRET}\n")).unwrap();
    std::fs::create_dir(inside.join("d")).unwrap();
    std::fs::write(inside.join("d/secret.txt"), "harmless\n").unwrap();
    std::os::unix::fs::symlink(outside, inside.join("swap")).unwrap();
}

/// Swaps `d` and `swap` until told to stop; returns how many swaps it made.
fn flipper(inside: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    let (d, swap) = (inside.join("d"), inside.join("swap"));
    std::thread::spawn(move || {
        let mut flips = 0;
        while !stop.load(Ordering::Relaxed) {
            if renameat_with(CWD, &d, CWD, &swap, RenameFlags::EXCHANGE).is_ok() {
                flips += 1;
            }
        }
        flips
    })
}

async fn race(sandbox: Sandbox, inside: &Path, outside: &Path) {
    let mut registry = SkillRegistry::new();
    registry
        .register_all(builtin_skills(&sandbox, FileLimits::default()))
        .unwrap();
    let registry = Arc::new(registry);
    let escapes = Arc::new(Escapes::default());
    let stop = Arc::new(AtomicBool::new(false));
    let flips = flipper(inside, Arc::clone(&stop));
    let started = Instant::now();

    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..4usize {
        let (registry, escapes) = (Arc::clone(&registry), Arc::clone(&escapes));
        tasks.spawn(async move {
            for i in 0..CALLS {
                if started.elapsed() > TIME_LIMIT {
                    break;
                }
                let (tool, args) = match worker {
                    0 => ("read_file", r#"{"path":"d/secret.txt"}"#.to_owned()),
                    1 => ("list_dir", r#"{"path":"d"}"#.to_owned()),
                    2 => (
                        "search_files",
                        r#"{"query":"SECRET","path":"d"}"#.to_owned(),
                    ),
                    _ => (
                        "write_file",
                        format!(r#"{{"path":"d/w-{i}.txt","content":"x"}}"#),
                    ),
                };
                let out = invoke(&registry, tool, &args).await;
                if !out.is_error {
                    escapes.ok_calls.fetch_add(1, Ordering::Relaxed);
                }
                let counter = match worker {
                    0 if out.content.contains(SECRET) => &escapes.read,
                    1 if out.content.contains(OUTSIDE_ONLY) => &escapes.listed,
                    2 if out.content.contains(SECRET) => &escapes.found,
                    _ => continue,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flips.join().unwrap();

    let written_outside = std::fs::read_dir(outside)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("w-"))
        })
        .count();
    let counts = (
        escapes.read.load(Ordering::Relaxed),
        escapes.listed.load(Ordering::Relaxed),
        escapes.found.load(Ordering::Relaxed),
        written_outside,
    );
    eprintln!(
        "race: {flips} swaps, {} calls succeeded; escapes (read, listed, found, written) = {counts:?}",
        escapes.ok_calls.load(Ordering::Relaxed)
    );
    assert!(
        flips > 100,
        "the swapper must actually race ({flips} swaps)"
    );
    assert!(
        escapes.ok_calls.load(Ordering::Relaxed) > 0,
        "calls that do not race still work"
    );
    assert_eq!(
        counts,
        (0, 0, 0, 0),
        "escapes (read, listed, found, written)"
    );
}

async fn race_with(resolution: Resolution) {
    let outside = tempfile::tempdir().unwrap();
    let inside = tempfile::tempdir().unwrap();
    setup(outside.path(), inside.path());
    let sandbox = Sandbox::with_resolution(inside.path(), resolution).unwrap();
    race(sandbox, inside.path(), outside.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_to_outside_never_leaks() {
    // The kernel's one-step resolution, as `Sandbox::new` picks on Linux 5.6 and later.
    race_with(Resolution::Kernel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handle_by_handle_fallback_never_leaks_either() {
    race_with(Resolution::Walk).await;
}
