//! Reading `/proc`: process status lines, command lines, and whole-table snapshots.
//!
//! A process is identified by `(pid, start_time)` (start time in clock ticks since boot, field
//! 22 of `/proc/<pid>/stat`) so that a reused pid is never mistaken for a process seen before.
//! A process that vanishes between listing and reading is simply absent from a snapshot.
//!
//! This is the one reader of `/proc/<pid>/stat` in the workspace: other crates use [`stat`],
//! [`snapshot`] and [`pids`] (public) instead of parsing the file again.
//!
//! [`read_system_file`] is kiln-qual's one reader of the host's own files (kernel
//! pseudo-files under `/proc` and `/sys`, `/etc/os-release`, an installed runtime's version
//! file): whole, bounded by [`SYSTEM_FILE_LIMIT`]. Files a user or a document names go
//! through `qual_json::file` instead (regular files only, never a FIFO).

use std::fs;
use std::io::Read;
use std::path::Path;

/// The most a system file may hold (`/proc/net/tcp` of a busy host, `mountinfo` of a
/// host with many containers are the large ones).
pub const SYSTEM_FILE_LIMIT: usize = 64 << 20;

/// Reads a system file (`/proc/...`, `/sys/...`, `/etc/...`) whole as bytes; more than
/// [`SYSTEM_FILE_LIMIT`] bytes is an `InvalidData` error.
pub fn read_system_bytes(path: impl AsRef<Path>) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(SYSTEM_FILE_LIMIT as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > SYSTEM_FILE_LIMIT {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {SYSTEM_FILE_LIMIT} bytes"),
        ));
    }
    Ok(bytes)
}

/// [`read_system_bytes`] as text (invalid UTF-8 is an `InvalidData` error, as with
/// `std::fs::read_to_string`).
pub fn read_system_file(path: impl AsRef<Path>) -> std::io::Result<String> {
    String::from_utf8(read_system_bytes(path)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// A `kB` field of `/proc/<pid>/status` (`VmHWM`, `VmRSS`…) in bytes; `pid` 0 means this
/// process (`/proc/self`). `None` when the process or the field is absent.
pub fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let path = if pid == 0 {
        "/proc/self/status".to_string()
    } else {
        format!("/proc/{pid}/status")
    };
    let text = read_system_file(path).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        kib.checked_mul(1024)
    })
}

/// The fields of `/proc/<pid>/stat` this crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Process id.
    pub pid: u32,
    /// State letter (field 3: `R`, `S`, `Z`…).
    pub state: u8,
    /// Parent pid (field 4).
    pub ppid: u32,
    /// Process group id (field 5).
    pub pgrp: u32,
    /// Session id (field 6).
    pub session: u32,
    /// Start time in clock ticks since boot (field 22).
    pub start_time: u64,
}

impl Stat {
    /// A zombie (`Z`) or dead (`X`) process holds no resources but its table entry.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parses the content of `/proc/<pid>/stat` (the command name may contain spaces and
/// parentheses, so fields are taken after the *last* `)`).
pub(crate) fn parse_stat(pid: u32, text: &str) -> Option<Stat> {
    let close = text.rfind(')')?;
    let mut f = text[close + 1..].split_ascii_whitespace();
    let state = f.next()?.bytes().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    let session = f.next()?.parse().ok()?;
    // fields 7..=21 (tty_nr .. itrealvalue), then 22 = starttime
    let start_time = f.nth(15)?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        pgrp,
        session,
        start_time,
    })
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub fn stat(pid: u32) -> Option<Stat> {
    let text = read_system_file(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// Every pid listed in `/proc` right now, in directory order.
pub fn pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
        })
        .collect()
}

/// Every process visible in `/proc` right now.
pub fn snapshot() -> Vec<Stat> {
    pids().into_iter().filter_map(stat).collect()
}

/// The command line of a process, NUL separators shown as spaces, bounded to 512 bytes;
/// `[comm]` for kernel threads and zombies, empty when the process is gone.
pub(crate) fn cmdline(pid: u32) -> String {
    const MAX: usize = 512;
    match read_system_bytes(format!("/proc/{pid}/cmdline")) {
        Ok(bytes) if !bytes.is_empty() => {
            let trimmed = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
            let mut s: String =
                String::from_utf8_lossy(&trimmed[..trimmed.len().min(MAX)]).replace('\0', " ");
            if trimmed.len() > MAX {
                s.push_str("...");
            }
            s
        }
        _ => match read_system_file(format!("/proc/{pid}/comm")) {
            Ok(c) => format!("[{}]", c.trim_end()),
            Err(_) => String::new(),
        },
    }
}

/// Children of `pid`, from `/proc/<pid>/task/*/children` (every thread's children).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    read_children(&format!("/proc/{pid}/task")).unwrap_or_default()
}

/// Our own children; `None` when the kernel has no `children` files (CONFIG_PROC_CHILDREN).
pub(crate) fn children_of_self() -> Option<Vec<u32>> {
    read_children("/proc/self/task")
}

fn read_children(task_dir: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    let mut any = false;
    for t in fs::read_dir(task_dir).ok()?.flatten() {
        let Ok(text) = read_system_file(t.path().join("children")) else {
            continue;
        };
        any = true;
        out.extend(
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    any.then_some(out)
}

/// Whether `pid` is the init (pid 1) of a PID namespace nested below ours.
pub(crate) fn is_pidns_init(pid: u32) -> bool {
    innermost_pid(pid) == Some(1)
}

/// The pid of `pid` in its innermost PID namespace (last `NSpid` entry), when that is
/// nested below ours.
pub(crate) fn innermost_pid(pid: u32) -> Option<u32> {
    let s = read_system_file(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("NSpid:"))?;
    let ids: Vec<u32> = line["NSpid:".len()..]
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    (ids.len() > 1).then(|| *ids.last().expect("non-empty"))
}

/// Our own pid.
pub(crate) fn self_pid() -> u32 {
    std::process::id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_parentheses_in_comm() {
        let line = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10 18446744073709551615";
        let s = parse_stat(1234, line).unwrap();
        assert_eq!(s.state, b'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgrp, 1234);
        assert_eq!(s.session, 1234);
        assert_eq!(s.start_time, 98765);
    }

    #[test]
    fn reads_own_stat() {
        let s = stat(std::process::id()).unwrap();
        assert_eq!(s.pid, std::process::id());
        assert!(!s.is_dead());
        assert!(snapshot().iter().any(|p| p.pid == s.pid));
        assert!(!cmdline(s.pid).is_empty());
    }

    #[test]
    fn reads_own_memory_high_water_mark() {
        let hwm = status_bytes(0, "VmHWM").unwrap();
        let rss = status_bytes(std::process::id(), "VmRSS").unwrap();
        assert!(hwm > 0 && rss > 0 && hwm >= rss / 2, "{hwm} {rss}");
        assert_eq!(status_bytes(0, "NoSuchField"), None);
    }
}
