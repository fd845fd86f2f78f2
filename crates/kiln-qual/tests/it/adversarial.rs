//! Hostile cases against `kiln-qual run`, end to end with the real binary, real git, real
//! namespaces and real listeners (threat model: `docs/security.md`). Every attack runs twice:
//! as the invoking user (root in CI) and as uid 65534 inside a cgroup delegated to it (as
//! systemd delegates a user's session), and each asserts that
//! - the case fails with the kernel's reason in its details (or the run is refused),
//! - nothing it started is alive afterwards (a `/proc` scan for the case's marker),
//! - no host listener (TCP on 127.0.0.1, a filesystem unix socket) accepted a connection,
//! - no file under `.git` changed and nothing but the run's own evidence appeared under
//!   `.qualification`, and the receipt is the runner's (strictly valid, failed).
//!
//! The unprivileged half needs root to set it up (delegation, file ownership); run as another
//! user it is reported as skipped, and under `CI=true` that is a failure.

use crate::common;

use common::git;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_kiln-qual");
const NOBODY: u32 = 65534;

#[derive(Clone, Copy, Debug, PartialEq)]
enum User {
    Invoker,
    Nobody,
}

fn is_root() -> bool {
    // SAFETY: trivial getter.
    unsafe { libc::geteuid() == 0 }
}

/// Whether the unprivileged half can run here; prints the skip (fails under CI=true).
fn nobody_available() -> bool {
    if is_root() && Path::new("/usr/bin/setpriv").exists() {
        return true;
    }
    let why = "not root or no setpriv: cannot run the uid 65534 half";
    qual_test_fixtures::harness::skip(why);
    false
}

