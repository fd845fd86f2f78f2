//! The box every child of this crate runs in (threat model: `docs/security.md`).
//!
//! A spawn forks three processes instead of one:
//!
//! ```text
//! runner ── C (leader: own session + group, cgroup, die-with-runner)
//!             └─ G (pid 1 of a new PID namespace: a tiny init that never execs)
//!                  └─ P (the program: no capabilities, no_new_privs, seccomp, stdio only)
//! ```
//!
//! - **C** enters the execution's cgroup(s), then unshares a user namespace (unprivileged
//!   runners only; it maps our own uid and gid), a PID, mount and IPC namespace and — for
//!   [`crate::NetworkPolicy::LoopbackOnly`] — a network namespace with only `lo`, up. It then
//!   forks G, closes every descriptor it holds and waits for G to report P's wait status,
//!   which it reproduces as its own (exit code, or death by the same signal): to the caller C
//!   *is* the program. C ignores SIGTERM/SIGINT/SIGHUP, so the group signals of the caller's
//!   termination schedule reach P while C stays until P has ended.
//! - **G** is the namespace's init. It is not dumpable (a case cannot read its memory or
//!   environment, which are a copy of the runner's) and makes every mount a slave. With
//!   [`HostFiles::ReadOnly`] (cases) it then seals the host (`seal_host`: every mount and a
//!   fresh `/proc` read-only, a private `/tmp` and `/dev`, the writable and read-only paths
//!   attached at their places from copies taken first); with [`HostFiles::Shared`] it binds
//!   the read-only paths over themselves and marks them read-only (`mount_setattr`,
//!   recursive), re-opens the writable exceptions beneath them, makes the cgroup file systems
//!   read-only and mounts a fresh `/proc`. Only then does it enter the program's working
//!   directory (so one below a read-only path is read-only too). Then it forks P and reaps:
//!   every process of the namespace is its descendant or, once orphaned, its child. When the namespace is
//!   empty it exits; when the runner process dies (the *death pipe*, whose only write end
//!   the runner holds, reports end-of-file) it kills everything in the namespace and exits.
//!   Either way the kernel kills whatever is left in a PID namespace whose init has ended —
//!   processes that changed session, double-forked, or left the cgroup included.
//! - **P** gets `PR_SET_PDEATHSIG` (it dies with G), drops every capability (bounding set,
//!   ambient set, then effective/permitted/inheritable), sets `no_new_privs`, marks every
//!   descriptor above 2 close-on-exec (`close_range`) and installs the seccomp filters of
//!   `seccomp.rs`; then `std` executes the program.
//!
//! Everything between the fork and `exec` (or `_exit`) makes raw, async-signal-safe system
//! calls on values prepared before the fork: C strings, BPF programs and descriptors live in
//! the `Plan`, nothing allocates. A failing step carries a step number (and for path steps
//! the index of the path) in the errno that `std` reports from the child, so the caller can
//! name the mechanism the kernel refused (fail closed, never a weaker box).

use crate::seccomp::Filters;
/// The seccomp part of [`SandboxRecord`] (defined beside the filters it describes).
pub use crate::seccomp::SeccompRecord;
use serde::{Deserialize, Serialize};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What the box protects, beyond the fixed rules (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sandbox {
    /// Paths that are read-only inside the box (bound over themselves; recursive). Paths
    /// that do not exist when the child starts are skipped; give existing ancestors.
    pub read_only: Vec<PathBuf>,
    /// Paths that stay writable: below a read-only path (e.g. the case's own result
    /// directory) or, with [`HostFiles::ReadOnly`], anywhere (the worktree). Must exist when
    /// the child starts.
    pub writable: Vec<PathBuf>,
    /// What the child may write of the rest of the host's file system.
    pub host: HostFiles,
}

/// How much of the host's file system a child may write, beyond [`Sandbox::writable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostFiles {
    /// The host's mounts as they are; only [`Sandbox::read_only`] (and the cgroup file
    /// systems) are protected. For trusted helpers, never for cases.
    #[default]
    Shared,
    /// Every mount is read-only (recursive `mount_setattr` on `/`, the fresh `/proc` with its
    /// `/proc/sys` included) except [`Sandbox::writable`], a private tmpfs `/tmp` and a
    /// private `/dev` (a read-only tmpfs holding only `null`, `zero`, `full`, `random`,
    /// `urandom`, the accelerator nodes, the `fd`/`std*` links and a private tmpfs `shm`;
    /// no terminal). Paths of [`Sandbox::read_only`] and [`Sandbox::writable`] below `/tmp`
    /// are bound into the private `/tmp` at their place.
    ReadOnly,
}

/// The box actually in force for one execution: the evidence a receipt reader needs to see
/// what contained the case, not just that it passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxRecord {
    /// Namespaces the program runs in (`user` only for unprivileged runners).
    pub namespaces: Vec<String>,
    /// The program's init: `kiln-qual-pidns-init` (pid 1, tied to the runner).
    pub pid_namespace_init: String,
    /// Every capability set emptied (bounding, ambient, effective, permitted, inheritable).
    pub capabilities: String,
    /// `PR_SET_NO_NEW_PRIVS` set before exec.
    pub no_new_privs: bool,
    /// The seccomp filter id and what it refuses.
    pub seccomp: SeccompRecord,
    /// Paths read-only inside the box (as given; those that existed).
    pub read_only_paths: Vec<String>,
    /// Writable exceptions below them.
    pub writable_paths: Vec<String>,
    /// The rest of the host's file system: `read_only` (only `writable_paths` and the
    /// `private_mounts` can be written) or `shared`.
    pub host_files: String,
    /// File systems of the box's own (empty when created, gone with it): `/tmp`, `/dev`,
    /// `/dev/shm` for a read-only host.
    pub private_mounts: Vec<String>,
    /// The device nodes of the private `/dev` (bound from the host's); empty for a shared
    /// host.
    pub devices: Vec<String>,
    /// A fresh `/proc` of the PID namespace is mounted.
    pub fresh_proc: bool,
    /// Descriptors the program starts with.
    pub descriptors: String,
    /// The pid limit of the execution's cgroup (`pids.max`), when a pids controller is
    /// available; `null` otherwise (see [`SandboxRecord::pid_limit_source`]).
    pub pid_limit: Option<u64>,
    /// Where the pid limit is enforced (`cgroup_v2`, `cgroup_v1_pids`) or why it is not.
    pub pid_limit_source: String,
    /// This process already runs inside a kiln-qual box (e.g. `kiln-qual serve` as a case
    /// command): the enclosing box's namespaces, init, capabilities, seccomp filters and
    /// read-only paths contain this child too; no new ones can be made inside it.
    pub enclosing_box: bool,
}

