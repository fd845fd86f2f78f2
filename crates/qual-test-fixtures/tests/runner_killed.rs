//! `kill -9` of the runner process itself: the case leader dies with it (PR_SET_PDEATHSIG),
//! and a descendant that escaped into its own session is cleaned up by the next runner, which
//! sweeps the dead runner's cgroup (when cgroups are in use).

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNNER: &str = env!("CARGO_BIN_EXE_qual-exec-run");

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn case_dies_with_a_sigkilled_runner_and_escapees_are_swept_next_time() {
    let d = tempfile::tempdir().unwrap();
    let marker = marker();
    let pidfile = d.path().join("gc.pid");
    // The leader escapes a grandchild and then sleeps (so the leader itself is alive too).
    let mut runner = Command::new(RUNNER)
        .args(["--timeout", "600", "--", "sh", "-c"])
        .arg(format!(
            "{FIXTURE} escape {} --ignore-term; exec {FIXTURE} sleep 600",
            pidfile.display()
        ))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("KQ_TEST_MARKER", &marker)
        .current_dir(d.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let gc: u32 = wait_for_file(&pidfile, Duration::from_secs(60))
        .expect("grandchild started")
        .parse()
        .unwrap();
    // The case leader: carries the marker, is neither the runner (which has the marker in its
    // own environment) nor the escapee, and runs the sleep fixture.
    let runner_pid = runner.id();
    let mut leader = None;
    assert!(wait_until(Duration::from_secs(60), || {
        leader = processes_with_marker(&marker).into_iter().find(|p| {
            *p != gc
                && *p != runner_pid
                && std::fs::read(format!("/proc/{p}/cmdline"))
                    .map(|c| c.ends_with(b"sleep\x00600\x00"))
                    .unwrap_or(false)
        });
        leader.is_some()
    }));
    let leader = leader.unwrap();
    runner.kill().unwrap(); // SIGKILL
    runner.wait().unwrap();
    // The leader had PR_SET_PDEATHSIG=SIGKILL: it dies with the runner.
    assert!(
        wait_until(Duration::from_secs(30), || !is_alive(leader)),
        "leader {leader} survived its runner"
    );
    // The escapee may survive the runner (it is not the runner's child); the next runner
    // process sweeps the dead runner's cgroup.
    let next = Command::new(RUNNER)
        .args(["--", "true"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(next.status.success());
    let v: serde_json::Value = serde_json::from_slice(&next.stdout).unwrap();
    if v["containment"]["mechanism"] == "cgroup_v2" {
        assert!(
            wait_until(Duration::from_secs(30), || !is_alive(gc)),
            "escapee {gc} survived the sweep"
        );
        assert!(processes_with_marker(&marker).is_empty());
    } else {
        // Without cgroups nothing can find an orphan of a dead runner: clean up ourselves.
        eprintln!("no cgroup here: escapee {gc} is outside any runner's reach, killing it");
        // SAFETY: killing the test's own stray process.
        unsafe { libc::kill(gc as i32, libc::SIGKILL) };
    }
}

fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let st = s[s.rfind(')').unwrap() + 2..].chars().next().unwrap();
            st != 'Z' && st != 'X'
        })
        .unwrap_or(false)
}
