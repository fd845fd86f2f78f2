//! Per-execution cgroup v2 sub-trees.
//!
//! When this process's own cgroup v2 directory accepts a new child directory, each execution
//! gets `<own cgroup>/kiln-qual-<our pid>-<n>`, and the child moves itself into it (by writing
//! `0` to a `cgroup.procs` descriptor opened before the fork) before it executes anything, so
//! no descendant can be born outside it. A process cannot leave a cgroup by `setsid`, double
//! forks or re-parenting, so `cgroup.procs` is the authoritative member list and `cgroup.kill`
//! (Linux >= 5.14; otherwise a per-member SIGKILL) kills all of them at once.
//!
//! Availability is detected, never assumed: creating the directory, opening `cgroup.procs` and
//! the child's own move must all succeed; the first failure marks cgroups unusable for the rest
//! of the process and the caller falls back to process group + subreaper tracking.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::time::{Duration, Instant};

const UNKNOWN: u8 = 0;
const USABLE: u8 = 1;
const UNUSABLE: u8 = 2;
const DISABLED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Which containment the crate may use for new processes (process-wide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupPolicy {
    /// A writable cgroup v2 sub-tree is required: without one, executions are refused
    /// ([`crate::ExecError::IsolationUnavailable`]). The default.
    Required,
    /// Use a cgroup v2 sub-tree when one is writable, else process group + subreaper
    /// tracking (the PID namespace still kills everything at the end). For library callers
    /// that accept the weaker, recorded mechanism.
    Auto,
    /// Never use cgroups: process group + subreaper tracking only.
    Never,
}

static REQUIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Sets the process-wide cgroup policy (default [`CgroupPolicy::Required`]). Affects
/// executions started afterwards.
pub fn set_cgroup_policy(policy: CgroupPolicy) {
    REQUIRED.store(policy == CgroupPolicy::Required, Ordering::SeqCst);
    match policy {
        CgroupPolicy::Never => STATE.store(DISABLED, Ordering::SeqCst),
        CgroupPolicy::Auto | CgroupPolicy::Required => {
            let _ = STATE.compare_exchange(DISABLED, UNKNOWN, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}

/// Whether executions must be refused without a cgroup.
pub(crate) fn required() -> bool {
    REQUIRED.load(Ordering::SeqCst)
}

/// The refusal when no cgroup sub-tree can be created and one is required.
pub(crate) fn unavailable_error() -> crate::ExecError {
    crate::ExecError::IsolationUnavailable {
        capability: "a writable cgroup v2 sub-tree below this process's cgroup".into(),
        reason: "the cgroup file system refused a new sub-cgroup (read-only, not delegated, or not cgroup v2)".into(),
    }
}

/// The pid limit written to `pids.max` of every execution's cgroup.
pub const PIDS_MAX: u64 = 4096;

pub(crate) fn mark_unusable() {
    let _ = STATE.compare_exchange(USABLE, UNUSABLE, Ordering::SeqCst, Ordering::SeqCst);
    let _ = STATE.compare_exchange(UNKNOWN, UNUSABLE, Ordering::SeqCst, Ordering::SeqCst);
}

/// One execution's cgroup directory and the `cgroup.procs` descriptor its child writes to.
#[derive(Debug)]
pub(crate) struct CaseCgroup {
    dir: PathBuf,
    procs: File,
    /// The pid limit: in this cgroup (v2 `pids` controller) or in a v1 `pids` hierarchy.
    pids: PidLimit,
}

/// Where `pids.max` is enforced for an execution.
#[derive(Debug)]
pub(crate) enum PidLimit {
    /// `pids.max` of the v2 cgroup itself.
    V2,
    /// The v1 `pids` hierarchy: this process moved itself (once) into a cgroup there, which
    /// every case and server it starts inherits at fork. Moving each case instead costs
    /// about 16 ms per case in v1 (the migration waits for an RCU grace period).
    V1Shared,
    /// No pids controller is available (the reason).
    Unavailable(&'static str),
}

impl CaseCgroup {
    /// Creates a fresh sub-cgroup, or `None` when cgroups are disabled or unusable here.
    pub(crate) fn create() -> Option<CaseCgroup> {
        match STATE.load(Ordering::SeqCst) {
            UNUSABLE | DISABLED => return None,
            _ => {}
        }
        let made = own_cgroup_dir().and_then(|parent| {
            static SWEPT: std::sync::Once = std::sync::Once::new();
            SWEPT.call_once(|| sweep_stale(&parent));
            let n = COUNTER.fetch_add(1, Ordering::SeqCst);
            let dir = parent.join(format!("kiln-qual-{}-{n}", std::process::id()));
            fs::create_dir(&dir).ok()?;
            match OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
            {
                Ok(procs) => {
                    let pids = pid_limit(&dir);
                    Some(CaseCgroup { dir, procs, pids })
                }
                Err(_) => {
                    let _ = fs::remove_dir(&dir);
                    None
                }
            }
        });
        if made.is_none() {
            mark_unusable();
        }
        made
    }

    /// The descriptors the child writes `0` to (inherited across fork, closed at exec).
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        vec![self.procs.as_raw_fd()]
    }

    /// The pid limit in force and where (`cgroup_v2`, `cgroup_v1_pids`), or why none.
    pub(crate) fn pid_limit(&self) -> (Option<u64>, &'static str) {
        match &self.pids {
            PidLimit::V2 => (Some(PIDS_MAX), "cgroup_v2"),
            PidLimit::V1Shared => (
                Some(PIDS_MAX),
                "cgroup_v1_pids (one cgroup for this kiln-qual process and everything it starts)",
            ),
            PidLimit::Unavailable(why) => (None, why),
        }
    }

    pub(crate) fn confirm_usable(&self) {
        let _ = STATE.compare_exchange(UNKNOWN, USABLE, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Member pids (live or exiting) listed in `cgroup.procs` of this cgroup and of every
    /// cgroup the case created beneath it (a case may nest cgroups, e.g. a nested runner).
    pub(crate) fn pids(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for dir in subtree(&self.dir) {
            if let Ok(s) = crate::procfs::read_system_file(dir.join("cgroup.procs")) {
                out.extend(s.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
        }
        out
    }

    /// Whether `pid` belongs to this cgroup according to `/proc/<pid>/cgroup` (works for
    /// zombies that `cgroup.procs` no longer lists).
    pub(crate) fn contains_by_proc(&self, pid: u32) -> bool {
        let Some(rel) = self.relative_path() else {
            return false;
        };
        let nested = format!("{rel}/");
        crate::procfs::read_system_file(format!("/proc/{pid}/cgroup"))
            .map(|s| {
                s.lines().filter_map(|l| l.strip_prefix("0::")).any(|p| {
                    let p = p.trim_end();
                    p == rel || p.starts_with(&nested)
                })
            })
            .unwrap_or(false)
    }

    fn relative_path(&self) -> Option<String> {
        let (mount, _) = v2_mount()?;
        let rel = self.dir.strip_prefix(&mount).ok()?;
        Some(format!("/{}", rel.display()))
    }

    /// Writes `1` to `cgroup.kill`; `false` when the kernel has no `cgroup.kill`.
    pub(crate) fn kill_all(&self) -> bool {
        OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"))
            .is_ok()
    }

    /// Removes the directory and any cgroups the case created beneath it, retrying briefly
    /// while exiting members are released.
    pub(crate) fn remove(self) -> bool {
        remove_tree(&self.dir, Duration::from_secs(2))
    }
}

/// Sets `pids.max` for a new execution cgroup: in the v2 cgroup when its `pids` controller
/// is enabled, else through this process's own cgroup in a writable v1 `pids` hierarchy.
fn pid_limit(dir: &std::path::Path) -> PidLimit {
    if dir.join("pids.max").exists() {
        return if write_pids_max(&dir.join("pids.max")) {
            PidLimit::V2
        } else {
            PidLimit::Unavailable("pids.max of the execution cgroup is not writable")
        };
    }
    static V1: std::sync::OnceLock<Result<(), &'static str>> = std::sync::OnceLock::new();
    match V1.get_or_init(join_v1_pids) {
        Ok(()) => PidLimit::V1Shared,
        Err(why) => PidLimit::Unavailable(why),
    }
}

fn write_pids_max(p: &std::path::Path) -> bool {
    OpenOptions::new()
        .write(true)
        .open(p)
        .and_then(|mut f| f.write_all(PIDS_MAX.to_string().as_bytes()))
        .is_ok()
}

/// Creates `kiln-qual-<pid>-pids` in the v1 `pids` hierarchy, limits it, and moves this
/// process into it (children inherit it at fork, at no cost).
fn join_v1_pids() -> Result<(), &'static str> {
    let parent = v1_pids_dir().ok_or("no pids controller (cgroup v2 or v1) is available")?;
    sweep_stale(&parent);
    let dir = parent.join(format!("kiln-qual-{}-pids", std::process::id()));
    let unwritable = "the v1 pids hierarchy is not writable";
    fs::create_dir(&dir).map_err(|_| unwritable)?;
    let moved = write_pids_max(&dir.join("pids.max"))
        && OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .and_then(|mut f| f.write_all(std::process::id().to_string().as_bytes()))
            .is_ok();
    if !moved {
        let _ = fs::remove_dir(&dir);
        return Err(unwritable);
    }
    Ok(())
}

/// This process's cgroup directory in a mounted v1 `pids` hierarchy.
fn v1_pids_dir() -> Option<PathBuf> {
    let info = crate::procfs::read_system_file("/proc/self/mountinfo").ok()?;
    let (mount, root) = info.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        let mut it = post.split_whitespace();
        if it.next() != Some("cgroup") {
            return None;
        }
        let opts = it.nth(1)?;
        if !opts.split(',').any(|o| o == "pids") {
            return None;
        }
        let f: Vec<&str> = pre.split_whitespace().collect();
        (f.len() >= 5).then(|| (PathBuf::from(unescape(f[4])), unescape(f[3])))
    })?;
    let cg = crate::procfs::read_system_file("/proc/self/cgroup").ok()?;
    let path = cg.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _ = parts.next()?;
        let ctrls = parts.next()?;
        let path = parts.next()?;
        ctrls.split(',').any(|c| c == "pids").then_some(path)
    })?;
    let rel = if root == "/" {
        path.to_string()
    } else {
        path.strip_prefix(root.as_str())?.to_string()
    };
    let dir = mount.join(rel.trim_start_matches('/'));
    dir.is_dir().then_some(dir)
}

/// `dir` and every cgroup directory beneath it, parents before children (bounded: a case
/// cannot make us walk forever).
fn subtree(dir: &std::path::Path) -> Vec<PathBuf> {
    const MAX_DIRS: usize = 4096;
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() && out.len() < MAX_DIRS {
        if let Ok(rd) = fs::read_dir(&out[i]) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    out.push(e.path());
                }
            }
        }
        i += 1;
    }
    out
}

