//! The reaper of one command call (Linux): a process between buddy and the command that
//! is the `PR_SET_CHILD_SUBREAPER` of the command's whole tree. A child that leaves the
//! call's process group (`setsid`), double-forks, replaces its environment and makes
//! itself non-dumpable (so `/proc/<pid>/environ` cannot be read to find its tag) is
//! still, once its parents are gone, a child of the reaper — not of init. When the
//! command ends (or buddy sends SIGTERM: a timeout, a cancelled turn), the reaper kills
//! its children, adopts and kills theirs, and exits only when it has none left, with the
//! command's own exit status.
//!
//! The reaper is the first child of buddy's fork, before exec: it runs only
//! async-signal-safe system calls, allocates nothing, and holds none of buddy's file
//! descriptors. It is buddy's user (so a command run as `run_as` cannot kill it) and, like
//! buddy, not dumpable.

use std::io;

/// Forks the calling (just forked, single-threaded) child in two: the command's process,
/// where this returns `Ok(())` and which goes on to exec, and the reaper, which never
/// returns. `buddy_group` is the process group the reaper joins: it leaves the call's
/// own group, which buddy kills.
#[allow(unsafe_code)]
pub(crate) fn split(buddy_group: libc::pid_t) -> io::Result<()> {
    // SAFETY (whole function): only system calls on values on this stack, as is allowed
    // between fork and exec; no allocation, no lock.
    unsafe {
        // Every signal blocked before the fork, so that no SIGCHLD or SIGTERM meant for
        // the reaper is lost; the command gets the mask it had back.
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        if libc::sigprocmask(libc::SIG_SETMASK, &all, &mut before) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            let error = io::Error::last_os_error();
            libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
            return Err(error);
        }
        match libc::fork() {
            -1 => {
                let error = io::Error::last_os_error();
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                Err(error)
            }
            0 => {
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                Ok(())
            }
            command => reap(command, buddy_group),
        }
    }
}

/// The reaper's life: wait for the command (or SIGTERM / SIGHUP), then sweep, then exit
/// as the command did.
#[allow(unsafe_code)]
fn reap(command: libc::pid_t, buddy_group: libc::pid_t) -> ! {
    // SAFETY (whole function): system calls on values on this stack; see `split`.
    unsafe {
        let call_group = libc::getpid();
        // Out of the call's group, which buddy kills on a timeout or a runaway printer:
        // the reaper must live to sweep. A failure leaves it in the group: then it dies
        // with it and buddy's own sweep (by tag) remains.
        libc::setpgid(0, buddy_group);
        close_every_descriptor();
        let mut wake: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut wake);
        for signal in [libc::SIGCHLD, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut wake, signal);
        }
        let mut status: Option<libc::c_int> = None;
        while status.is_none() {
            let signal = libc::sigwaitinfo(&wake, std::ptr::null_mut());
            if signal == libc::SIGTERM || signal == libc::SIGHUP {
                break;
            }
            // SIGCHLD: the command, or an adopted orphan that ended by itself.
            loop {
                let mut st = 0;
                let pid = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if pid <= 0 {
                    break;
                }
                if pid == command {
                    status = Some(st);
                }
            }
        }
        // The sweep: the call's group at once, then every child (adopted or not) until
        // there are none. Each round kills what is there and reaps at least one; what a
        // killed process leaves behind is adopted here for the next round.
        if libc::getpgrp() != call_group {
            libc::kill(-call_group, libc::SIGKILL);
        }
        loop {
            kill_children();
            let mut st = 0;
            let pid = libc::waitpid(-1, &mut st, 0);
            if pid == command {
                status = Some(st);
            }
            if pid < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        exit_as(status)
    }
}

/// Sends SIGKILL to every child listed in `/proc/thread-self/children` (the reaper has
/// one thread). Without that file (a kernel without `CONFIG_PROC_CHILDREN`) nothing is
/// sent: the group kill and buddy's sweep by tag remain.
#[allow(unsafe_code)]
fn kill_children() {
    // SAFETY: open/read/kill/close on a stack buffer and a static path.
    unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        let mut pid: libc::pid_t = 0;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            let n = usize::try_from(n).unwrap_or(0).min(buf.len());
            for &byte in &buf[..n] {
                if byte.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(libc::pid_t::from(byte - b'0'));
                } else {
                    if pid > 0 {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    pid = 0;
                }
            }
        }
        if pid > 0 {
            libc::kill(pid, libc::SIGKILL);
        }
        libc::close(fd);
    }
}

/// Closes every file descriptor: buddy's sockets and files, and the call's pipes (whose
/// readers in buddy must see their end when the command's tree closes them).
#[allow(unsafe_code)]
fn close_every_descriptor() {
    // SAFETY: close_range and close take integers.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) == 0 {
            return;
        }
        // Before Linux 5.9: one by one, up to the limit on open files.
        let mut limit: libc::rlimit = std::mem::zeroed();
        let most = match libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) {
            0 => libc::c_int::try_from(limit.rlim_cur).unwrap_or(libc::c_int::MAX),
            _ => 65_536,
        };
        for fd in 0..most {
            libc::close(fd);
        }
    }
}

/// Ends the reaper as the command ended: its exit code, or its signal.
#[allow(unsafe_code)]
fn exit_as(status: Option<libc::c_int>) -> ! {
    // SAFETY: signal, sigprocmask, kill and _exit on integers and a stack sigset.
    unsafe {
        match status {
            Some(st) if libc::WIFEXITED(st) => libc::_exit(libc::WEXITSTATUS(st)),
            Some(st) if libc::WIFSIGNALED(st) => {
                let signal = libc::WTERMSIG(st);
                libc::signal(signal, libc::SIG_DFL);
                let mut only: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut only);
                libc::sigaddset(&mut only, signal);
                libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
                libc::kill(libc::getpid(), signal);
                libc::_exit(128 + signal)
            }
            _ => libc::_exit(1),
        }
    }
}