/// Whether this process runs inside a kiln-qual box, as the kernel reports it: the init of
/// our PID namespace is a kiln-qual init, every capability is gone from the bounding set,
/// `no_new_privs` is set and a seccomp filter is installed.
pub fn enclosed() -> bool {
    static ENCLOSED: OnceLock<bool> = OnceLock::new();
    *ENCLOSED.get_or_init(|| {
        let init = crate::procfs::read_system_file("/proc/1/comm").unwrap_or_default();
        let status = crate::procfs::read_system_file("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        init.trim_end() == INIT_NAME
            && field("CapBnd:").as_deref() == Some("0000000000000000")
            && field("NoNewPrivs:").as_deref() == Some("1")
            && field("Seccomp:").as_deref() == Some("2")
    })
}

const INIT_NAME: &str = "kq-pidns-init";

// ---------------------------------------------------------------------------------------
// Step numbers carried in errno values from the child.

const TAG: i32 = 0x4b00_0000;
const TAG_MASK: i32 = 0x7f00_0000;

/// The steps of the pre-exec chain, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum Step {
    Setsid = 1,
    Cgroup = 2,
    UserNs = 3,
    Namespaces = 4,
    IdMap = 5,
    LoopbackUp = 6,
    Fork = 7,
    MountPrivate = 8,
    BindReadOnly = 9,
    SetReadOnly = 10,
    BindWritable = 11,
    ProcMount = 12,
    Capabilities = 13,
    NoNewPrivs = 14,
    Seccomp = 15,
    Descriptors = 16,
    Dumpable = 17,
    ProbeInterfaces = 18,
    ProbeTcp = 19,
    Clone = 20,
    HostReadOnly = 21,
    PrivateTmp = 22,
    PrivateDev = 23,
    Chdir = 24,
    ProbeHostReadOnly = 25,
}

impl Step {
    fn from_i32(v: i32) -> Option<Step> {
        use Step::*;
        Some(match v {
            1 => Setsid,
            2 => Cgroup,
            3 => UserNs,
            4 => Namespaces,
            5 => IdMap,
            6 => LoopbackUp,
            7 => Fork,
            8 => MountPrivate,
            9 => BindReadOnly,
            10 => SetReadOnly,
            11 => BindWritable,
            12 => ProcMount,
            13 => Capabilities,
            14 => NoNewPrivs,
            15 => Seccomp,
            16 => Descriptors,
            17 => Dumpable,
            18 => ProbeInterfaces,
            19 => ProbeTcp,
            20 => Clone,
            21 => HostReadOnly,
            22 => PrivateTmp,
            23 => PrivateDev,
            24 => Chdir,
            25 => ProbeHostReadOnly,
            _ => return None,
        })
    }

    /// The mechanism a failure of this step shows to be missing.
    pub(crate) fn mechanism(self) -> &'static str {
        match self {
            Step::Setsid => "a new session (setsid) and die-with-parent (PR_SET_PDEATHSIG)",
            Step::Cgroup => "moving into the execution's cgroup",
            Step::UserNs => "unprivileged user namespaces (unshare CLONE_NEWUSER)",
            Step::Namespaces => {
                "PID, mount, IPC and network namespaces (unshare CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWIPC|CLONE_NEWNET)"
            }
            Step::IdMap => "user namespace id mapping (/proc/self/uid_map)",
            Step::LoopbackUp => {
                "CAP_NET_ADMIN in the new network namespace to bring up lo (SIOCSIFFLAGS)"
            }
            Step::Fork => "forking the PID namespace init",
            Step::MountPrivate => "a private mount namespace (mount MS_REC|MS_SLAVE on /)",
            Step::BindReadOnly => "read-only bind mounts (mount MS_BIND)",
            Step::SetReadOnly => "recursive read-only mount attributes (mount_setattr, Linux 5.12)",
            Step::BindWritable => "writable bind mounts below read-only paths (mount MS_BIND)",
            Step::ProcMount => "a fresh /proc for the PID namespace (mount proc)",
            Step::Capabilities => "dropping capabilities (PR_CAPBSET_DROP, capset)",
            Step::NoNewPrivs => "no_new_privs (PR_SET_NO_NEW_PRIVS)",
            Step::Seccomp => "seccomp filters (seccomp SECCOMP_SET_MODE_FILTER)",
            Step::Descriptors => "close_range (Linux 5.11)",
            Step::Dumpable => "PR_SET_DUMPABLE",
            Step::ProbeInterfaces => "a network namespace containing only lo",
            Step::ProbeTcp => "loopback TCP inside the network namespace",
            Step::Clone => "detached copies of mounts (open_tree OPEN_TREE_CLONE, Linux 5.2)",
            Step::HostReadOnly => {
                "a read-only host file system (recursive mount_setattr MOUNT_ATTR_RDONLY on /)"
            }
            Step::PrivateTmp => "a private /tmp (mount tmpfs)",
            Step::PrivateDev => "a private /dev (mount tmpfs, device node binds)",
            Step::Chdir => "entering the working directory inside the box (chdir)",
            Step::ProbeHostReadOnly => {
                "a read-only host inside the box (/ and /proc/sys/kernel/core_pattern must not be writable)"
            }
        }
    }
}

