//! The same adversaries with cgroups disabled: process group + subreaper tracking must still
//! find, kill and record escaped descendants. Tests here are serialized, because in this mode
//! orphans re-parented to this process are attributed to the running execution.

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
        e.containment.residue.iter().any(|r| r.pid == gc),
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
        e.containment.residue.iter().any(|r| r.pid == gc),
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
    let r = e.containment.residue.iter().find(|r| r.pid == gc).unwrap();
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
