//! A process and its descendants as `/proc` shows them (Linux): the CPU time they have
//! used and their peak resident memory, for gateways of one process (buddy serve) and of
//! many (LiteLLM's CLI, uvicorn's parent and its workers) alike. Elsewhere every figure
//! is 0.

use std::collections::HashMap;

/// Clock ticks per second of `/proc/PID/stat`'s times (Linux's `USER_HZ`, 100 on every
/// architecture's user ABI).
const TICKS_PER_SEC: f64 = 100.0;

/// `pid` and every process below it.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            if let Some(parent) = stat_fields(&stat).and_then(|f| f.ppid) {
                children.entry(parent).or_default().push(child);
            }
        }
    }
    let mut all = vec![pid];
    let mut next = 0;
    while next < all.len() {
        if let Some(below) = children.get(&all[next]) {
            all.extend(
                below
                    .iter()
                    .filter(|c| !all.contains(c))
                    .copied()
                    .collect::<Vec<_>>(),
            );
        }
        next += 1;
    }
    all
}

/// CPU time (user + system) used so far by `pid` and its descendants, in ms.
pub fn cpu_ms(pid: u32) -> f64 {
    tree(pid)
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .filter_map(|stat| stat_fields(&stat))
        .map(|f| (f.utime + f.stime) as f64 * 1000.0 / TICKS_PER_SEC)
        .sum()
}

/// Peak resident memory (VmHWM) of `pid` and its descendants, summed, in KiB (pages a
/// worker shares with its parent count once per process).
pub fn peak_rss_kib(pid: u32) -> u64 {
    tree(pid).into_iter().map(super::load::peak_rss_kib).sum()
}

/// The figures read from one `/proc/PID/stat` line.
#[derive(Debug, PartialEq, Eq)]
struct StatFields {
    ppid: Option<u32>,
    utime: u64,
    stime: u64,
}

/// Reads `stat` (its command name, in parentheses, may hold spaces and parentheses:
/// fields are counted after the last `)`).
fn stat_fields(stat: &str) -> Option<StatFields> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state(3) ppid(4) … utime(14) stime(15), numbered from 1.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let at = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some(StatFields {
        ppid: at(4).and_then(|p| u32::try_from(p).ok()),
        utime: at(14)?,
        stime: at(15)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_after_the_command_name() {
        let line = "4242 (uvicorn (worker) 1) S 4200 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 1000 1 2 3";
        assert_eq!(
            stat_fields(line),
            Some(StatFields {
                ppid: Some(4200),
                utime: 250,
                stime: 75
            })
        );
        assert_eq!(stat_fields("4242 (cut short) S 1 2"), None);
        assert_eq!(stat_fields("no parenthesis"), None);
    }

    #[test]
    fn this_process_is_its_own_tree() {
        let me = std::process::id();
        let tree = tree(me);
        assert_eq!(tree.first(), Some(&me));
        // A process that does not exist is itself and nothing else, using nothing.
        assert_eq!(super::tree(u32::MAX), vec![u32::MAX]);
        assert_eq!(cpu_ms(u32::MAX), 0.0);
        assert_eq!(peak_rss_kib(u32::MAX), 0);
        if cfg!(target_os = "linux") {
            assert!(peak_rss_kib(me) > 0);
        }
    }
}