/// Encodes `step` (and a path index) with the current errno.
fn tagged(step: Step, index: usize) -> io::Error {
    let errno = io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL);
    io::Error::from_raw_os_error(encode(step, index, errno))
}

fn encode(step: Step, index: usize, errno: i32) -> i32 {
    TAG | ((step as i32) << 16) | (((index as i32) & 0xf) << 12) | (errno & 0xfff)
}

/// A decoded pre-exec failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepFailure {
    pub step: Step,
    pub index: usize,
    pub errno: i32,
}

pub(crate) fn decode_raw(code: i32) -> Option<StepFailure> {
    if code & TAG_MASK != TAG {
        return None;
    }
    Some(StepFailure {
        step: Step::from_i32((code >> 16) & 0xff)?,
        index: ((code >> 12) & 0xf) as usize,
        errno: code & 0xfff,
    })
}

/// Decodes a spawn error carrying a step.
pub(crate) fn decode(e: &io::Error) -> Option<StepFailure> {
    decode_raw(e.raw_os_error()?)
}

// ---------------------------------------------------------------------------------------
// The death pipe: its write end lives only in this process (close-on-exec, and closed by
// every C and G), so inits see end-of-file exactly when this process has died.

fn death_pipe() -> Option<(RawFd, RawFd)> {
    static PIPE: OnceLock<Option<(RawFd, RawFd)>> = OnceLock::new();
    *PIPE.get_or_init(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 into a local array; the descriptors are kept for the process lifetime.
        (unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0).then_some((fds[0], fds[1]))
    })
}

// ---------------------------------------------------------------------------------------
// The plan: everything the three processes need, prepared before the fork.

/// At most this many paths of each kind ([`Sandbox::read_only`], [`Sandbox::writable`]).
const MAX_PATHS: usize = 15;
/// At most this many device nodes in a private `/dev`.
const MAX_DEVICES: usize = 32;
/// Mount copies G holds at once: every path and device.
const MAX_CLONES: usize = 2 * MAX_PATHS + MAX_DEVICES;

/// Prepared before the fork; moved into the `pre_exec` closure.
pub(crate) struct Plan {
    /// `cgroup.procs` descriptors the child writes `0` to.
    pub cgroup_procs: Vec<RawFd>,
    /// Our pid, when C must die with the spawning thread (PR_SET_PDEATHSIG).
    pub die_with_parent: Option<libc::pid_t>,
    /// A user namespace is needed (we are not root) with these maps.
    userns: Option<IdMaps>,
    /// Network namespace with only lo.
    pub new_net: bool,
    read_only: Vec<CString>,
    writable: Vec<CString>,
    /// [`HostFiles::ReadOnly`]: every path of both lists, parents first.
    sealed: Option<Vec<Entry>>,
    /// The device nodes of a private `/dev` ([`HostFiles::ReadOnly`]).
    devices: Vec<Entry>,
    cgroup_fs: Vec<CString>,
    /// The program's working directory, entered once the mounts exist.
    cwd: CString,
    filters: &'static Filters,
    death_read: RawFd,
    /// For the probe: P `_exit(0)`s instead of returning to `std` for `exec`.
    probe: bool,
    /// Inside an enclosing box: no new namespaces, init or filters (see [`enclosed`]).
    nested: bool,
}

/// One path put in place inside a read-only host.
struct Entry {
    path: CString,
    dir: bool,
    writable: bool,
    /// Its index in [`Sandbox::read_only`] or [`Sandbox::writable`] (for error reports).
    index: usize,
}

#[derive(Clone, Copy)]
struct IdMaps {
    uid_map: [u8; 32],
    uid_len: usize,
    gid_map: [u8; 32],
    gid_len: usize,
}

fn fmt_map(id: u32) -> ([u8; 32], usize) {
    let s = format!("{id} {id} 1\n");
    let mut buf = [0u8; 32];
    buf[..s.len()].copy_from_slice(s.as_bytes());
    (buf, s.len())
}

fn cstring(p: &Path) -> Option<CString> {
    CString::new(p.as_os_str().as_bytes()).ok()
}

/// Mount points of cgroup file systems (v1 and v2) and the tmpfs that usually holds them.
fn cgroup_mounts() -> Vec<PathBuf> {
    let Ok(info) = crate::procfs::read_system_file("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for line in info.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let fstype = post.split_whitespace().next().unwrap_or("");
        if fstype != "cgroup" && fstype != "cgroup2" {
            continue;
        }
        let Some(mp) = pre.split_whitespace().nth(4) else {
            continue;
        };
        let mp = PathBuf::from(crate::cgroup::unescape(mp));
        // One recursive entry for the common parent (/sys/fs/cgroup) is enough.
        let top = match mp.parent() {
            Some(p) if p.ends_with("fs/cgroup") => p.to_path_buf(),
            _ => mp,
        };
        if !out.iter().any(|o| top.starts_with(o)) {
            out.retain(|o| !o.starts_with(&top));
            out.push(top);
        }
    }
    out
}