fn marker() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "kq-adv-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A host listener that counts accepted connections.
struct Listeners {
    tcp_port: u16,
    unix_path: PathBuf,
    accepted: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

fn listeners() -> Listeners {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let unix_path = dir.path().join("host.sock");
    let unix = std::os::unix::net::UnixListener::bind(&unix_path).unwrap();
    std::fs::set_permissions(&unix_path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let a = accepted.clone();
    std::thread::spawn(move || {
        for c in tcp.incoming() {
            if c.is_ok() {
                a.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let a = accepted.clone();
    std::thread::spawn(move || {
        for c in unix.incoming() {
            if c.is_ok() {
                a.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    Listeners {
        tcp_port,
        unix_path,
        accepted,
        _dir: dir,
    }
}

/// Every file below `dir` with its bytes' length and content (for before/after equality).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

struct Outcome {
    code: i32,
    stderr: String,
    receipt: Option<serde_json::Value>,
    root: PathBuf,
    _repo: tempfile::TempDir,
}

impl Outcome {
    fn details(&self) -> String {
        self.receipt
            .as_ref()
            .and_then(|r| r["results"][0]["details"].as_str().map(str::to_string))
            .unwrap_or_default()
    }

    fn status(&self) -> String {
        self.receipt
            .as_ref()
            .and_then(|r| r["results"][0]["status"].as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

fn workload(marker: &str, working_directory: &str) -> String {
    let case = serde_json::json!({
        "id": "attack",
        "description": "a hostile case",
        "required": true,
        "command": ["/bin/sh", "attack.sh"],
        "working_directory": working_directory,
        "environment": {"KQ_TEST_MARKER": marker},
        "timeout_seconds": 60,
        "expected_exit_codes": [0],
        "output_assertions": [],
        "result_protocol": {
            "format": "qualification-case-result-v1",
            "producer": "runner",
            "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
            "declared_metrics": ["case_pass", "exit_code", "output_assertion_failures"]
        }
    });
    format!(
        r#"{{
  "schema_version": 1,
  "workload_id": "attack-v1",
  "kind": "correctness",
  "description": "adversarial containment test",
  "determinism": {{"seed": 7, "seed_delivery": "fixed_fixture", "repetitions": 1, "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"}},
  "variables": [],
  "variants": [{{"id": "cpu", "description": "host cpu", "backend": "cpu", "device_requirement": "none", "skip_policy": "fail", "effective_config": {{}}, "cases": [{case}]}}],
  "comparison_policy": {{"mode":"self_contained_correctness","variant_pairs":[],"backend_pairs":[],"metric_rules":[]}}
}}
"#
    )
}

/// Runs `script` as the single case of a committed workload in a fresh repository, as
/// `user`. `prepare` may adjust the kiln-qual command (e.g. hand it an extra descriptor).
fn run_attack(
    user: User,
    marker: &str,
    script: &str,
    prepare: impl FnOnce(&mut Command),
) -> Outcome {
    run_wrapped(user, marker, script, &[], prepare)
}

/// [`run_attack`] with `wrapper` (a program and its arguments) executing kiln-qual.
fn run_wrapped(
    user: User,
    marker: &str,
    script: &str,
    wrapper: &[String],
    prepare: impl FnOnce(&mut Command),
) -> Outcome {
    run_general(user, marker, script, wrapper, &Layout::default(), prepare)
}

/// How the repository of an attack is laid out.
#[derive(Default)]
struct Layout {
    /// The case's working directory (`.` unless set).
    working_directory: Option<&'static str>,
    /// Run in a linked worktree of the repository (`git worktree add`) instead of the main
    /// one; the main repository's `.git` is then the common git directory.
    linked: bool,
    /// Symlinks (name, target), committed unless ignored.
    symlinks: Vec<(&'static str, &'static str)>,
    /// Committed empty directories (a `.keep` file in each).
    dirs: Vec<&'static str>,
}

fn run_general(
    user: User,
    marker: &str,
    script: &str,
    wrapper: &[String],
    layout: &Layout,
    prepare: impl FnOnce(&mut Command),
) -> Outcome {
    let repo = tempfile::tempdir().unwrap();
    let main_root = repo.path().join("main");
    std::fs::create_dir(&main_root).unwrap();
    let root = main_root.clone();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    git(&root, &["init", "-q"]);
    std::fs::write(
        root.join(".gitignore"),
        // `target` without a slash: also an ignored symlink of that name (see the working
        // directory test).
        ".qualification/\ntarget\nCargo.lock\n",
    )
    .unwrap();
    // A tiny crate, for the honest case that builds with cargo.
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"boxed\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/main.rs"),
        "fn main() { println!(\"built\"); }\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::write(
        root.join("qualification/workloads/attack-v1.json"),
        workload(marker, layout.working_directory.unwrap_or(".")),
    )
    .unwrap();
    // The attack itself is a committed script (the contract refuses `sh -c` strings).
    std::fs::write(root.join("attack.sh"), format!("{script}\n")).unwrap();
    for (name, target) in &layout.symlinks {
        std::os::unix::fs::symlink(target, root.join(name)).unwrap();
    }
    for d in &layout.dirs {
        std::fs::create_dir_all(root.join(d)).unwrap();
        std::fs::write(root.join(d).join(".keep"), "").unwrap();
    }
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "init"]);
    let root = if layout.linked {
        let linked = repo.path().join("linked");
        git(
            &main_root,
            &["worktree", "add", "-q", linked.to_str().unwrap()],
        );
        linked
    } else {
        root
    };
    let mut cmd = match wrapper.first() {
        Some(w) => {
            let mut c = Command::new(w);
            c.args(&wrapper[1..]).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    let _cg;
    if user == User::Nobody {
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(repo.path())
            .status()
            .unwrap();
        assert!(st.success());
        let cg = qual_test_fixtures::DelegatedCgroup::create(NOBODY, NOBODY)
            .expect("root can delegate a cgroup");
        cmd = Command::new("/usr/bin/setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        cmd.args(wrapper).arg(BIN);
        cg.enter_before_exec(&mut cmd).unwrap();
        _cg = Some(cg);
    } else {
        _cg = None;
    }
    // The main repository's git directory: the common one of a linked worktree.
    let git_before = tree(&main_root.join(".git"));
    cmd.args([
        "run",
        "qualification/workloads/attack-v1.json",
        "--variant",
        "cpu",
        "--host-id",
        "adv-host",
        "--output",
        ".qualification/receipts/attack.json",
    ])
    .current_dir(&root)
    .env("KQ_TEST_MARKER", format!("{marker}-runner"))
    .env("KQ_RUNNER_SECRET", format!("secret-{marker}"))
    .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus")
    .env("XDG_RUNTIME_DIR", "/run/user/0");
    prepare(&mut cmd);
    let out = cmd.output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // Nothing of the case is alive (the runner's own marker differs by a suffix).
    let left = qual_test_fixtures::processes_with_marker(marker);
    assert!(
        left.is_empty(),
        "case processes alive after the run: {left:?}"
    );
    // .git is byte-identical; .qualification holds only this run's evidence and receipt.
    assert_eq!(
        tree(&main_root.join(".git")),
        git_before,
        "a file under .git (the common git directory) changed"
    );
    let q = tree(&root.join(".qualification"));
    for k in q.keys() {
        assert!(
            k == "runs/"
                || k.starts_with("runs/")
                || k == "receipts/"
                || k == "receipts/attack.json",
            "unexpected file under .qualification: {k}"
        );
    }
    let receipt_path = root.join(".qualification/receipts/attack.json");
    let receipt = std::fs::read(&receipt_path)
        .ok()
        .map(|b| serde_json::from_slice::<serde_json::Value>(&b).unwrap());
    if receipt.is_some() {
        // The receipt is the runner's: strict check with local artifacts passes.
        let check = Command::new(BIN)
            .args(["receipt", "check", "--require-local-artifacts"])
            .arg(&receipt_path)
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    Outcome {
        code,
        stderr,
        receipt,
        root,
        _repo: repo,
    }
}

fn users() -> Vec<User> {
    let mut v = vec![User::Invoker];
    if nobody_available() {
        v.push(User::Nobody);
    }
    v
}

/// The attack failed: the run finished (exit 1), the case failed, and its details carry the
/// kernel's refusal.
fn assert_case_failed(o: &Outcome, user: User, why: &[&str]) {
    assert_eq!(o.code, 1, "{user:?}: exit {} {}", o.code, o.stderr);
    assert_eq!(o.status(), "failed", "{user:?}: {}", o.details());
    // The kernel's refusal is in the case's retained output (or the runner's details).
    let mut text = o.details();
    for (k, v) in tree(&o.root.join(".qualification/runs")) {
        if k.ends_with("stdout.log") || k.ends_with("stderr.log") {
            text.push_str(&String::from_utf8_lossy(&v));
        }
    }
    assert!(
        why.iter().any(|w| text.contains(w)),
        "{user:?}: neither details nor output name {why:?}: {text}"
    );
    assert_eq!(
        o.receipt.as_ref().unwrap()["qualification"]["verdict"].as_str(),
        Some("failed")
    );
}

#[test]
fn fsmonitor_in_git_config_is_refused_and_never_runs() {
    for user in users() {
        let m = marker();
        let pwn = tempfile::tempdir().unwrap();
        std::fs::set_permissions(pwn.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let flag = pwn.path().join("pwned");
        let prog = pwn.path().join("pwn.sh");
        std::fs::write(&prog, format!("#!/bin/sh\ntouch {}\n", flag.display())).unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = format!(
            "printf '[core]\\n\\tfsmonitor = {p}\\n' >> .git/config || exit 1; \
             mkdir -p .git/hooks && printf '#!/bin/sh\\n{p}\\n' > .git/hooks/post-index-change || exit 1",
            p = prog.display()
        );
        let o = run_attack(user, &m, &script, |_| {});
        assert_case_failed(&o, user, &["Read-only file system"]);
        // The runner's own git queries after the case, and a later strict check with the
        // current source, never ran the program.
        // (As the repository's owner: git refuses a repository owned by someone else.)
        let mut check = if user == User::Nobody {
            let mut c = Command::new("/usr/bin/setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                BIN,
            ]);
            c
        } else {
            Command::new(BIN)
        };
        let check = check
            .args([
                "receipt",
                "check",
                "--require-current-source",
                ".qualification/receipts/attack.json",
            ])
            .current_dir(&o.root)
            .output()
            .unwrap();
        assert!(check.status.success(), "{check:?}");
        assert!(!flag.exists(), "{user:?}: the fsmonitor program ran");
    }
}

#[test]
fn a_case_cannot_write_the_receipt_path() {
    for user in users() {
        let m = marker();
        // The runner's command line is visible (the box's init is a fork of the runner):
        // read the --output path from it and try to put a forged receipt there.
        let script =
            "out=$(tr '\\0' '\\n' < /proc/1/cmdline | grep -A1 -x -- --output | tail -n 1); \
                      test -n \"$out\" || exit 9; mkdir -p \"$(dirname \"$out\")\" && \
                      echo '{\"verdict\": \"passed\"}' > \"$out\"";
        let o = run_attack(user, &m, script, |_| {});
        assert_case_failed(&o, user, &["Read-only file system"]);
    }
}

#[test]
fn the_runner_network_namespace_cannot_be_entered() {
    for user in users() {
        let m = marker();
        let l = listeners();
        let script = format!(
            "for ns in /proc/1/ns/net /proc/*/ns/net; do \
               nsenter --net=$ns python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' && exit 0; \
             done; python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'",
            port = l.tcp_port
        );
        let o = run_attack(user, &m, &script, |_| {});
        assert_case_failed(&o, user, &["Operation not permitted", "Connection refused"]);
        assert_eq!(l.accepted.load(Ordering::SeqCst), 0, "{user:?}");
    }
}

#[test]
fn filesystem_unix_sockets_are_unreachable_and_socketpairs_work() {
    for user in users() {
        let m = marker();
        let l = listeners();
        let script = format!(
            "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"x\"); assert b.recv(1) == b\"x\"' || exit 8; \
             python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\")'",
            l.unix_path.display()
        );
        let o = run_attack(user, &m, &script, |_| {});
        assert_case_failed(&o, user, &["PermissionError", "Operation not permitted"]);
        assert_eq!(l.accepted.load(Ordering::SeqCst), 0, "{user:?}");
    }
}

#[test]
fn cgroup_moves_and_freezers_are_refused_and_nothing_outlives_the_run() {
    for user in users() {
        let m = marker();
        // Start a double-forked sleeper in its own session first, then try to leave the
        // case's cgroup (every cgroup.procs of every hierarchy) and to make a freezer.
        let script = "(setsid sh -c 'sleep 300' > /dev/null 2>&1 &); \
                      for f in $(find /sys/fs/cgroup -maxdepth 2 -name cgroup.procs); do echo $$ > $f || exit 1; done; \
                      mkdir /sys/fs/cgroup/freezer/kq-freeze || mkdir /sys/fs/cgroup/kq-freeze";
        let o = run_attack(user, &m, script, |_| {});
        assert_case_failed(&o, user, &["Read-only file system"]);
    }
}

#[test]
fn the_runner_memory_and_environment_are_out_of_reach() {
    for user in users() {
        let m = marker();
        let script = "cat /proc/1/environ; grep -a KQ_RUNNER_SECRET /proc/*/environ; \
                      python3 -c 'import ctypes; l = ctypes.CDLL(None); \
                      r = l.ptrace(16, 1, 0, 0); print(\"ptrace\", r); exit(0 if r == 0 else 1)'";
        let o = run_attack(user, &m, script, |_| {});
        assert_case_failed(&o, user, &["Permission denied", "exit code"]);
        // Neither the captured output nor any evidence file holds the runner's secret.
        for (k, v) in tree(&o.root.join(".qualification")) {
            assert!(
                !String::from_utf8_lossy(&v).contains(&format!("secret-{m}")),
                "{user:?}: the runner's secret leaked into {k}"
            );
        }
    }
}

#[test]
fn a_case_cannot_kill_its_runner() {
    for user in users() {
        let m = marker();
        let script = "kill -9 $PPID; kill -9 1; kill -KILL -1; sleep 1; exit 7";
        let o = run_attack(user, &m, script, |_| {});
        // The runner survived and judged the case (exit 7 is not expected).
        assert_case_failed(&o, user, &["exit code 7"]);
    }
}

#[test]
fn inherited_descriptors_do_not_reach_cases() {
    for user in users() {
        let m = marker();
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("fd9.txt");
        std::fs::write(&target, b"").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o666)).unwrap();
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(&target)
            .unwrap();
        let o = run_attack(user, &m, "echo pwned >&9", |cmd| {
            use std::os::fd::AsRawFd;
            use std::os::unix::process::CommandExt;
            let fd = f.as_raw_fd();
            // SAFETY: dup2 of a descriptor we own onto 9 in the child before exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::dup2(fd, 9) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        });
        assert_case_failed(&o, user, &["Bad file descriptor"]);
        let mut text = String::new();
        std::fs::File::open(&target)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "", "{user:?}: the case wrote through fd 9");
    }
}

#[test]
fn session_bus_variables_are_not_handed_to_cases() {
    for user in users() {
        let m = marker();
        let o = run_attack(
            user,
            &m,
            "if env | grep -E '^(DBUS_SESSION_BUS_ADDRESS|XDG_RUNTIME_DIR)='; then exit 1; fi",
            |_| {},
        );
        assert_eq!(o.code, 0, "{user:?}: {} {}", o.stderr, o.details());
    }
}

#[test]
fn honest_cases_work_in_the_box() {
    for user in users() {
        let m = marker();
        let script = "d=$(mktemp -d) && echo hi > $d/f && test \"$(cat $d/f)\" = hi && rm -r $d || exit 2; \
                      python3 -c 'import multiprocessing as mp\nif __name__ == \"__main__\":\n    with mp.Pool(2) as p: assert p.map(abs, [-1, -2]) == [1, 2]\n    a, b = mp.Pipe(); a.send(3); assert b.recv() == 3' || exit 3; \
                      python3 -c 'import socket; s = socket.create_server((\"127.0.0.1\", 0)); c = socket.create_connection(s.getsockname()); c.close()' || exit 4";
        let o = run_attack(user, &m, script, |_| {});
        assert_eq!(o.code, 0, "{user:?}: {} {}", o.stderr, o.details());
        assert_eq!(o.status(), "passed");
    }
}

/// The kernel lacks (or forbids) a mechanism of the box: the run is refused in its preflight
/// with exit 3 naming what is missing, and nothing is created.
#[test]
fn missing_mechanisms_are_refused_with_exit_3_naming_them() {
    let Some(fixture) = qual_test_fixtures::fixture_binary("qual-fixture") else {
        let why = "qual-fixture is not built (cargo build -p qual-test-fixtures --bins)";
        qual_test_fixtures::harness::skip(why);
        return;
    };
    let fixture = fixture.to_string_lossy().into_owned();
    let mut cases: Vec<(User, Vec<String>, &str)> = Vec::new();
    let deny = |names: &str| {
        vec![
            fixture.clone(),
            "deny-syscalls".into(),
            names.into(),
            "--".into(),
        ]
    };
    cases.push((User::Invoker, deny("unshare"), "namespaces"));
    cases.push((User::Invoker, deny("seccomp"), "seccomp filters"));
    cases.push((User::Invoker, deny("mount_setattr"), "mount_setattr"));
    // The read-only host: the detached copies of the writable places.
    cases.push((User::Invoker, deny("open_tree"), "open_tree"));
    if nobody_available() {
        cases.push((
            User::Nobody,
            deny("unshare"),
            "unprivileged user namespaces",
        ));
        cases.push((User::Nobody, deny("seccomp"), "seccomp filters"));
    }
    if is_root() {
        // A read-only cgroup file system (a private mount namespace in which the cgroup v2
        // mount is remounted read-only).
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let v2 = info
            .lines()
            .find_map(|l| {
                let (pre, post) = l.split_once(" - ")?;
                (post.split_whitespace().next() == Some("cgroup2"))
                    .then(|| pre.split_whitespace().nth(4).map(str::to_string))?
            })
            .expect("a cgroup v2 mount");
        let script = format!("mount -o remount,bind,ro {v2} && exec \"$0\" \"$@\"");
        cases.push((
            User::Invoker,
            vec![
                "unshare".into(),
                "-m".into(),
                "--propagation".into(),
                "private".into(),
                "sh".into(),
                "-c".into(),
                script,
            ],
            "a writable cgroup v2 sub-tree",
        ));
    }
    for (user, wrapper, what) in cases {
        let m = marker();
        let o = run_wrapped(user, &m, "exit 0", &wrapper, |_| {});
        assert_eq!(o.code, 3, "{user:?} {wrapper:?}: {}", o.stderr);
        assert!(
            o.stderr.contains("missing") && o.stderr.contains(what),
            "{user:?} {wrapper:?}: {}",
            o.stderr
        );
        assert!(
            !o.root.join(".qualification").exists(),
            "{user:?} {wrapper:?}: a refused run created .qualification"
        );
    }
}

/// A case that builds with cargo into `target/` (and runs the result) works in the box. Only
/// as the invoking user: the toolchain of this machine may live in a home that uid 65534
/// cannot read.
#[test]
fn a_cargo_build_into_target_works_in_the_box() {
    if Command::new("cargo").arg("--version").output().is_err() {
        qual_test_fixtures::harness::skip("no cargo on PATH");
        return;
    }
    let m = marker();
    let o = run_attack(
        User::Invoker,
        &m,
        "cargo build --offline --quiet && test \"$(./target/debug/boxed)\" = built",
        |_| {},
    );
    assert_eq!(o.code, 0, "{} {}", o.stderr, o.details());
    assert!(o.root.join("target/debug/boxed").exists());
}

/// A place on the host outside the repository and outside `/tmp` (which is private to a
/// case): below this package's target directory, writable by everyone, with one existing
/// file writable by everyone.
struct HostPlace {
    dir: tempfile::TempDir,
    file: PathBuf,
}

fn host_place() -> HostPlace {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let file = dir.path().join("host-file");
    std::fs::write(&file, "host\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    HostPlace { dir, file }
}

/// The host is read-only to a case: kernel settings (`/proc/sys`, probed for writing by
/// opening without writing, never by writing a value), `/etc`, and files and directories
/// outside the worktree, even ones every user may write.
#[test]
fn the_host_outside_the_worktree_is_read_only() {
    let core_pattern = std::fs::read("/proc/sys/kernel/core_pattern").unwrap();
    for user in users() {
        let m = marker();
        let h = host_place();
        let planted = h.dir.path().join("planted");
        let etc = PathBuf::from(format!("/etc/{m}"));
        // Each attempt that works makes the case pass (exit 0), failing the test.
        let script = format!(
            "if python3 -c 'import os; os.close(os.open(\"/proc/sys/kernel/core_pattern\", os.O_WRONLY))'; then echo core_pattern-openable; exit 0; fi; \
             echo pwned > {file} && exit 0; \
             touch {planted} && exit 0; \
             touch {etc} && exit 0; \
             touch /usr/bin/{m} && exit 0; \
             exit 5",
            file = h.file.display(),
            planted = planted.display(),
            etc = etc.display(),
        );
        let o = run_attack(user, &m, &script, |_| {});
        let leftover = etc.exists() || Path::new(&format!("/usr/bin/{m}")).exists();
        let _ = std::fs::remove_file(&etc);
        let _ = std::fs::remove_file(format!("/usr/bin/{m}"));
        assert!(
            !leftover,
            "{user:?}: the case created a file in /etc or /usr/bin"
        );
        assert_case_failed(&o, user, &["Read-only file system"]);
        assert_eq!(std::fs::read(&h.file).unwrap(), b"host\n", "{user:?}");
        assert!(
            !planted.exists(),
            "{user:?}: the case wrote outside the worktree"
        );
        assert_eq!(
            std::fs::read("/proc/sys/kernel/core_pattern").unwrap(),
            core_pattern,
            "{user:?}: kernel.core_pattern changed"
        );
        // The box evidence says so.
        let cfg = tree(&o.root.join(".qualification/runs"))
            .into_iter()
            .find(|(k, _)| k.ends_with("run-config.json"))
            .map(|(_, v)| String::from_utf8(v).unwrap())
            .unwrap();
        assert!(cfg.contains("\"host_files\": \"read_only\""), "{cfg}");
        assert!(cfg.contains("\"/tmp\""), "{cfg}");
    }
}

/// A `git` the case plants in a `PATH` directory it can write (here one inside the worktree,
/// ahead of the system's) never runs: the runner resolved git before the cases.
#[test]
fn a_git_planted_on_the_runner_path_never_runs() {
    for user in users() {
        let m = marker();
        let h = host_place();
        let flag = h.dir.path().join("planted-git-ran");
        let script = format!(
            "printf '#!/bin/sh\\ntouch {flag}\\nKQ_TEST_MARKER={m} setsid sleep 300 > /dev/null 2>&1 &\\nexec /usr/bin/git \"$@\"\\n' > bin/git && chmod 755 bin/git && exit 0",
            flag = flag.display()
        );
        let layout = Layout {
            dirs: vec!["bin"],
            ..Layout::default()
        };
        let mut bin_dir = PathBuf::new();
        let o = run_general(user, &m, &script, &[], &layout, |cmd| {
            let dir = cmd.get_current_dir().unwrap().join("bin");
            bin_dir = dir.clone();
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", dir.display()));
        });
        assert!(bin_dir.join("git").exists(), "{user:?}: the plant failed");
        assert!(!flag.exists(), "{user:?}: the planted git ran");
        // A later kiln-qual process with the same PATH resolves afresh: a directory inside a
        // git worktree is refused, so the planted git does not run then either.
        let mut check = if user == User::Nobody {
            let mut c = Command::new("/usr/bin/setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                BIN,
            ]);
            c
        } else {
            Command::new(BIN)
        };
        let path = std::env::var("PATH").unwrap_or_default();
        let _ = check
            .args([
                "receipt",
                "check",
                "--require-current-source",
                ".qualification/receipts/attack.json",
            ])
            .env("PATH", format!("{}:{path}", bin_dir.display()))
            .current_dir(&o.root)
            .output()
            .unwrap();
        assert!(
            !flag.exists(),
            "{user:?}: the planted git ran in a later check"
        );
        // The planted file makes the worktree dirty: the run fails, judged by the real git.
        assert_eq!(o.code, 1, "{user:?}: {}", o.stderr);
        assert!(o.details().contains("dirty"), "{user:?}: {}", o.details());
    }
}

/// A working directory inside what judges the case is refused: by `workload check` (the run
/// is refused before anything exists) and, through a symlink the contract cannot see, by the
/// runner; `.git` stays unchanged either way.
#[test]
fn working_directories_inside_protected_paths_are_refused() {
    for user in users() {
        let m = marker();
        let layout = Layout {
            working_directory: Some(".git"),
            ..Layout::default()
        };
        let o = run_general(user, &m, "echo pwned >> config", &[], &layout, |_| {});
        assert_eq!(o.code, 3, "{user:?}: {}", o.stderr);
        assert!(
            o.stderr.contains(
                "cases[0].working_directory must not be at or below .git, which is read-only to cases"
            ),
            "{user:?}: {}",
            o.stderr
        );
        // An ignored symlink (the contract sees only the name; the worktree stays clean).
        let layout = Layout {
            working_directory: Some("target"),
            symlinks: vec![("target", ".git")],
            ..Layout::default()
        };
        let o = run_general(user, &m, "echo pwned >> config", &[], &layout, |_| {});
        assert_case_failed(&o, user, &["is at or below"]);
    }
}

/// In a linked worktree the common git directory (the main repository's `.git`, named by
/// `.git/worktrees/<name>/commondir`) is as read-only as the worktree's own git directory:
/// no `core.fsmonitor` can be planted for the operator's next `git status`.
#[test]
fn the_common_git_directory_of_a_linked_worktree_is_read_only() {
    for user in users() {
        let m = marker();
        let layout = Layout {
            linked: true,
            ..Layout::default()
        };
        let script =
            "gd=$(sed -n 's/^gitdir: //p' .git) && cd \"$gd\" && cd \"$(cat commondir)\" && \
                      printf '[core]\\n\\tfsmonitor = /bin/false\\n' >> config && exit 0; exit 5";
        // run_general compares the main repository's .git before and after.
        let o = run_general(user, &m, script, &[], &layout, |_| {});
        assert_case_failed(&o, user, &["Read-only file system"]);
    }
}

/// The operator's terminal is out of reach: the box's `/dev` has no `pts`, `tty` or
/// `console`, so escape sequences written "to the terminal" go nowhere.
#[test]
fn the_operator_terminal_is_unreachable() {
    for user in users() {
        let m = marker();
        // A real terminal of this test, writable by everyone.
        // SAFETY: posix_openpt family on a descriptor we own.
        let (master, slave) = unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_NONBLOCK);
            assert!(fd >= 0);
            assert_eq!(libc::grantpt(fd), 0);
            assert_eq!(libc::unlockpt(fd), 0);
            let name = std::ffi::CStr::from_ptr(libc::ptsname(fd))
                .to_string_lossy()
                .into_owned();
            (fd, name)
        };
        std::fs::set_permissions(&slave, std::fs::Permissions::from_mode(0o666)).unwrap();
        let script = format!(
            "for t in {slave} /dev/tty /dev/console /dev/tty1 /dev/ptmx; do printf '\\033]0;pwned\\007' > $t && exit 0; done; exit 5"
        );
        let o = run_attack(user, &m, &script, |_| {});
        // Nothing to open: no such node in the box's read-only /dev (dash names the missing
        // /dev/pts "Directory nonexistent", a missing /dev/tty is not creatable).
        assert_case_failed(
            &o,
            user,
            &["Directory nonexistent", "No such file or directory"],
        );
        let mut buf = [0u8; 256];
        // SAFETY: non-blocking read into a local buffer.
        let n = unsafe { libc::read(master, buf.as_mut_ptr().cast(), buf.len()) };
        // SAFETY: closing our descriptor.
        unsafe { libc::close(master) };
        assert!(
            n <= 0,
            "{user:?}: the case wrote to the terminal: {:?}",
            &buf[..n as usize]
        );
    }
}

/// `kiln-qual cargo` runs its program in a case's box: the host read-only but the worktree,
/// and no network but loopback.
#[test]
fn kiln_qual_cargo_runs_in_the_box() {
    let l = listeners();
    let h = host_place();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    let script = format!(
        "echo built > built.txt || exit 6; echo pwned > {file} && exit 0; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' && exit 0; exit 5",
        file = h.file.display(),
        port = l.tcp_port
    );
    let out = Command::new(BIN)
        .args(["cargo", "--cargo", "/bin/sh", "--", "-c", &script])
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Read-only file system"), "{err}");
    assert_eq!(
        std::fs::read(repo.path().join("built.txt")).unwrap(),
        b"built\n"
    );
    assert_eq!(std::fs::read(&h.file).unwrap(), b"host\n");
    assert_eq!(l.accepted.load(Ordering::SeqCst), 0);
}

/// A `latency run` fixture command runs in a case's box: it cannot write outside the worktree
/// nor reach a host listener, and the worktree itself stays writable to it.
#[test]
fn latency_fixture_commands_run_in_the_box() {
    let l = listeners();
    let h = host_place();
    let dir = common::latency_repo("bench-results/out.json");
    let root = dir.path();
    let script = format!(
        "echo built > built.log || exit 6\n\
         echo pwned > {file} && echo 'KILN_LATENCY_METRIC latency_ms 1 ms'\n\
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' && echo 'KILN_LATENCY_METRIC latency_ms 2 ms'\n\
         exit 5\n",
        file = h.file.display(),
        port = l.tcp_port
    );
    std::fs::write(root.join("attack.sh"), script).unwrap();
    let manifest_path = root.join(common::LATENCY_MANIFEST);
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    manifest["fixtures"][0]["command"] = serde_json::json!("sh attack.sh");
    std::fs::write(
        &manifest_path,
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "attack"]);
    let out = Command::new(BIN)
        .args([
            "latency",
            "run",
            common::LATENCY_MANIFEST,
            "echo_fixture",
            "--log-dir",
            "raw.log.d",
            "--timeout",
            "60",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    assert_eq!(std::fs::read(root.join("built.log")).unwrap(), b"built\n");
    assert_eq!(std::fs::read(&h.file).unwrap(), b"host\n");
    assert_eq!(l.accepted.load(Ordering::SeqCst), 0);
}

/// A server `kiln-qual serve` owns runs in a case's box: it cannot write the host outside the
/// worktree, nor the result's directory it was started in, and its lifecycle record says so.
#[test]
fn serve_servers_run_in_the_box() {
    let h = host_place();
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let attack = format!(
        "echo pwned > {file}; echo pwned > pwned.txt; exec \"$0\" mock-server --port {port} --ttft-ms 1 --itl-ms 0.5",
        file = h.file.display()
    );
    let recipe = serde_json::json!({
        "schema": "kiln-qual.serve-launch.v1",
        "id": "adv-serve",
        "command": ["/bin/sh", "-c", attack, BIN],
        "working_directory": ".",
        "port": port,
        "log_directory": "logs",
        "readiness_poll_interval_ms": 10,
        "startup_timeout_seconds": 10,
        "shutdown_timeout_seconds": 5,
        "acceptable_exit_codes": [0],
    });
    std::fs::write(dir.path().join("launch.json"), recipe.to_string()).unwrap();
    let mut corpus = String::new();
    for i in 0..4 {
        corpus.push_str(&format!(
            "{{\"id\":\"c{i}\",\"endpoint\":\"chat\",\"prompt\":\"hello {i}\",\"max_tokens\":4}}\n"
        ));
    }
    std::fs::write(dir.path().join("corpus.jsonl"), corpus).unwrap();
    let out = Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "serve",
            "--launch",
            "launch.json",
            "--corpus",
            "corpus.jsonl",
            "--seed",
            "1",
            // Not a timing test: any error bound is admitted.
            "--tolerance-ms",
            "100000",
            "--tolerance-fraction",
            "1",
            "--result",
            "r.json",
        ])
        .output()
        .unwrap();
    assert_eq!(std::fs::read(&h.file).unwrap(), b"host\n", "{out:?}");
    assert!(
        !dir.path().join("pwned.txt").exists(),
        "the server wrote into the result's directory"
    );
    let log = tree(&dir.path().join("logs"))
        .into_iter()
        .filter(|(k, _)| k.ends_with(".stderr.log"))
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
        .collect::<String>();
    assert!(log.contains("Read-only file system"), "{log} {out:?}");
    let ev: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.serve-evidence.json")).unwrap())
            .unwrap();
    assert_eq!(
        ev["lifecycle"]["box"]["host_files"], "read_only",
        "{}",
        ev["lifecycle"]
    );
}

/// Runs kiln-qual under `timeout --signal=KILL`: a run that hangs ends with 137 and fails the
/// test instead of blocking it.
fn deadline_wrapper(seconds: u64) -> Vec<String> {
    vec![
        "/usr/bin/timeout".into(),
        "--signal=KILL".into(),
        seconds.to_string(),
    ]
}

/// Runs `args` in `root` as the repository's owner (`user`), killed and failing the test if
/// it has not ended within `seconds`; returns stdout and stderr together.
fn kq_within(user: User, root: &Path, args: &[&str], seconds: u64) -> (Option<i32>, String) {
    let mut cmd = Command::new("/usr/bin/setpriv");
    if user == User::Nobody {
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    }
    cmd.arg("--").arg(BIN).args(args).current_dir(root);
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(seconds) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{user:?}: kiln-qual {args:?} did not end within {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// A case replaces the tracked `src/main.rs` with something hashing must not read; the run
/// ends in time with a failed receipt naming the path and `reason`, and `source-tree` and
/// `receipt check --require-current-source` refuse it the same way, in time.
fn a_replaced_tracked_file_is_refused_by_path(script: &str, reason: &str) {
    let why = format!("cannot read tracked source input src/main.rs: {reason}");
    for user in users() {
        let m = marker();
        let o = run_wrapped(user, &m, script, &deadline_wrapper(120), |_| {});
        assert_ne!(o.code, 137, "{user:?}: the run hung");
        assert_case_failed(&o, user, &[&why]);
        for args in [
            &["source-tree"][..],
            &[
                "receipt",
                "check",
                "--require-current-source",
                ".qualification/receipts/attack.json",
            ],
        ] {
            let (code, text) = kq_within(user, &o.root, args, 60);
            assert_eq!(code, Some(1), "{user:?} {args:?}: {text}");
            assert!(text.contains(&why), "{user:?} {args:?}: {text}");
        }
    }
}

#[test]
fn a_tracked_file_replaced_by_a_fifo_is_refused_without_hanging() {
    a_replaced_tracked_file_is_refused_by_path(
        "rm src/main.rs && mkfifo src/main.rs",
        "not a regular file (FIFO)",
    );
}

#[test]
fn a_tracked_file_replaced_by_a_symlink_to_dev_zero_is_refused_without_hanging() {
    a_replaced_tracked_file_is_refused_by_path(
        "rm src/main.rs && ln -s /dev/zero src/main.rs",
        "not a regular file (symlink)",
    );
}

#[test]
fn a_tracked_file_grown_to_a_huge_sparse_file_is_refused_without_reading_it() {
    a_replaced_tracked_file_is_refused_by_path(
        "truncate -s 2T src/main.rs",
        "2199023255552 bytes, more than the 1073741824-byte limit for one tracked file",
    );
}

#[test]
fn a_case_cannot_plant_or_replace_the_runners_output_files() {
    for user in users() {
        let m = marker();
        // The case's directory is `scratch/` (where its result path points); it plants the
        // runner's names there, and tries the case directory above it.
        let script = "d=$(dirname \"$KILN_QUALIFICATION_CASE_RESULT\"); \
                      echo planted > \"$d/stdout.log\"; echo planted > \"$d/case-result.json\"; \
                      ln -s /etc/passwd \"$d/stderr.log\"; \
                      echo planted > \"$d/../stdout.log\"; ln -s /etc/passwd \"$d/../stderr.log\"; \
                      echo real-output; exit 3";
        let o = run_wrapped(user, &m, script, &deadline_wrapper(120), |_| {});
        assert_case_failed(&o, user, &["exit code 3 not in [0]"]);
        let runs: Vec<PathBuf> = std::fs::read_dir(o.root.join(".qualification/runs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(runs.len(), 1);
        let case = runs[0].join("cases/001-attack-r001");
        assert_eq!(
            std::fs::read_to_string(case.join("stdout.log")).unwrap(),
            "real-output\n",
            "{user:?}"
        );
        let stderr = std::fs::read_to_string(case.join("stderr.log")).unwrap();
        assert!(
            stderr.contains("Read-only file system"),
            "{user:?}: {stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(case.join("scratch/stdout.log")).unwrap(),
            "planted\n"
        );
        let artifacts = o.receipt.as_ref().unwrap()["artifacts"]
            .as_array()
            .unwrap()
            .clone();
        assert!(
            artifacts
                .iter()
                .all(|a| !a["path"].as_str().unwrap().contains("/scratch/")),
            "{user:?}: {artifacts:?}"
        );
    }
}
