//! The same adversaries with cgroups disabled: process group + subreaper tracking must still
//! find, kill and record escaped descendants. Tests here are serialized, because in this mode
//! orphans re-parented to this process are attributed to the running execution.

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use qual_exec::{execute, set_cgroup_policy, CgroupPolicy, Mechanism, Termination};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn fallback() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    set_cgroup_policy(CgroupPolicy::Never);
    qual_exec::force_full_proc_scan(false);
    g
}

/// Fallback with the full `/proc` scan (group, session, ancestry, re-parenting), the path of
/// kernels without `/proc/<pid>/task/*/children`.
fn fallback_full_scan() -> std::sync::MutexGuard<'static, ()> {
    let g = fallback();
    qual_exec::force_full_proc_scan(true);
    g
}

#[test]
fn full_scan_finds_escapees_and_children() {
    let _g = fallback_full_scan();
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("gc.pid");
    let c = case(&["escape", pidfile.to_str().unwrap()], 60.0, 5.0, d.path());
    let e = execute(&c.spec).unwrap();
    let gc: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    assert!(
        e.containment.residue.iter().any(|r| r.box_pid == Some(gc)),
        "{gc} not in {:?}",
        e.containment.residue
    );
    assert_nothing_left(&e, &c.marker);
    let c = case(&["fork-children", "50", "300"], 60.0, 5.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(e.containment.residue.len(), 50);
    assert_nothing_left(&e, &c.marker);
    let c = case(
        &["fork-children", "20", "300", "--wait"],
        1.0,
        1.0,
        d.path(),
    );
    let e = execute(&c.spec).unwrap();
    assert!(matches!(e.termination, Termination::TimedOut { .. }));
    assert_nothing_left(&e, &c.marker);
    qual_exec::force_full_proc_scan(false);
}

#[test]
fn daemon_like_escapee_is_found_through_subreaping() {
    let _g = fallback();
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("gc.pid");
    let c = case(&["escape", pidfile.to_str().unwrap()], 60.0, 5.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(e.containment.mechanism, Mechanism::ProcessGroupSubreaper);
    assert_eq!(e.termination, Termination::Exited { code: 0 });
    let gc: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    assert!(
        e.containment.residue.iter().any(|r| r.box_pid == Some(gc)),
        "{gc} not in {:?}",
        e.containment.residue
    );
    assert!(!e.containment.clean);
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn escapee_ignoring_sigterm_is_killed() {
    let _g = fallback();
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("gc.pid");
    let c = case(
        &[
            "escape",
            pidfile.to_str().unwrap(),
            "--ignore-term",
            "--keep-stdio",
        ],
        60.0,
        1.0,
        d.path(),
    );
    let e = execute(&c.spec).unwrap();
    let gc: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    let r = e
        .containment
        .residue
        .iter()
        .find(|r| r.box_pid == Some(gc))
        .unwrap();
    assert_eq!(r.signal, libc::SIGKILL);
    assert!(e.containment.pipes_closed);
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn two_hundred_children_are_killed() {
    let _g = fallback();
    let d = tempfile::tempdir().unwrap();
    let c = case(&["fork-children", "200", "300"], 60.0, 5.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(e.containment.mechanism, Mechanism::ProcessGroupSubreaper);
    assert_eq!(e.containment.residue.len(), 200);
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn timed_out_sigterm_ignorer_is_killed() {
    let _g = fallback();
    let d = tempfile::tempdir().unwrap();
    let c = case(&["ignore-term", "120"], 3.0, 1.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(
        e.termination,
        Termination::TimedOut {
            signal_used: libc::SIGKILL
        }
    );
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn escapee_of_a_running_owned_process_is_residue() {
    let _g = fallback();
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("gc.pid");
    let marker = marker();
    let spec = qual_exec::OwnedSpec {
        argv: [
            FIXTURE,
            "escape",
            pidfile.to_str().unwrap(),
            "--ignore-term",
            "--stay",
            "300",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        cwd: d.path().to_path_buf(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("KQ_TEST_MARKER".into(), marker.clone()),
        ],
        stdout_log: d.path().join("stdout.log"),
        stderr_log: d.path().join("stderr.log"),
        log_limit_bytes: 1024,
        network: qual_exec::NetworkPolicy::Inherit,
        sandbox: Default::default(),
    };
    let mut p = qual_exec::OwnedProcess::spawn(&spec).unwrap();
    assert_eq!(p.mechanism(), Some(Mechanism::ProcessGroupSubreaper));
    let leader = p.pid();
    let gc: u32 = wait_for_file(&pidfile, std::time::Duration::from_secs(60))
        .expect("the escapee started")
        .parse()
        .unwrap();
    assert_eq!(
        wait_for_file(&spec.stdout_log, std::time::Duration::from_secs(60)).as_deref(),
        Some("escaped\n")
    );
    let s = p.shutdown(std::time::Duration::from_millis(500));
    assert!(s.used_kill, "{s:?}");
    assert_eq!(
        s.termination,
        Termination::Signaled {
            signal: libc::SIGTERM
        }
    );
    let r = s
        .residue
        .iter()
        .find(|r| r.box_pid == Some(gc))
        .unwrap_or_else(|| panic!("{gc} not in {:?}", s.residue));
    assert_eq!(r.signal, libc::SIGKILL);
    assert!(r.cmdline.contains("escape"), "{}", r.cmdline);
    assert!(!s.clean);
    assert!(processes_with_marker(&marker).is_empty());
    assert!(!pid_exists(leader) && !pid_exists(r.pid));
}