/// The host's device nodes a private `/dev` holds: the harmless character devices and the
/// accelerators (`nvidia*`, `dri/`, `kfd`, `accel/`) a qualification case may need. Never a
/// terminal, a disk or the console.
fn device_nodes() -> &'static [(PathBuf, bool)] {
    static NODES: OnceLock<Vec<(PathBuf, bool)>> = OnceLock::new();
    NODES.get_or_init(|| {
        let mut names: Vec<String> = ["null", "zero", "full", "random", "urandom"]
            .map(String::from)
            .to_vec();
        let mut accel: Vec<String> = std::fs::read_dir("/dev")
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.starts_with("nvidia") || n == "dri" || n == "kfd" || n == "accel")
                    .collect()
            })
            .unwrap_or_default();
        accel.sort();
        names.extend(accel);
        names
            .into_iter()
            .filter_map(|n| {
                let p = Path::new("/dev").join(n);
                let meta = std::fs::metadata(&p).ok()?;
                use std::os::unix::fs::FileTypeExt;
                let t = meta.file_type();
                (t.is_dir() || t.is_char_device()).then_some((p, t.is_dir()))
            })
            .take(MAX_DEVICES)
            .collect()
    })
}

/// Number of components of an absolute path (`/` is 0).
fn depth(p: &CString) -> usize {
    p.as_bytes().iter().filter(|b| **b == b'/').count()
}

impl Plan {
    /// Whether the box creates a user namespace first (not as root).
    pub(crate) fn uses_userns(&self) -> bool {
        self.userns.is_some()
    }

    /// Prepares the box for one spawn whose program starts in `cwd`.
    pub(crate) fn new(
        sandbox: &Sandbox,
        new_net: bool,
        cgroup_procs: Vec<RawFd>,
        die_with_parent: bool,
        cwd: &Path,
    ) -> Result<Plan, crate::ExecError> {
        // SAFETY: trivial getters.
        let (euid, egid, pid) = unsafe { (libc::geteuid(), libc::getegid(), libc::getpid()) };
        let userns = (euid != 0).then(|| {
            let (uid_map, uid_len) = fmt_map(euid);
            let (gid_map, gid_len) = fmt_map(egid);
            IdMaps {
                uid_map,
                uid_len,
                gid_map,
                gid_len,
            }
        });
        let mut bad = Vec::new();
        let mut paths = |list: &[PathBuf], must_exist: bool| -> Vec<(CString, bool, usize)> {
            let mut out = Vec::new();
            for (i, p) in list.iter().enumerate() {
                if !p.is_absolute() {
                    bad.push(format!("sandbox path {} is not absolute", p.display()));
                    continue;
                }
                let Ok(meta) = std::fs::symlink_metadata(p) else {
                    if must_exist {
                        bad.push(format!("sandbox path {} does not exist", p.display()));
                    }
                    continue;
                };
                match cstring(p) {
                    Some(c) => out.push((c, meta.is_dir(), i)),
                    None => bad.push(format!("sandbox path {} contains a NUL byte", p.display())),
                }
            }
            out
        };
        let read_only = paths(&sandbox.read_only, false);
        let writable = paths(&sandbox.writable, true);
        static CGROUP_MOUNTS: OnceLock<Vec<PathBuf>> = OnceLock::new();
        let cgroup_fs: Vec<CString> = paths(CGROUP_MOUNTS.get_or_init(cgroup_mounts), false)
            .into_iter()
            .map(|(c, _, _)| c)
            .collect();
        if read_only.len() > MAX_PATHS || writable.len() > MAX_PATHS {
            bad.push(format!(
                "at most {MAX_PATHS} read-only and {MAX_PATHS} writable sandbox paths"
            ));
        }
        let cwd = match cstring(cwd) {
            Some(c) if cwd.is_absolute() => c,
            _ => {
                bad.push(format!(
                    "working directory {} is not an absolute path without NUL bytes",
                    cwd.display()
                ));
                CString::default()
            }
        };
        let sealed = sandbox.host == HostFiles::ReadOnly;
        if sealed && writable.iter().any(|(c, _, _)| c.as_bytes() == b"/") {
            bad.push("a read-only host cannot have / writable".into());
        }
        if !bad.is_empty() {
            return Err(crate::ExecError::InvalidSpec {
                reason: bad.join("; "),
            });
        }
        let (death_read, _) = death_pipe().ok_or_else(|| crate::ExecError::Io {
            context: "create the runner death pipe".into(),
            source: io::Error::last_os_error(),
        })?;
        let (sealed, devices) = if sealed {
            let mut order: Vec<Entry> = read_only
                .iter()
                .map(|(c, dir, i)| Entry {
                    path: c.clone(),
                    dir: *dir,
                    writable: false,
                    index: *i,
                })
                .chain(writable.iter().map(|(c, dir, i)| Entry {
                    path: c.clone(),
                    dir: *dir,
                    writable: true,
                    index: *i,
                }))
                .collect();
            // Parents before their children: each is attached on top of what holds it.
            order.sort_by_key(|e| depth(&e.path));
            let devices = device_nodes()
                .iter()
                .filter_map(|(p, dir)| {
                    Some(Entry {
                        path: cstring(p)?,
                        dir: *dir,
                        writable: true,
                        index: 0,
                    })
                })
                .collect();
            (Some(order), devices)
        } else {
            (None, Vec::new())
        };
        let strip = |v: Vec<(CString, bool, usize)>| v.into_iter().map(|(c, _, _)| c).collect();
        Ok(Plan {
            cgroup_procs,
            die_with_parent: die_with_parent.then_some(pid),
            userns,
            new_net,
            read_only: strip(read_only),
            writable: strip(writable),
            sealed,
            devices,
            cgroup_fs,
            cwd,
            filters: crate::seccomp::filters(new_net),
            death_read,
            probe: false,
            nested: enclosed(),
        })
    }

