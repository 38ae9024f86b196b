//! Who the programs buddy starts (command skills, stdio MCP servers) run as.
//!
//! buddy hides its environment and memory by being non-dumpable, but that does not stop
//! a process with `CAP_SYS_PTRACE`: a skill started by a root buddy (the default in
//! containers) with every capability read `/proc/<buddy>/environ`. So a root buddy
//! starts its programs with no capability at all (bounding, effective, permitted,
//! inheritable and ambient sets emptied) and `no_new_privs` (no setuid program gives one
//! back), and, when `[skills] run_as` names one, as that unprivileged user — then
//! buddy's own files are out of reach as well. A buddy that is not root starts them as
//! itself, as before.

use std::io;

/// `[skills] run_as`: the user command skills and stdio MCP servers run as when buddy
/// runs as root: a name (`"nobody"`), a uid (`"65534"`), or either with a group
/// (`"nobody:nogroup"`, `"1000:1000"`); `"root"` keeps uid 0 (still without
/// capabilities).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    spec: String,
    uid: u32,
    gid: u32,
}

/// `run_as` names no user or group this system knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunAsError {
    #[error(
        "run_as = \"{spec}\": no user `{name}` in /etc/passwd; give a user name or a numeric uid (e.g. \"65534\")"
    )]
    UnknownUser { spec: String, name: String },
    #[error(
        "run_as = \"{spec}\": no group `{name}` in /etc/group; give a group name or a numeric gid"
    )]
    UnknownGroup { spec: String, name: String },
    #[error(
        "run_as = \"{spec}\": buddy runs as uid {uid}, not root, so it cannot start programs as another user; \
         remove run_as (they run as buddy's own user) or start buddy as root"
    )]
    NotRoot { spec: String, uid: u32 },
}

impl RunAs {
    /// Parses `user[:group]`, looking names up in `/etc/passwd` and `/etc/group`.
    pub fn parse(spec: &str) -> Result<Self, RunAsError> {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
        Self::parse_with(spec, &passwd, &group)
    }

    /// [`RunAs::parse`] against the given `passwd` and `group` files' text.
    fn parse_with(spec: &str, passwd: &str, groups: &str) -> Result<Self, RunAsError> {
        let spec = spec.trim();
        let (user, group) = match spec.split_once(':') {
            Some((user, group)) => (user, Some(group)),
            None => (spec, None),
        };
        // name:password:uid:gid:…; the user's entry, by name or by uid.
        let entry = |user: &str| {
            passwd.lines().find_map(|line| {
                let mut fields = line.split(':');
                let name = fields.next()?;
                let uid: u32 = fields.nth(1)?.parse().ok()?;
                let gid: u32 = fields.next()?.parse().ok()?;
                (name == user || user.parse() == Ok(uid)).then_some((uid, gid))
            })
        };
        let (uid, primary) = match (entry(user), user.parse::<u32>()) {
            (Some(found), _) => found,
            (None, Ok(uid)) => (uid, uid),
            (None, Err(_)) => {
                return Err(RunAsError::UnknownUser {
                    spec: spec.to_owned(),
                    name: user.to_owned(),
                });
            }
        };
        let gid = match group {
            None => primary,
            Some(group) => match group.parse::<u32>() {
                Ok(gid) => gid,
                Err(_) => groups
                    .lines()
                    .find_map(|line| {
                        let mut fields = line.split(':');
                        (fields.next()? == group).then_some(())?;
                        fields.nth(1)?.parse().ok()
                    })
                    .ok_or_else(|| RunAsError::UnknownGroup {
                        spec: spec.to_owned(),
                        name: group.to_owned(),
                    })?,
            },
        };
        Ok(RunAs {
            spec: spec.to_owned(),
            uid,
            gid,
        })
    }

    /// The uid it names.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The gid it names.
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// An error when this buddy cannot start programs as that user (it is not root and
    /// the user is not its own).
    pub fn check_usable(&self) -> Result<(), RunAsError> {
        let me = rustix::process::geteuid();
        if me.is_root() || me.as_raw() == self.uid {
            return Ok(());
        }
        Err(RunAsError::NotRoot {
            spec: self.spec.clone(),
            uid: me.as_raw(),
        })
    }
}

impl std::fmt::Display for RunAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.spec)
    }
}

impl<'de> serde::Deserialize<'de> for RunAs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec = String::deserialize(d)?;
        RunAs::parse(&spec).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for RunAs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.spec)
    }
}

/// What a program buddy starts may do, decided from buddy's own user and `run_as`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ChildPrivileges {
    /// Empty every capability set and set `no_new_privs` (buddy is root).
    restrict: bool,
    /// Switch to this uid and gid (with no supplementary groups).
    user: Option<(u32, u32)>,
}

