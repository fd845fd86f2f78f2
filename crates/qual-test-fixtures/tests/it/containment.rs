//! Adversarial fixtures through `qual_exec::execute` with the default containment (cgroup v2
//! where writable here, else process group + subreaper): each test asserts the evidence and
//! that no process of the case is alive afterwards.

use crate::common;

use common::*;
use qual_exec::{execute, ExecError, NetworkPolicy, Termination};
use std::time::Duration;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Makes a temporary directory usable by the unprivileged re-run (see the last test).
fn open_dir(d: &tempfile::TempDir) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
}

#[test]
fn sleeper_past_deadline_is_terminated_with_sigterm() {
    let d = tmp();
    let c = case(&["sleep", "120"], 1.0, 10.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(
        e.termination,
        Termination::TimedOut {
            signal_used: libc::SIGTERM
        }
    );
    assert!(e.wall >= Duration::from_secs(1), "{:?}", e.wall);
    assert!(e.wall < Duration::from_secs(60), "{:?}", e.wall);
    assert!(e.containment.group_killed);
    assert!(
        e.containment.residue.is_empty(),
        "{:?}",
        e.containment.residue
    );
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn sigterm_ignorer_is_killed_after_grace() {
    let d = tmp();
    let c = case(&["ignore-term", "120"], 3.0, 1.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(
        e.termination,
        Termination::TimedOut {
            signal_used: libc::SIGKILL
        }
    );
    assert_eq!(e.stdout.text_lossy(), "ready\n");
    assert!(e.wall >= Duration::from_secs(4), "{:?}", e.wall);
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn a_slow_cleanup_gets_exactly_one_sigterm_and_its_grace() {
    let d = tmp();
    let c = case(&["slow-term", "1.5"], 3.0, 30.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(
        e.termination,
        Termination::TimedOut {
            signal_used: libc::SIGTERM
        }
    );
    assert_eq!(e.stdout.text_lossy(), "ready\nterms 1\n");
    assert_nothing_left(&e, &c.marker);
    // A worker in the same group receives the group SIGTERM too, finishes its own cleanup
    // within the grace and is not residue.
    let c = case(&["slow-term", "1.5", "--with-child"], 3.0, 30.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(e.stdout.text_lossy(), "ready\nchild terms 1\nterms 1\n");
    assert!(
        e.containment.residue.is_empty(),
        "{:?}",
        e.containment.residue
    );
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn setsid_double_fork_escapee_is_found_killed_and_recorded() {
    let d = tmp();
    let pidfile = d.path().join("grandchild.pid");
    let c = case(&["escape", pidfile.to_str().unwrap()], 60.0, 5.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(e.termination, Termination::Exited { code: 0 });
    let gc: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    let r = e
        .containment
        .residue
        .iter()
        .find(|r| r.box_pid == Some(gc))
        .unwrap_or_else(|| panic!("grandchild {gc} not in residue {:?}", e.containment.residue));
    assert_eq!(r.signal, libc::SIGTERM);
    assert!(r.cmdline.contains("escape"), "{}", r.cmdline);
    assert!(!e.containment.clean);
    assert!(e.containment.group_killed);
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn escapee_ignoring_sigterm_and_keeping_pipes_is_killed() {
    let d = tmp();
    let pidfile = d.path().join("grandchild.pid");
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
    assert_eq!(e.termination, Termination::Exited { code: 0 });
    let gc: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    let r = e
        .containment
        .residue
        .iter()
        .find(|r| r.box_pid == Some(gc))
        .unwrap();
    assert_eq!(r.signal, libc::SIGKILL);
    assert!(e.containment.pipes_closed);
    assert_eq!(e.stdout.text_lossy(), "escaped\n");
    assert_nothing_left(&e, &c.marker);
}

/// A leader that is terminated while it runs (here: a caller-owned abort, deterministic where a
/// deadline would race the fixture's start-up) and whose escapee ignores SIGTERM: the escapee
/// outlives the leader and is killed after the grace, so it is residue, also when the grace is
/// shorter than the settlement window.
#[test]
fn escapee_of_a_terminated_leader_is_killed_and_recorded() {
    for grace in [0.3, 2.0] {
        let d = tmp();
        let pidfile = d.path().join("grandchild.pid");
        let c = case(
            &[
                "escape",
                pidfile.to_str().unwrap(),
                "--ignore-term",
                "--stay",
                "300",
            ],
            600.0,
            grace,
            d.path(),
        );
        let mut stop = || pidfile.exists().then(|| "stop requested".to_string());
        let e = qual_exec::execute_watched(&c.spec, &mut stop).unwrap();
        assert_eq!(
            e.termination,
            Termination::Aborted {
                reason: "stop requested".into(),
                signal_used: libc::SIGTERM
            }
        );
        let gc: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
        let r = e
            .containment
            .residue
            .iter()
            .find(|r| r.box_pid == Some(gc))
            .unwrap_or_else(|| {
                panic!(
                    "grace {grace}: escapee {gc} not in residue {:?}",
                    e.containment
                )
            });
        assert_eq!(r.signal, libc::SIGKILL);
        assert!(r.cmdline.contains("escape"), "{}", r.cmdline);
        assert!(!e.containment.clean);
        assert_nothing_left(&e, &c.marker);
    }
}

/// Receives one descriptor over a UNIX socket (SCM_RIGHTS).
fn recv_fd(stream: &std::os::unix::net::UnixStream) -> std::os::fd::OwnedFd {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: receiving into local buffers; the descriptor received is ours to own.
    unsafe {
        let mut byte = [0u8];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let space = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        assert_eq!(
            libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC),
            1
        );
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        assert!(!cmsg.is_null());
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
        std::os::fd::OwnedFd::from_raw_fd(fd)
    }
}

#[test]
fn a_pipe_handed_outside_the_tree_is_reported_not_hunted() {
    let d = tmp();
    let sock = d.path().join("fd.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let holder = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        recv_fd(&stream)
    });
    let c = case(
        &["send-stdout", sock.to_str().unwrap()],
        60.0,
        1.0,
        d.path(),
    );
    let e = execute(&c.spec).unwrap();
    // This test process (outside the case's tree) held the write end: nothing was signalled,
    // the pipes are reported open and the execution is not clean.
    let held = holder.join().unwrap();
    assert_eq!(e.termination, Termination::Exited { code: 0 });
    assert!(!e.containment.pipes_closed);
    assert!(!e.containment.clean);
    assert!(e.containment.residue.is_empty());
    assert_eq!(e.stdout.text_lossy(), "sent\n");
    drop(held);
    assert_nothing_left(&e, &c.marker);
}

/// A case cannot create (or join) cgroups: the cgroup file systems are read-only inside its
/// box, so it cannot leave the execution's cgroup or pid limit; nothing of it is left.
#[test]
fn a_case_cannot_create_a_nested_cgroup() {
    let d = tmp();
    let pidfile = d.path().join("nested.pid");
    let c = case(
        &["nest-cgroup", pidfile.to_str().unwrap()],
        60.0,
        2.0,
        d.path(),
    );
    let e = execute(&c.spec).unwrap();
    // `nest-cgroup` exits 3 when it cannot create the nested cgroup.
    assert_eq!(
        e.termination,
        Termination::Exited { code: 3 },
        "{}",
        e.stdout.text_lossy()
    );
    assert!(
        e.containment
            .sandbox
            .read_only_paths
            .iter()
            .any(|p| p.contains("cgroup")),
        "{:?}",
        e.containment.sandbox
    );
    assert!(
        e.stdout.text_lossy().contains("Read-only file system"),
        "{}",
        e.stdout.text_lossy()
    );
    assert!(!pidfile.exists());
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn two_hundred_children_left_behind_are_all_killed() {
    let d = tmp();
    let c = case(&["fork-children", "200", "300"], 60.0, 5.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(e.termination, Termination::Exited { code: 0 });
    assert_eq!(e.stdout.text_lossy(), "forked 200\n");
    assert_eq!(
        e.containment.residue.len(),
        200,
        "{:?}",
        e.containment.residue
    );
    assert!(e
        .containment
        .residue
        .iter()
        .all(|r| r.signal == libc::SIGTERM));
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn two_hundred_children_of_a_timed_out_leader_are_killed() {
    let d = tmp();
    let c = case(
        &["fork-children", "200", "300", "--wait"],
        2.0,
        5.0,
        d.path(),
    );
    let e = execute(&c.spec).unwrap();
    assert!(
        matches!(e.termination, Termination::TimedOut { .. }),
        "{:?}",
        e.termination
    );
    assert_nothing_left(&e, &c.marker);
}

#[test]
fn exit_by_signal_is_reported() {
    let d = tmp();
    for sig in [libc::SIGUSR1, libc::SIGKILL] {
        let c = case(&["kill-self", &sig.to_string()], 30.0, 1.0, d.path());
        let e = execute(&c.spec).unwrap();
        assert_eq!(e.termination, Termination::Signaled { signal: sig });
        assert!(e.containment.clean);
        assert!(!e.containment.group_killed);
        assert_nothing_left(&e, &c.marker);
    }
}

#[test]
fn exit_code_and_both_streams_are_captured() {
    let d = tmp();
    let c = case(&["exit", "7"], 30.0, 1.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert_eq!(e.termination, Termination::Exited { code: 7 });
    assert_eq!(e.termination.exit_code(), Some(7));
    let c = case(&["eprint", "to stderr"], 30.0, 1.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert!(e.termination.success());
    assert_eq!(e.stderr.text_lossy(), "to stderr\n");
    assert_eq!(e.stdout.total_bytes, 0);
    assert!(e.containment.clean && e.containment.pipes_closed);
}

#[test]
fn environment_is_closed_and_stdin_is_null() {
    let d = tmp();
    let mut c = case(&[], 30.0, 1.0, d.path());
    c.spec.argv = vec!["env".into()];
    c.spec.env = vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("ONLY_THIS".into(), "1".into()),
    ];
    let e = execute(&c.spec).unwrap();
    let mut lines: Vec<String> = e.stdout.text_lossy().lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["ONLY_THIS=1", "PATH=/usr/bin:/bin"]);
    c.spec.argv = vec!["cat".into()];
    let e = execute(&c.spec).unwrap();
    assert_eq!(e.termination, Termination::Exited { code: 0 });
    assert_eq!(e.stdout.total_bytes, 0);
}

#[test]
fn own_session_and_cwd() {
    let d = tmp();
    let mut c = case(&[], 30.0, 1.0, d.path());
    // `ps`-free: the child prints its own stat line fields via /proc/self/stat.
    c.spec.argv = vec!["cat".into(), "/proc/self/stat".into()];
    let e = execute(&c.spec).unwrap();
    let s = e.stdout.text_lossy();
    let after = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    // The program's group and session are the leader's, which lives outside the box's PID
    // namespace: seen from inside, both read as 0.
    assert_eq!(f[2], "0", "pgid outside the box: {s}");
    assert_eq!(f[3], "0", "sid outside the box: {s}");
    assert_eq!(f[1], "1", "the program's parent is the box's init: {s}");
    c.spec.argv = vec!["pwd".into()];
    let e = execute(&c.spec).unwrap();
    assert_eq!(
        e.stdout.text_lossy().trim_end(),
        d.path().canonicalize().unwrap().to_str().unwrap()
    );
}

#[test]
fn spawn_failures_are_errors() {
    let d = tmp();
    let mut c = case(&[], 30.0, 1.0, d.path());
    c.spec.argv = vec!["no-such-program-for-kiln-qual".into()];
    let err = execute(&c.spec).unwrap_err();
    assert!(matches!(err, ExecError::Spawn { .. }), "{err}");
    c.spec.argv = vec![d.path().join("missing").to_string_lossy().into_owned()];
    let err = execute(&c.spec).unwrap_err();
    assert!(matches!(err, ExecError::Spawn { .. }), "{err}");
    c.spec.argv = vec![];
    assert!(matches!(
        execute(&c.spec).unwrap_err(),
        ExecError::InvalidSpec { .. }
    ));
}

#[test]
fn loopback_only_namespace_blocks_the_host_listener_and_keeps_loopback() {
    let d = tmp();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let mut c = case(&["net-probe", &port], 60.0, 1.0, d.path());
    c.spec.network = NetworkPolicy::LoopbackOnly;
    let e = match execute(&c.spec) {
        Err(ExecError::IsolationUnavailable { capability, reason }) => {
            // Fail closed is the contract where the kernel refuses; say so and stop.
            eprintln!(
                "network namespaces unavailable here ({capability}: {reason}); refusal verified"
            );
            return;
        }
        other => other.unwrap(),
    };
    let out = e.stdout.text_lossy();
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(e.termination, Termination::Exited { code: 0 }, "{out}");
    assert!(v["outside"].as_str().unwrap().starts_with("error"), "{out}");
    assert_eq!(v["round_trip"], "ok:x", "{out}");
    assert_eq!(v["interfaces"], serde_json::json!(["lo"]), "{out}");
    assert_ne!(e.containment.network, qual_exec::NetworkIsolation::None);
    // The host listener never saw a connection.
    assert!(listener.accept().is_err());
    assert_nothing_left(&e, &c.marker);

    // Control: without isolation the same probe reaches the host listener (so the assertion
    // above can fail).
    c.spec.network = NetworkPolicy::Inherit;
    let e = execute(&c.spec).unwrap();
    let v: serde_json::Value = serde_json::from_str(e.stdout.text_lossy().trim()).unwrap();
    assert_eq!(v["outside"], "connected");
    assert_eq!(e.termination, Termination::Exited { code: 1 });
}

#[test]
fn case_result_fixture_modes_write_what_they_claim() {
    let d = tmp();
    let result = d.path().join("command-result.json");
    let run = |kind: &str| {
        let _ = std::fs::remove_file(&result);
        let mut c = case(
            &[
                "write-case-result",
                kind,
                "--case-id",
                "my-case",
                "--metric",
                "m",
            ],
            60.0,
            1.0,
            d.path(),
        );
        c.spec.env.push((
            "KILN_QUALIFICATION_CASE_RESULT".into(),
            result.to_string_lossy().into_owned(),
        ));
        execute(&c.spec).unwrap()
    };
    let read = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap()
    };
    let e = run("valid");
    assert!(e.termination.success());
    let v = read();
    assert_eq!(v["case_id"], "my-case");
    assert_eq!(v["metrics"][0]["name"], "m");
    run("wrong-case-id");
    assert_eq!(read()["case_id"], "my-case-wrong");
    run("undeclared-metric");
    let names: Vec<String> = read()["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["m", "undeclared_metric"]);
    let e = run("passed-nonzero-exit");
    assert_eq!(e.termination, Termination::Exited { code: 3 });
    assert_eq!(read()["status"], "passed");
    run("oversized");
    assert_eq!(std::fs::metadata(&result).unwrap().len(), 100_000_000);
}

#[test]
fn touch_file_modifies_the_file() {
    let d = tmp();
    let f = d.path().join("tracked.txt");
    std::fs::write(&f, "original\n").unwrap();
    let c = case(&["touch-file", f.to_str().unwrap()], 30.0, 1.0, d.path());
    let e = execute(&c.spec).unwrap();
    assert!(e.termination.success());
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "original\nmodified by qual-fixture\n"
    );
}

#[test]
fn evidence_serializes_as_tagged_outcomes() {
    let d = tmp();
    let c = case(&["exit", "2"], 30.0, 1.0, d.path());
    let e = execute(&c.spec).unwrap();
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(
        v["termination"],
        serde_json::json!({"status": "exited", "code": 2})
    );
    let m = v["containment"]["mechanism"].as_str().unwrap();
    assert!(m == "cgroup_v2" || m == "process_group_subreaper", "{m}");
    let back: qual_exec::Execution = serde_json::from_value(v).unwrap();
    assert_eq!(back.termination, e.termination);
}

/// A skip, said out loud; under `CI=true` (CI skips nothing) a failure.
fn skip_unless_ci(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and this test cannot run: {why}"
    );
    eprintln!("skipped: {why}");
}

/// Re-runs this module's tests as an unprivileged user (uid/gid 65534) when we are root and
/// `setpriv` exists: no writable cgroup (process group + subreaper tracking) and a user
/// namespace for the loopback-only network. Skips, saying why, elsewhere.
#[test]
fn whole_suite_passes_unprivileged() {
    if std::env::var_os("KQ_UNPRIVILEGED_CHILD").is_some() {
        return;
    }
    // SAFETY: trivial getter.
    if unsafe { libc::geteuid() } != 0 {
        skip_unless_ci("not root, the suite already runs unprivileged");
        return;
    }
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(setpriv) = setpriv else {
        skip_unless_ci("setpriv not found");
        return;
    };
    let me = std::env::current_exe().unwrap();
    let d = tmp();
    open_dir(&d);
    // kiln-qual needs a writable cgroup sub-tree: give uid 65534 one, as systemd delegates
    // a user's session.
    let cg = qual_test_fixtures::DelegatedCgroup::create(65534, 65534)
        .expect("root can delegate a cgroup v2 directory");
    let mut cmd = std::process::Command::new(setpriv);
    cg.enter_before_exec(&mut cmd).unwrap();
    let out = cmd
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&me)
        .args([
            // This module's tests only: the binary also holds the other modules of `tests/it`.
            "containment::",
            "--skip",
            "whole_suite_passes_unprivileged",
            "--test-threads",
            "4",
        ])
        .env("KQ_UNPRIVILEGED_CHILD", "1")
        .env("TMPDIR", d.path())
        .current_dir(d.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if matches!(out.status.code(), Some(126 | 127)) || text.contains("Permission denied") {
        skip_unless_ci(&format!(
            "uid 65534 cannot execute the test binary here: {text}"
        ));
        return;
    }
    assert!(out.status.success(), "unprivileged run failed:\n{text}");
    assert!(text.contains("test result: ok."), "{text}");
}