    /// The evidence of this plan, as it will be in force when the spawn succeeds.
    pub(crate) fn record(&self, pid_limit: Option<u64>, pid_limit_source: &str) -> SandboxRecord {
        if self.nested {
            return SandboxRecord {
                namespaces: Vec::new(),
                pid_namespace_init: "the enclosing box's".into(),
                capabilities: "none (inherited from the enclosing box)".into(),
                no_new_privs: true,
                seccomp: SeccompRecord {
                    filter: "the enclosing box's".into(),
                    refused: Vec::new(),
                },
                read_only_paths: Vec::new(),
                writable_paths: Vec::new(),
                host_files: "the enclosing box's".into(),
                private_mounts: Vec::new(),
                devices: Vec::new(),
                fresh_proc: false,
                descriptors: "stdin, stdout, stderr only".into(),
                pid_limit,
                pid_limit_source: pid_limit_source.into(),
                enclosing_box: true,
            };
        }
        let mut namespaces = Vec::new();
        if self.userns.is_some() {
            namespaces.push("user".to_string());
        }
        namespaces.extend(["pid", "mount", "ipc"].map(String::from));
        if self.new_net {
            namespaces.push("net".to_string());
        }
        let show = |v: &[CString]| -> Vec<String> {
            v.iter()
                .map(|c| String::from_utf8_lossy(c.as_bytes()).into_owned())
                .collect()
        };
        let mut read_only = show(&self.read_only);
        let (host_files, private_mounts) = match self.sealed {
            Some(_) => {
                read_only.insert(0, "/".into());
                (
                    "read_only",
                    ["/tmp", "/dev", "/dev/shm"].map(String::from).to_vec(),
                )
            }
            None => {
                read_only.extend(show(&self.cgroup_fs));
                ("shared", Vec::new())
            }
        };
        SandboxRecord {
            namespaces,
            pid_namespace_init: "kiln-qual-pidns-init".into(),
            capabilities:
                "none (bounding, ambient, effective, permitted and inheritable sets empty)".into(),
            no_new_privs: true,
            seccomp: crate::seccomp::record(self.new_net),
            read_only_paths: read_only,
            writable_paths: show(&self.writable),
            host_files: host_files.into(),
            private_mounts,
            devices: self
                .devices
                .iter()
                .map(|d| String::from_utf8_lossy(d.path.as_bytes()).into_owned())
                .collect(),
            fresh_proc: true,
            descriptors: "stdin, stdout, stderr only".into(),
            pid_limit,
            pid_limit_source: pid_limit_source.into(),
            enclosing_box: false,
        }
    }
}

// ---------------------------------------------------------------------------------------
// In the forked children. SAFETY (every function below): raw system calls on values
// prepared before the fork; no allocation, no locks.

/// C's part, run as the `pre_exec` closure of the spawned leader. Returns only in P (to let
/// `std` execute the program) or with an error before G exists.
pub(crate) unsafe fn run_chain(plan: &Plan) -> io::Result<()> {
    unsafe {
        if libc::setsid() < 0 {
            return Err(tagged(Step::Setsid, 0));
        }
        if let Some(parent) = plan.die_with_parent {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
                || libc::getppid() != parent
            {
                return Err(tagged(Step::Setsid, 0));
            }
        }
        for fd in &plan.cgroup_procs {
            if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(tagged(Step::Cgroup, 0));
            }
        }
        if plan.nested {
            // The enclosing box already holds everything; only the descriptors remain ours.
            if !cloexec_above_stdio() {
                return Err(tagged(Step::Descriptors, 0));
            }
            if libc::chdir(plan.cwd.as_ptr()) != 0 {
                return Err(tagged(Step::Chdir, 0));
            }
            if plan.probe {
                libc::_exit(0);
            }
            return Ok(());
        }
        // (Not dumpable only after the id maps are written: /proc/self/uid_map of a
        // non-dumpable process belongs to root.)
        enter_namespaces(plan)?;
        if libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(tagged(Step::Dumpable, 0));
        }
        let mut status_pipe = [0 as libc::c_int; 2];
        if libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(tagged(Step::Fork, 0));
        }
        let (status_r, status_w) = (status_pipe[0], status_pipe[1]);
        let g = libc::fork();
        if g < 0 {
            return Err(tagged(Step::Fork, 0));
        }
        if g == 0 {
            libc::close(status_r);
            return init_main(plan, status_w);
        }
        leader_main(status_r)
    }
}

unsafe fn enter_namespaces(plan: &Plan) -> io::Result<()> {
    unsafe {
        let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
        if plan.new_net {
            flags |= libc::CLONE_NEWNET;
        }
        if let Some(maps) = &plan.userns {
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                return Err(tagged(Step::UserNs, 0));
            }
            if !write_file(b"/proc/self/setgroups\0", b"deny")
                || !write_file(b"/proc/self/uid_map\0", &maps.uid_map[..maps.uid_len])
                || !write_file(b"/proc/self/gid_map\0", &maps.gid_map[..maps.gid_len])
            {
                return Err(tagged(Step::IdMap, 0));
            }
        }
        if libc::unshare(flags) != 0 {
            return Err(tagged(Step::Namespaces, 0));
        }
        if plan.new_net && !crate::spawn::loopback_up() {
            return Err(tagged(Step::LoopbackUp, 0));
        }
        Ok(())
    }
}

/// C after the fork: hold nothing, survive the group's polite signals, and end exactly as P
/// ended once G reports it.
unsafe fn leader_main(status_r: RawFd) -> ! {
    unsafe {
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        close_all_except(&[status_r]);
        let mut status: libc::c_int = 0;
        let mut got = 0usize;
        let size = std::mem::size_of::<libc::c_int>();
        while got < size {
            let r = libc::read(
                status_r,
                (&mut status as *mut libc::c_int)
                    .cast::<u8>()
                    .add(got)
                    .cast(),
                size - got,
            );
            if r > 0 {
                got += r as usize;
            } else if r < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            } else {
                break;
            }
        }
        if got < size {
            // G ended without a report (killed): the program was killed with it.
            mirror_signal(libc::SIGKILL);
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        mirror_signal(if libc::WIFSIGNALED(status) {
            libc::WTERMSIG(status)
        } else {
            libc::SIGKILL
        })
    }
}