impl ChildPrivileges {
    /// For this buddy: as itself when it is not root; when it is, without capabilities
    /// and, given `run_as`, as that user.
    pub fn for_run_as(run_as: Option<&RunAs>) -> Self {
        let me = rustix::process::geteuid().as_raw();
        match run_as {
            _ if me != 0 => ChildPrivileges {
                restrict: false,
                // As itself; another user is refused by `RunAs::check_usable`, and
                // would fail to start here (EPERM) rather than run as buddy.
                user: run_as.filter(|r| r.uid != me).map(|r| (r.uid, r.gid)),
            },
            None => ChildPrivileges {
                restrict: true,
                user: None,
            },
            Some(r) => ChildPrivileges {
                restrict: true,
                user: (r.uid != 0).then_some((r.uid, r.gid)),
            },
        }
    }

    /// What they run as, in words (for `buddy doctor`).
    pub fn describe(&self) -> String {
        let who = match self.user {
            Some((uid, gid)) => format!("uid {uid}, gid {gid}"),
            None => format!("buddy's own user (uid {})", rustix::process::geteuid()),
        };
        match self.restrict {
            true => format!("{who}, without capabilities and with no_new_privs"),
            false => who,
        }
    }

    /// Whether they run as root (without capabilities, but still the owner of root's files).
    pub fn keeps_root(&self) -> bool {
        self.restrict && self.user.is_none()
    }

    /// Makes `command` start with these privileges (nothing to do for a buddy that is not
    /// root and has no `run_as`).
    #[allow(unsafe_code)]
    pub fn apply(self, command: &mut tokio::process::Command) {
        if self == ChildPrivileges::default() {
            return;
        }
        // SAFETY: `enter` runs in the forked child before exec and only makes system calls
        // (prctl, setgroups, setresgid, setresuid, capset): no allocation, no lock.
        unsafe {
            command.pre_exec(move || self.enter());
        }
    }

    /// Takes the privileges in the calling (forked, single-threaded) process; only
    /// async-signal-safe calls. Any failure fails the start: a program never runs with
    /// more than it was meant to.
    #[allow(unsafe_code)]
    pub(crate) fn enter(self) -> io::Result<()> {
        let ok = |r: libc::c_int| {
            if r == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        #[cfg(target_os = "linux")]
        if self.restrict {
            // SAFETY: prctl with integer arguments only.
            ok(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
            // The bounding set first (it needs CAP_SETPCAP, gone once the user changes):
            // each capability the kernel knows, until it says there are no more.
            for cap in 0..64 {
                // SAFETY: as above.
                if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
                    let error = io::Error::last_os_error();
                    if error.raw_os_error() == Some(libc::EINVAL) {
                        break;
                    }
                    return Err(error);
                }
            }
            // SAFETY: as above. EINVAL: a kernel without ambient capabilities (< 4.3).
            let cleared = unsafe {
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_CLEAR_ALL,
                    0,
                    0,
                    0,
                )
            };
            if cleared != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some((uid, gid)) = self.user {
            // SAFETY: plain system calls; setgroups with no groups reads no memory.
            unsafe {
                ok(libc::setgroups(0, std::ptr::null()))?;
                ok(libc::setresgid(gid, gid, gid))?;
                ok(libc::setresuid(uid, uid, uid))?;
            }
        }
        #[cfg(target_os = "linux")]
        if self.restrict {
            clear_capability_sets()?;
        }
        Ok(())
    }
}

/// Empties the effective, permitted and inheritable sets (a uid-0 process keeps them
/// otherwise; a uid change clears only the first two).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn clear_capability_sets() -> io::Result<()> {
    /// `struct __user_cap_header_struct`.
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    /// `struct __user_cap_data_struct`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    /// `_LINUX_CAPABILITY_VERSION_3`: two `Data`, for 64 capabilities.
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let empty = Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    };
    let data = [empty; 2];
    // SAFETY: capset reads one header and two data structs, which live on this stack.
    let r = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    match r {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                          nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                          alice:x:1000:1001::/home/alice:/bin/sh\n";
    const GROUP: &str = "root:x:0:\nnogroup:x:65534:\nstaff:x:50:alice\n";

    fn parse(spec: &str) -> Result<(u32, u32), RunAsError> {
        RunAs::parse_with(spec, PASSWD, GROUP).map(|r| (r.uid, r.gid))
    }

    #[test]
    fn run_as_takes_names_and_numbers() {
        assert_eq!(parse("nobody"), Ok((65534, 65534)));
        assert_eq!(parse("alice"), Ok((1000, 1001)));
        assert_eq!(parse("1000"), Ok((1000, 1001)));
        assert_eq!(parse("4242"), Ok((4242, 4242)));
        assert_eq!(parse("alice:staff"), Ok((1000, 50)));
        assert_eq!(parse("4242:77"), Ok((4242, 77)));
        assert_eq!(parse("root"), Ok((0, 0)));
        assert!(matches!(
            parse("mallory"),
            Err(RunAsError::UnknownUser { .. })
        ));
        assert!(matches!(
            parse("alice:wheel"),
            Err(RunAsError::UnknownGroup { .. })
        ));
    }
}
