//! SIGTERM to the runner (this test process) with forwarding installed: the running case group
//! is terminated, the execution reports `Interrupted`, nothing is left, and no new execution
//! starts. Own test binary, because the signal state is process-wide.

// Tests start programs and read back files directly.
#![allow(clippy::disallowed_methods)]
// Tests: libc calls (signals, ids, forks) set up and observe the processes under test.
#![allow(unsafe_code)]

mod common;

use common::*;
use qual_exec::{execute, signals, ExecError, Termination};
use std::time::{Duration, Instant};

#[test]
fn sigterm_to_the_runner_interrupts_the_running_case() {
    signals::install_forwarding().unwrap();
    assert_eq!(signals::interrupted(), None);
    let d = tempfile::tempdir().unwrap();
    let c = case(&["ignore-term", "120"], 300.0, 1.0, d.path());
    let marker = c.marker.clone();
    let spec = c.spec.clone();
    let runner = std::thread::spawn(move || execute(&spec));
    // Wait until the case runs and ignores SIGTERM, then signal ourselves.
    let until = Instant::now() + Duration::from_secs(60);
    while !processes_with_marker(&marker)
        .into_iter()
        .any(ignores_sigterm)
    {
        assert!(Instant::now() < until, "case never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending SIGTERM to this process, whose handler is installed above.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    let e = runner.join().unwrap().unwrap();
    assert_eq!(signals::interrupted(), Some(libc::SIGTERM));
    // The fixture ignores SIGTERM, so the group needed SIGKILL after the grace.
    assert_eq!(
        e.termination,
        Termination::Interrupted {
            signal_used: libc::SIGKILL
        }
    );
    assert!(e.wall < Duration::from_secs(120), "{:?}", e.wall);
    assert_nothing_left(&e, &marker);
    let again = execute(&c.spec).unwrap_err();
    assert!(matches!(again, ExecError::Interrupted { signal } if signal == libc::SIGTERM));
}