unsafe fn mirror_signal(sig: libc::c_int) -> ! {
    unsafe {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig)
    }
}

/// G: pid 1 of the namespace. Sets up the mounts, forks P, then reaps until the namespace is
/// empty. Returns only in P.
unsafe fn init_main(plan: &Plan, status_w: RawFd) -> io::Result<()> {
    unsafe {
        // Die-with-parent is replaced by the death pipe (C exits before the namespace may be
        // empty: residue must stay observable). A runner that is already gone ends us now.
        if libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(tagged(Step::Dumpable, 0));
        }
        let name = b"kq-pidns-init\0"; // INIT_NAME
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
        match &plan.sealed {
            Some(order) => seal_host(plan, order)?,
            None => setup_mounts(plan)?,
        }
        // Entered only now: a directory below a read-only path is read-only from here on (a
        // working directory entered before the mounts would keep the host's writable mount).
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            return Err(tagged(Step::Chdir, 0));
        }
        // SIGCHLD is consumed through a signalfd; block it before P exists.
        let mut chld: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &chld, std::ptr::null_mut());
        let sfd = libc::signalfd(-1, &chld, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if sfd < 0 {
            return Err(tagged(Step::Fork, 0));
        }
        let p = libc::fork();
        if p < 0 {
            return Err(tagged(Step::Fork, 0));
        }
        if p == 0 {
            let empty: libc::sigset_t = {
                let mut s: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut s);
                s
            };
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            return program_main(plan);
        }
        close_all_except(&[status_w, sfd, plan.death_read]);
        reap_loop(p, status_w, sfd, plan.death_read)
    }
}

unsafe fn reap_loop(p: libc::pid_t, mut status_w: RawFd, sfd: RawFd, death: RawFd) -> ! {
    unsafe {
        let mut reported = false;
        loop {
            // Reap everything that has ended.
            loop {
                let mut st: libc::c_int = 0;
                let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if r == p && !reported {
                    let bytes = (&st as *const libc::c_int).cast::<u8>();
                    libc::write(status_w, bytes.cast(), std::mem::size_of::<libc::c_int>());
                    libc::close(status_w);
                    status_w = -1;
                    reported = true;
                    continue;
                }
                if r > 0 {
                    continue;
                }
                if r < 0 && *libc::__errno_location() == libc::ECHILD {
                    // The namespace is empty.
                    libc::_exit(0);
                }
                break;
            }
            let mut fds = [
                libc::pollfd {
                    fd: sfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: death,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let n = libc::poll(fds.as_mut_ptr(), 2, -1);
            if n < 0 {
                continue;
            }
            if fds[1].revents != 0 {
                // The runner is gone: nothing of the namespace may outlive it.
                libc::kill(-1, libc::SIGKILL);
                libc::_exit(137);
            }
            if fds[0].revents != 0 {
                let mut info = [0u8; 128];
                while libc::read(sfd, info.as_mut_ptr().cast(), info.len()) > 0 {}
            }
        }
    }
}

unsafe fn setup_mounts(plan: &Plan) -> io::Result<()> {
    unsafe {
        let none = std::ptr::null::<libc::c_char>();
        if libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        ) != 0
        {
            return Err(tagged(Step::MountPrivate, 0));
        }
        for (i, w) in plan.writable.iter().enumerate() {
            if !bind_over_itself(w) {
                return Err(tagged(Step::BindWritable, i));
            }
        }
        for (i, r) in plan.read_only.iter().enumerate() {
            if !bind_over_itself(r) {
                return Err(tagged(Step::BindReadOnly, i));
            }
            if !set_read_only(r, true) {
                return Err(tagged(Step::SetReadOnly, i));
            }
        }
        for (i, c) in plan.cgroup_fs.iter().enumerate() {
            if !set_read_only(c, true) {
                return Err(tagged(Step::SetReadOnly, i));
            }
        }
        for (i, w) in plan.writable.iter().enumerate() {
            if !set_read_only(w, false) {
                return Err(tagged(Step::BindWritable, i));
            }
        }
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            return Err(tagged(Step::ProcMount, 0));
        }
        Ok(())
    }
}

/// `mount(path, path, MS_BIND | MS_REC)`: makes `path` a mount point of its own.
unsafe fn bind_over_itself(path: &CString) -> bool {
    unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ) == 0
    }
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `mount_setattr(path, AT_RECURSIVE, {set|clear RDONLY})`.
unsafe fn set_read_only(path: &CStr, on: bool) -> bool {
    unsafe {
        if on {
            set_attr(path, MOUNT_ATTR_RDONLY, 0, AT_RECURSIVE)
        } else {
            set_attr(path, 0, MOUNT_ATTR_RDONLY, AT_RECURSIVE)
        }
    }
}

/// `mount_setattr(path, flags, {set, clear})`.
unsafe fn set_attr(path: &CStr, set: u64, clear: u64, flags: libc::c_uint) -> bool {
    unsafe {
        let attr = MountAttr {
            attr_set: set,
            attr_clr: clear,
            propagation: 0,
            userns_fd: 0,
        };
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) == 0
    }
}

const ROOT: &CStr = c"/";

const OPEN_TREE_CLONE: libc::c_uint = 0x1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// `open_tree(path, OPEN_TREE_CLONE | AT_RECURSIVE)`: a detached copy of the mounts at
/// `path`, with the attributes they have now.
unsafe fn clone_tree(path: &CString) -> RawFd {
    unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as libc::c_uint,
        ) as RawFd
    }
}

