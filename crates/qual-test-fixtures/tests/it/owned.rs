//! `OwnedProcess`: a long-lived contained process (server-like) with bounded log files and a
//! staged shutdown; asserts the evidence and that nothing is left in `/proc`.

use crate::common;

use common::*;
use qual_exec::{NetworkPolicy, OwnedProcess, OwnedSpec, Termination};
use std::path::Path;
use std::time::{Duration, Instant};

fn owned(args: &[&str], dir: &Path, limit: u64) -> (OwnedSpec, String) {
    let marker = marker();
    let mut argv = vec![FIXTURE.to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    (
        OwnedSpec {
            argv,
            cwd: dir.to_path_buf(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("KQ_TEST_MARKER".into(), marker.clone()),
            ],
            stdout_log: dir.join("stdout.log"),
            stderr_log: dir.join("stderr.log"),
            log_limit_bytes: limit,
            network: NetworkPolicy::Inherit,
            sandbox: Default::default(),
        },
        marker,
    )
}

fn assert_gone(pids: &[u32], marker: &str) {
    assert!(processes_with_marker(marker).is_empty());
    for p in pids {
        assert!(!pid_exists(*p), "{p} still in /proc");
    }
}

#[test]
fn server_that_honours_sigterm_shuts_down_cleanly() {
    let d = tempfile::tempdir().unwrap();
    let (spec, marker) = owned(&["sleep", "300"], d.path(), 1024);
    let mut p = OwnedProcess::spawn(&spec).unwrap();
    let pid = p.pid();
    assert_eq!(p.try_wait().unwrap(), None);
    // The leader and the program it stands for inside the box.
    let members = p.group_members();
    assert_eq!(members.len(), 2, "{members:?}");
    assert_eq!(members[0], pid);
    let s = p.shutdown(Duration::from_secs(10));
    assert!(!s.used_kill);
    assert_eq!(
        s.termination,
        Termination::Signaled {
            signal: libc::SIGTERM
        }
    );
    assert!(s.residue.is_empty() && s.clean, "{s:?}");
    assert_gone(&[pid], &marker);
    assert_eq!(p.shutdown(Duration::from_secs(1)), s);
    assert_eq!(p.try_wait().unwrap(), Some(s.termination.clone()));
    assert!(p.group_members().is_empty());
}

#[test]
fn server_ignoring_sigterm_needs_kill() {
    let d = tempfile::tempdir().unwrap();
    let (spec, marker) = owned(&["ignore-term", "300"], d.path(), 1024);
    let mut p = OwnedProcess::spawn(&spec).unwrap();
    let pid = p.pid();
    // Wait until it has installed its SIGTERM disposition (it prints `ready` after).
    assert_eq!(
        wait_for_file(&d.path().join("stdout.log"), Duration::from_secs(60)).as_deref(),
        Some("ready\n")
    );
    let s = p.shutdown(Duration::from_millis(500));
    assert!(s.used_kill);
    assert_eq!(
        s.termination,
        Termination::Signaled {
            signal: libc::SIGKILL
        }
    );
    assert_gone(&[pid], &marker);
}

#[test]
fn children_left_by_an_exited_server_are_residue() {
    let d = tempfile::tempdir().unwrap();
    let (spec, marker) = owned(&["fork-children", "5", "300"], d.path(), 1024);
    let mut p = OwnedProcess::spawn(&spec).unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while p.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(p.try_wait().unwrap(), Some(Termination::Exited { code: 0 }));
    let members = p.group_members();
    assert_eq!(members.len(), 5, "{members:?}");
    let s = p.shutdown(Duration::from_secs(10));
    assert_eq!(s.residue.len(), 5);
    assert!(!s.clean);
    assert_eq!(s.stdout.total_bytes, "forked 5\n".len() as u64);
    assert_gone(&members, &marker);
}

#[test]
fn logs_are_bounded_and_exclusive() {
    let d = tempfile::tempdir().unwrap();
    let (spec, marker) = owned(&["flood", "1000000"], d.path(), 1000);
    let mut p = OwnedProcess::spawn(&spec).unwrap();
    let pid = p.pid();
    let until = Instant::now() + Duration::from_secs(60);
    while p.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = p.shutdown(Duration::from_secs(5));
    assert_eq!(s.stdout.total_bytes, 1_000_000);
    assert_eq!(s.stdout.written_bytes, 1000);
    assert!(s.stdout.truncated);
    assert_eq!(std::fs::metadata(&spec.stdout_log).unwrap().len(), 1000);
    assert_gone(&[pid], &marker);
    // The log files exist now: a second spawn with the same paths is refused.
    assert!(OwnedProcess::spawn(&spec).is_err());
}

#[test]
fn dropping_an_owned_process_kills_it() {
    let d = tempfile::tempdir().unwrap();
    let (spec, marker) = owned(&["ignore-term", "300"], d.path(), 1024);
    let p = OwnedProcess::spawn(&spec).unwrap();
    let pid = p.pid();
    drop(p);
    assert_gone(&[pid], &marker);
}

#[test]
fn owned_process_can_be_loopback_only() {
    let d = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let (mut spec, marker) = owned(&["net-probe", &port], d.path(), 4096);
    spec.network = NetworkPolicy::LoopbackOnly;
    let mut p = match OwnedProcess::spawn(&spec) {
        Err(qual_exec::ExecError::IsolationUnavailable { capability, .. }) => {
            eprintln!("isolation unavailable here ({capability}): refusal verified");
            return;
        }
        other => other.unwrap(),
    };
    assert_ne!(
        p.network_isolation(),
        Some(qual_exec::NetworkIsolation::None)
    );
    let pid = p.pid();
    let until = Instant::now() + Duration::from_secs(60);
    while p.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = p.shutdown(Duration::from_secs(5));
    let log = std::fs::read_to_string(&spec.stdout_log).unwrap();
    assert_eq!(s.termination, Termination::Exited { code: 0 }, "{log}");
    assert!(log.contains("\"round_trip\":\"ok:x\""), "{log}");
    assert_gone(&[pid], &marker);
}

/// A running server that started a daemon (`setsid` + double fork, SIGTERM ignored): shutdown
/// finds the escaped process, kills it and records it as residue (pid, command line, the signal
/// that ended it), whether the grace ends before the settlement window (0.5 s) or after it.
#[test]
fn an_escaped_child_of_a_running_server_is_found_killed_and_recorded() {
    for grace in [Duration::from_millis(500), Duration::from_secs(3)] {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("escaped.pid");
        let (spec, marker) = owned(
            &[
                "escape",
                pidfile.to_str().unwrap(),
                "--ignore-term",
                "--stay",
                "300",
            ],
            d.path(),
            1024,
        );
        let mut p = OwnedProcess::spawn(&spec).unwrap();
        let pid = p.pid();
        let gc: u32 = wait_for_file(&pidfile, Duration::from_secs(60))
            .expect("the escapee started")
            .parse()
            .unwrap();
        // `escaped` is printed once the intermediate child is reaped: the tree is now the
        // leader plus the escapee in its own session.
        assert_eq!(
            wait_for_file(&spec.stdout_log, Duration::from_secs(60)).as_deref(),
            Some("escaped\n")
        );
        let hgc = host_pid(&marker, gc).expect("the escapee is alive");
        assert!(ignores_sigterm(hgc), "{hgc} does not ignore SIGTERM");
        let members = p.group_members();
        assert!(
            members.contains(&pid) && members.contains(&hgc),
            "{members:?}"
        );
        assert_eq!(p.try_wait().unwrap(), None);
        let s = p.shutdown(grace);
        assert_eq!(
            s.termination,
            Termination::Signaled {
                signal: libc::SIGTERM
            },
            "{s:?}"
        );
        assert!(s.used_kill, "{s:?}");
        assert_eq!(s.residue.len(), 1, "grace {grace:?}: {s:?}");
        let r = &s.residue[0];
        assert_eq!(r.box_pid, Some(gc), "{s:?}");
        assert_eq!(r.signal, libc::SIGKILL, "{s:?}");
        assert!(r.cmdline.contains("escape"), "{}", r.cmdline);
        assert!(!s.clean, "{s:?}");
        assert_gone(&[pid, hgc], &marker);
    }
}

/// A server whose leader started a plain sleeper in its own session (not a listener, SIGTERM
/// not ignored) and then exits on SIGTERM: only the server's own group is asked to stop, so
/// the sleeper is still alive when the leader has exited — residue (pid, pid in the box,
/// session, command line), killed, and the shutdown is not clean. Nothing is left.
#[test]
fn a_sleeper_that_left_the_server_group_is_residue_at_shutdown() {
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("sleeper.pid");
    let (spec, marker) = owned(
        &["escape", pidfile.to_str().unwrap(), "--stay", "300"],
        d.path(),
        1024,
    );
    let mut p = OwnedProcess::spawn(&spec).unwrap();
    let pid = p.pid();
    let gc: u32 = wait_for_file(&pidfile, Duration::from_secs(60))
        .expect("the sleeper started")
        .parse()
        .unwrap();
    assert_eq!(
        wait_for_file(&spec.stdout_log, Duration::from_secs(60)).as_deref(),
        Some("escaped\n")
    );
    let hgc = host_pid(&marker, gc).expect("the sleeper is alive");
    assert!(!ignores_sigterm(hgc));
    let s = p.shutdown(Duration::from_secs(3));
    assert_eq!(
        s.termination,
        Termination::Signaled {
            signal: libc::SIGTERM
        },
        "{s:?}"
    );
    let r = s
        .residue
        .iter()
        .find(|r| r.box_pid == Some(gc))
        .unwrap_or_else(|| panic!("the sleeper is not residue: {s:?}"));
    assert_eq!(r.pid, hgc);
    assert_ne!(r.session, pid, "the sleeper had its own session");
    assert!(r.cmdline.contains("escape"), "{}", r.cmdline);
    assert!(!s.clean, "{s:?}");
    assert_gone(&[pid, hgc], &marker);
}
