//! A command's whole process tree ends with its call. The command runs in a process
//! group of its own, and killing the group ends everything that stayed in it. A child
//! that leaves the group (`setsid`, `setpgid`) is still found: every process of the call
//! inherits a tag in its environment (`BUDDY_SKILL_RUN=…`, unique per call), and at the
//! end of the call every process whose environment holds the tag is killed too. This
//! works unprivileged; without `/proc` (other systems) only the group is killed. On
//! Linux a call reaper (`call_reaper`) also adopts and kills whatever of the tree is
//! left, which finds too a process that replaced its environment or made itself
//! non-dumpable (its tag then cannot be read).

use std::sync::atomic::{AtomicU64, Ordering};

use rustix::process::{Pid, Signal};

/// The variable that tags every process of one command call.
pub(crate) const RUN_TAG_VAR: &str = "BUDDY_SKILL_RUN";

/// Rounds of the search for tagged processes (a process that forks while it is killed
/// leaves a new one behind for the next round).
const SWEEPS: usize = 3;

/// A tag unique to one command call in this process (and, with the process id, on the
/// machine).
pub(crate) fn new_tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Kills a command's process tree when dropped: on a timeout, a cancelled turn, or after
/// the command ended (children it left in the background die with it).
pub(crate) struct TreeKiller {
    pub group: Option<Pid>,
    pub tag: String,
    /// The call's reaper (a pidfd, so a reused pid is never signalled): SIGTERM makes it
    /// sweep the tree and exit. It has already, when the call ended by itself.
    pub reaper: Option<std::os::fd::OwnedFd>,
}

impl Drop for TreeKiller {
    fn drop(&mut self) {
        if let Some(reaper) = &self.reaper {
            let _ = rustix::process::pidfd_send_signal(reaper, Signal::TERM);
        }
        kill_group(self.group);
        kill_tagged(&self.tag);
    }
}

/// Sends SIGKILL to a process group.
pub(crate) fn kill_group(group: Option<Pid>) {
    if let Some(group) = group {
        // ESRCH (the group is already gone) is the usual, good case.
        let _ = rustix::process::kill_process_group(group, Signal::KILL);
    }
}

/// Kills every process (but this one) whose environment holds `RUN_TAG_VAR=tag`;
/// returns how many it found.
pub(crate) fn kill_tagged(tag: &str) -> usize {
    let needle = format!("{RUN_TAG_VAR}={tag}\0");
    let me = std::process::id();
    let mut killed = 0;
    for _ in 0..SWEEPS {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return killed;
        };
        let mut found = 0;
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == me {
                continue;
            }
            // Processes of other users, and those gone meanwhile, cannot be read: skipped.
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            let tagged = environ
                .split(|b| *b == 0)
                .any(|var| var == &needle.as_bytes()[..needle.len() - 1]);
            if tagged
                && let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw)
                && rustix::process::kill_process(pid, Signal::KILL).is_ok()
            {
                found += 1;
            }
        }
        killed += found;
        if found == 0 {
            break;
        }
    }
    killed
}

/// Hides this process's environment (its API keys) from the programs it starts: their
/// user can no longer read `/proc/<buddy>/environ` or its memory (`PR_SET_DUMPABLE` 0;
/// it also means no core dumps, which would hold the same secrets). The programs
/// themselves start dumpable as usual. A root user can still read everything: do not
/// run buddy as root.
pub fn hide_own_environment() -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}