/// `move_mount(tree, path)`: attaches a detached copy at `path` (and closes it).
unsafe fn attach(tree: RawFd, path: &CString) -> bool {
    unsafe {
        let ok = libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        ) == 0;
        let saved = *libc::__errno_location();
        libc::close(tree);
        *libc::__errno_location() = saved;
        ok
    }
}

/// Creates what is missing of `path` (its parents and, as a directory or an empty file, the
/// path itself), as a place to attach a mount on. Only the box's own tmpfs is writable at
/// this point, so only places there can be missing.
unsafe fn make_place(path: &CString, dir: bool) -> bool {
    unsafe {
        let bytes = path.as_bytes();
        let mut buf = [0u8; 4096];
        if bytes.len() >= buf.len() {
            *libc::__errno_location() = libc::ENAMETOOLONG;
            return false;
        }
        buf[..bytes.len()].copy_from_slice(bytes);
        let exists = |p: *const libc::c_char| libc::access(p, libc::F_OK) == 0;
        for i in 1..bytes.len() {
            if buf[i] != b'/' {
                continue;
            }
            buf[i] = 0;
            let p = buf.as_ptr().cast();
            if !exists(p) && libc::mkdir(p, 0o755) != 0 {
                return false;
            }
            buf[i] = b'/';
        }
        if exists(path.as_ptr()) {
            return true;
        }
        if dir {
            return libc::mkdir(path.as_ptr(), 0o755) == 0;
        }
        let fd = libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
        );
        if fd < 0 {
            return false;
        }
        libc::close(fd);
        true
    }
}

/// `mount -t tmpfs` at `path` with `options`.
unsafe fn tmpfs(path: &CStr, flags: libc::c_ulong, options: &CStr) -> bool {
    unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            path.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            options.as_ptr().cast(),
        ) == 0
    }
}

/// The mounts of a read-only host ([`HostFiles::ReadOnly`]), in G:
/// 1. every mount becomes a slave (nothing propagates back to the host);
/// 2. detached copies are taken of every path of the plan and every device node, as the host
///    has them (writable where the host's are);
/// 3. a fresh `/proc` is mounted, then every mount of the namespace — `/proc` and its
///    `/proc/sys` included — is made read-only (`mount_setattr(/, AT_RECURSIVE, RDONLY)`);
/// 4. a private tmpfs `/tmp` and a private `/dev` (tmpfs: the device copies, the `fd`/`std*`
///    links, a tmpfs `shm`; then read-only itself) are mounted;
/// 5. the copies are attached at their places, parents first; read-only paths are made
///    read-only again with whatever they hold, and the writable ones below them attached
///    later stay writable.
unsafe fn seal_host(plan: &Plan, order: &[Entry]) -> io::Result<()> {
    unsafe {
        let none = std::ptr::null::<libc::c_char>();
        if libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        ) != 0
        {
            return Err(tagged(Step::MountPrivate, 0));
        }
        let mut clones = [-1 as RawFd; MAX_CLONES];
        let n = order.len().min(2 * MAX_PATHS);
        for (i, e) in order[..n].iter().enumerate() {
            clones[i] = clone_tree(&e.path);
            if clones[i] < 0 {
                return Err(tagged(Step::Clone, e.index));
            }
        }
        let devices = &plan.devices[..plan.devices.len().min(MAX_DEVICES)];
        for (j, d) in devices.iter().enumerate() {
            clones[n + j] = clone_tree(&d.path);
            if clones[n + j] < 0 {
                return Err(tagged(Step::PrivateDev, j));
            }
        }
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            return Err(tagged(Step::ProcMount, 0));
        }
        if !set_read_only(ROOT, true) {
            return Err(tagged(Step::HostReadOnly, 0));
        }
        if !tmpfs(c"/tmp", libc::MS_NOSUID | libc::MS_NODEV, c"mode=1777") {
            return Err(tagged(Step::PrivateTmp, 0));
        }
        if !tmpfs(
            c"/dev",
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"mode=755,size=64k",
        ) {
            return Err(tagged(Step::PrivateDev, 0));
        }
        for (j, d) in devices.iter().enumerate() {
            if !make_place(&d.path, d.dir) || !attach(clones[n + j], &d.path) {
                return Err(tagged(Step::PrivateDev, j));
            }
        }
        for (target, link) in [
            (c"/proc/self/fd", c"/dev/fd"),
            (c"/proc/self/fd/0", c"/dev/stdin"),
            (c"/proc/self/fd/1", c"/dev/stdout"),
            (c"/proc/self/fd/2", c"/dev/stderr"),
        ] {
            if libc::symlink(target.as_ptr(), link.as_ptr()) != 0 {
                return Err(tagged(Step::PrivateDev, 0));
            }
        }
        if libc::mkdir(c"/dev/shm".as_ptr(), 0o755) != 0
            || !tmpfs(c"/dev/shm", libc::MS_NOSUID | libc::MS_NODEV, c"mode=1777")
            || !set_attr(c"/dev", MOUNT_ATTR_RDONLY, 0, 0)
        {
            return Err(tagged(Step::PrivateDev, 0));
        }
        for (i, e) in order[..n].iter().enumerate() {
            let step = if e.writable {
                Step::BindWritable
            } else {
                Step::BindReadOnly
            };
            if !make_place(&e.path, e.dir) || !attach(clones[i], &e.path) {
                return Err(tagged(step, e.index));
            }
            if !e.writable && !set_read_only(&e.path, true) {
                return Err(tagged(Step::SetReadOnly, e.index));
            }
        }
        Ok(())
    }
}

