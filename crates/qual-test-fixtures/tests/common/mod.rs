//! Helpers shared by the integration tests: building specs for the fixture binary and
//! checking `/proc` for anything left behind.

#![allow(dead_code)]

use qual_exec::{CaptureLimits, ExecSpec, Execution, NetworkPolicy};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const FIXTURE: &str = env!("CARGO_BIN_EXE_qual-fixture");

/// A marker unique to one execution, put into its environment so that every descendant,
/// wherever it escaped to, can be found through `/proc/<pid>/environ`.
pub fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "kq-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

pub struct Case {
    pub spec: ExecSpec,
    pub marker: String,
}

pub fn case(args: &[&str], timeout_s: f64, grace_s: f64, cwd: &Path) -> Case {
    let marker = marker();
    let mut argv = vec![FIXTURE.to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    Case {
        spec: ExecSpec {
            argv,
            cwd: cwd.to_path_buf(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("KQ_TEST_MARKER".into(), marker.clone()),
            ],
            timeout: Duration::from_secs_f64(timeout_s),
            term_grace: Duration::from_secs_f64(grace_s),
            capture: CaptureLimits::default(),
            network: NetworkPolicy::Inherit,
            sandbox: Default::default(),
        },
        marker,
    }
}

pub use qual_test_fixtures::processes_with_marker;

/// Whether `/proc/<pid>` exists at all (zombies included).
pub fn pid_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Asserts that nothing of the case is alive or unreaped: no process carries its marker, the
/// leader and every residue pid are gone, and no process is in the leader's group or session.
pub fn assert_nothing_left(exec: &Execution, marker: &str) {
    let left = processes_with_marker(marker);
    assert!(
        left.is_empty(),
        "processes of the case still alive: {left:?}"
    );
    assert!(!pid_exists(exec.pid), "leader {} still in /proc", exec.pid);
    for r in &exec.containment.residue {
        assert!(!pid_exists(r.pid), "residue {} still in /proc", r.pid);
    }
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let f: Vec<&str> = after.split(' ').collect();
            let (pgrp, sid): (u32, u32) = (f[2].parse().unwrap(), f[3].parse().unwrap());
            assert!(
                pgrp != exec.pid && sid != exec.pid,
                "process {pid} is still in the case's group/session"
            );
        }
    }
}

/// Waits (bounded) for a file to appear and returns its content.
pub fn wait_for_file(path: &Path, limit: Duration) -> Option<String> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(s) = std::fs::read_to_string(path) {
            if !s.is_empty() {
                return Some(s);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Whether `pid` has SIGTERM in its ignored-signal mask (`SigIgn` of `/proc/<pid>/status`).
pub fn ignores_sigterm(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|mask| mask & (1 << (libc::SIGTERM - 1)) != 0)
}

/// The pid a process has inside its innermost PID namespace (the last `NSpid` entry).
#[allow(dead_code)]
pub fn box_pid(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// The pid (in our namespace) of the process carrying `marker` whose pid inside its box's
/// PID namespace is `box_pid` (what the case itself wrote to a pid file).
#[allow(dead_code)]
pub fn host_pid(marker: &str, inner: u32) -> Option<u32> {
    processes_with_marker(marker)
        .into_iter()
        .find(|p| box_pid(*p) == Some(inner))
}
