//! `kill -9` of the runner process itself: everything of the case dies with it within one
//! second — the leader (PR_SET_PDEATHSIG), and the box's PID namespace init, which sees the
//! runner's death pipe close and takes the whole namespace with it, including a descendant
//! that escaped into its own session and ignores SIGTERM.

use crate::common;

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
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn nothing_of_the_case_outlives_a_sigkilled_runner_by_a_second() {
    let d = tempfile::tempdir().unwrap();
    let marker = marker();
    let pidfile = d.path().join("gc.pid");
    // The leader escapes a SIGTERM-ignoring grandchild and then sleeps.
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
    let runner_pid = runner.id();
    // Both the escapee (by its pid inside the box) and the sleeping leader are running.
    let case_processes = || -> Vec<u32> {
        processes_with_marker(&marker)
            .into_iter()
            .filter(|p| *p != runner_pid)
            .collect()
    };
    assert!(
        wait_until(Duration::from_secs(60), || {
            let ps = case_processes();
            ps.iter().any(|p| box_pid(*p) == Some(gc))
                && ps.iter().any(|p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .map(|c| c.ends_with(b"sleep\x00600\x00"))
                        .unwrap_or(false)
                })
        }),
        "the case did not start: {:?}",
        case_processes()
    );
    runner.kill().unwrap(); // SIGKILL
    runner.wait().unwrap();
    let killed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(1), || case_processes().is_empty()),
        "alive {:?} after the runner was killed",
        case_processes()
    );
    eprintln!(
        "case gone {:?} after SIGKILL of the runner",
        killed.elapsed()
    );
}