/// In P, for the probe: the host is read-only inside the box and no terminal is reachable.
/// Writability is asked with `faccessat` (never by opening or writing anything): `EROFS` or
/// `EACCES` for `/` and `/proc/sys/kernel/core_pattern`; `/dev/tty`, `/dev/console` and
/// `/dev/pts` do not exist.
unsafe fn host_read_only() -> bool {
    unsafe {
        let refused = |p: &CStr| {
            libc::syscall(libc::SYS_faccessat, libc::AT_FDCWD, p.as_ptr(), libc::W_OK) != 0
                && matches!(*libc::__errno_location(), libc::EROFS | libc::EACCES)
        };
        let absent = |p: &CStr| {
            libc::syscall(libc::SYS_faccessat, libc::AT_FDCWD, p.as_ptr(), libc::F_OK) != 0
                && *libc::__errno_location() == libc::ENOENT
        };
        refused(c"/")
            && refused(c"/proc/sys/kernel/core_pattern")
            && absent(c"/dev/tty")
            && absent(c"/dev/console")
            && absent(c"/dev/pts")
    }
}

/// P: the program's own process, right before `exec`.
unsafe fn program_main(plan: &Plan) -> io::Result<()> {
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(tagged(Step::Setsid, 0));
        }
        if libc::getppid() != 1 {
            // G is already gone.
            libc::_exit(137);
        }
        // Everything above stdio is closed at exec (std's error-report pipe keeps working).
        if !cloexec_above_stdio() {
            return Err(tagged(Step::Descriptors, 0));
        }
        drop_capabilities()?;
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(tagged(Step::NoNewPrivs, 0));
        }
        if !plan.filters.install() {
            return Err(tagged(Step::Seccomp, 0));
        }
        if plan.probe {
            if plan.new_net {
                crate::spawn::check_loopback_only().map_err(|step| tagged(step, 0))?;
            }
            if plan.sealed.is_some() && !host_read_only() {
                return Err(tagged(Step::ProbeHostReadOnly, 0));
            }
            libc::_exit(0);
        }
        Ok(())
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

unsafe fn drop_capabilities() -> io::Result<()> {
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                let e = *libc::__errno_location();
                if e == libc::EINVAL {
                    break; // past the last capability the kernel knows
                }
                return Err(tagged(Step::Capabilities, 0));
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(tagged(Step::Capabilities, 0));
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) != 0 {
            return Err(tagged(Step::Capabilities, 0));
        }
        Ok(())
    }
}

/// Marks every descriptor above 2 close-on-exec (`std`'s exec-error pipe keeps working).
unsafe fn cloexec_above_stdio() -> bool {
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == 0
    }
}

/// Closes every descriptor except `keep` (two `close_range` calls around each kept one).
unsafe fn close_all_except(keep: &[RawFd]) {
    unsafe {
        let mut sorted = [-1 as RawFd; 4];
        let n = keep.len().min(4);
        sorted[..n].copy_from_slice(&keep[..n]);
        // Insertion sort on at most four values.
        for i in 1..n {
            let mut j = i;
            while j > 0 && sorted[j - 1] > sorted[j] {
                sorted.swap(j - 1, j);
                j -= 1;
            }
        }
        let mut from: libc::c_uint = 0;
        for fd in &sorted[..n] {
            if *fd < 0 {
                continue;
            }
            let fd = *fd as libc::c_uint;
            if fd > from {
                libc::syscall(libc::SYS_close_range, from, fd - 1, 0 as libc::c_uint);
            }
            from = fd + 1;
        }
        libc::syscall(
            libc::SYS_close_range,
            from,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        );
    }
}

/// open + write + close on a NUL-terminated path (async-signal-safe).
pub(crate) unsafe fn write_file(path: &[u8], data: &[u8]) -> bool {
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize;
        libc::close(fd);
        ok
    }
}

// ---------------------------------------------------------------------------------------
// The probe: the whole chain in a forked child, with P ending instead of executing.

/// A failure of the probe's own plumbing (pipe, fork), with the current errno.
fn plumbing_failure() -> StepFailure {
    StepFailure {
        step: Step::Fork,
        index: 0,
        errno: io::Error::last_os_error().raw_os_error().unwrap_or(0),
    }
}

/// Runs the full box set-up of `plan` once (no program is executed) and reports the first
/// step the kernel refused, if any; with a new network namespace also the loopback-only
/// checks (only `lo`, TCP works).
pub(crate) fn probe(mut plan: Plan) -> Result<(), StepFailure> {
    plan.probe = true;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 into a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(plumbing_failure());
    }
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: the child only makes async-signal-safe system calls, then _exit()s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above. Errors from C, G or P are written to the report pipe; P ends
        // with _exit(0) once everything is in force.
        unsafe {
            libc::close(rd);
            // run_chain returns only with an error (P ends with _exit(0) inside
            // program_main once everything is in force), reported by whichever process hit it.
            let code = match run_chain(&plan) {
                Ok(()) => 0,
                Err(e) => e.raw_os_error().unwrap_or(0),
            };
            if code != 0 {
                libc::write(wr, (&code as *const i32).cast(), 4);
            }
            libc::_exit(0);
        }
    }
    if pid > 0 {
        crate::group::register_leader(pid as u32);
    }
    // SAFETY: closing our write end, reading into a local, reaping our child.
    let (n, code) = unsafe {
        libc::close(wr);
        if pid < 0 {
            let failure = plumbing_failure();
            libc::close(rd);
            return Err(failure);
        }
        let mut code = 0i32;
        let n = libc::read(rd, (&mut code as *mut i32).cast(), 4);
        libc::close(rd);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        (n, code)
    };
    crate::group::unregister_leader(pid as u32);
    if n == 4 {
        return Err(decode_raw(code).unwrap_or(StepFailure {
            step: Step::Fork,
            index: 0,
            errno: code & 0xfff,
        }));
    }
    Ok(())
}
