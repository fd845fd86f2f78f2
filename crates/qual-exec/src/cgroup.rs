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
    /// Use a cgroup v2 sub-tree when one is writable, else process group + subreaper.
    Auto,
    /// Never use cgroups: process group + subreaper tracking only.
    Never,
}

/// Sets the process-wide cgroup policy (default [`CgroupPolicy::Auto`]). Affects executions
/// started afterwards.
pub fn set_cgroup_policy(policy: CgroupPolicy) {
    match policy {
        CgroupPolicy::Never => STATE.store(DISABLED, Ordering::SeqCst),
        CgroupPolicy::Auto => {
            let _ = STATE.compare_exchange(DISABLED, UNKNOWN, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}

pub(crate) fn mark_unusable() {
    let _ = STATE.compare_exchange(USABLE, UNUSABLE, Ordering::SeqCst, Ordering::SeqCst);
    let _ = STATE.compare_exchange(UNKNOWN, UNUSABLE, Ordering::SeqCst, Ordering::SeqCst);
}

/// One execution's cgroup directory and the `cgroup.procs` descriptor its child writes to.
#[derive(Debug)]
pub(crate) struct CaseCgroup {
    dir: PathBuf,
    procs: File,
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
                Ok(procs) => Some(CaseCgroup { dir, procs }),
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

    /// The descriptor the child writes `0` to (inherited across fork, closed at exec).
    pub(crate) fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    pub(crate) fn confirm_usable(&self) {
        let _ = STATE.compare_exchange(UNKNOWN, USABLE, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Member pids (live or exiting) listed in `cgroup.procs` of this cgroup and of every
    /// cgroup the case created beneath it (a case may nest cgroups, e.g. a nested runner).
    pub(crate) fn pids(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for dir in subtree(&self.dir) {
            if let Ok(s) = fs::read_to_string(dir.join("cgroup.procs")) {
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
        fs::read_to_string(format!("/proc/{pid}/cgroup"))
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
        std::thread::sleep(Duration::from_millis(5));
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
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
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
fn unescape(s: &str) -> String {
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
    let cg = fs::read_to_string("/proc/self/cgroup").ok()?;
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