/// Removes a cgroup directory tree bottom-up, retrying until `limit` has passed.
fn remove_tree(dir: &std::path::Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        for d in subtree(dir).iter().rev() {
            let _ = fs::remove_dir(d);
        }
        if !dir.exists() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Removes sub-cgroups left by a previous process of ours that died without cleanup (e.g.
/// killed with SIGKILL): `kiln-qual-<pid>-<n>` whose `<pid>` no longer exists. Their members
/// are killed first. Best effort.
fn sweep_stale(parent: &std::path::Path) {
    let Ok(dir) = fs::read_dir(parent) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("kiln-qual-")) else {
            continue;
        };
        let Some(owner) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if owner == std::process::id() || std::path::Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let path = entry.path();
        let _ = OpenOptions::new()
            .write(true)
            .open(path.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"));
        remove_tree(&path, Duration::from_millis(500));
    }
}

/// The cgroup v2 mount point and its root as seen in mountinfo.
fn v2_mount() -> Option<(PathBuf, String)> {
    let info = crate::procfs::read_system_file("/proc/self/mountinfo").ok()?;
    for line in info.lines() {
        // id parent major:minor root mount-point options... - fstype source super-options
        let (pre, post) = line.split_once(" - ")?;
        if post.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let f: Vec<&str> = pre.split_whitespace().collect();
        if f.len() >= 5 {
            return Some((PathBuf::from(unescape(f[4])), unescape(f[3])));
        }
    }
    None
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
pub(crate) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This process's cgroup v2 directory under the mount point.
fn own_cgroup_dir() -> Option<PathBuf> {
    let (mount, root) = v2_mount()?;
    let cg = crate::procfs::read_system_file("/proc/self/cgroup").ok()?;
    let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    // With a cgroup namespace the mount root is "/" and the path is namespace-relative; a
    // bind-mounted sub-tree has root = that sub-tree.
    let rel = if root == "/" {
        path.to_string()
    } else {
        path.strip_prefix(root.as_str())?.to_string()
    };
    if rel.contains("(deleted)") {
        return None;
    }
    let dir = mount.join(rel.trim_start_matches('/'));
    dir.is_dir().then_some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mountinfo_octal() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"\134"), "\\");
    }
}
