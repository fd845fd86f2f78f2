//! Bad inputs as an attacker would pass them, through the real binary: every reader refuses
//! non-regular files without blocking, numbers and paths are vetted before any work, a closed
//! stdout never panics, untrusted names never reach the terminal raw, latency manifests cannot
//! point outside the repository, a zip bomb is refused without extracting, and a huge raw log
//! is parsed in bounded memory (measured).

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]
// Tests: libc calls (signals, ids, forks) set up and observe the processes under test.
#![allow(unsafe_code)]

mod common;

use assert_cmd::Command;
use common::repo_root;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

fn kq() -> Command {
    let mut c = Command::cargo_bin("kiln-qual").unwrap();
    c.timeout(Duration::from_secs(60));
    c
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    /// Asserts the exit code and that stderr says `needle`.
    fn refused(&self, code: i32, needle: &str, ctx: &dyn std::fmt::Debug) {
        assert_eq!(self.code, Some(code), "{ctx:?}: {}", self.stderr);
        assert!(self.stderr.contains(needle), "{ctx:?}: {}", self.stderr);
    }
}

fn run_in<I, S>(dir: &Path, args: I) -> Out
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = kq().current_dir(dir).args(args).output().unwrap();
    let o = Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    o
}

fn mkfifo(p: &Path) {
    assert!(std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap()
        .success());
}

use common::{latency_repo, LATENCY_MANIFEST as MANIFEST};

#[test]
fn non_regular_files_are_refused_before_reading() {
    let repo = latency_repo("bench-results/backend-latency/echo.json");
    let root = repo.path();
    let fifo = root.join("fifo.json");
    mkfifo(&fifo);
    std::fs::create_dir(root.join("dir.json")).unwrap();
    let corpus = root.join("corpus.jsonl");
    std::fs::write(
        &corpus,
        "{\"id\":\"a\",\"endpoint\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":4}\n",
    )
    .unwrap();
    for bad in ["fifo.json", "dir.json", "/dev/zero"] {
        let (kind, path) = match bad {
            "fifo.json" => ("(FIFO)", fifo.display().to_string()),
            "dir.json" => ("(directory)", root.join(bad).display().to_string()),
            _ => ("(character device)", bad.to_owned()),
        };
        let commands: Vec<Vec<&str>> = vec![
            vec!["workload", "check", &path],
            vec!["workload", "show", &path],
            vec!["receipt", "check", &path],
            vec!["receipt", "show", &path],
            vec!["compare", &path, &path],
            vec!["latency", "check", &path],
            vec!["latency", "write", MANIFEST, "echo_fixture", &path],
            vec!["latency", "import", &path],
        ];
        for args in commands {
            if bad == "dir.json" && args[..2] == ["latency", "import"] {
                continue; // a directory is a valid (extracted) bundle
            }
            if bad == "/dev/zero" && args[..2] == ["latency", "check"] {
                continue; // an absolute manifest names its repository: /dev has none
            }
            let o = run_in(root, &args);
            assert_eq!(o.code, Some(1), "{args:?}: {}", o.stderr);
            let lines: Vec<&str> = o
                .stderr
                .lines()
                .filter(|l| l.contains("not a regular file"))
                .collect();
            assert_eq!(lines.len(), 1, "{args:?}: {}", o.stderr);
            assert!(lines[0].contains(kind), "{args:?}: {}", o.stderr);
        }
        let corpus = corpus.display().to_string();
        for args in [
            vec!["serve", "--launch", &path, "--corpus", &corpus],
            vec!["serve", "--launch", &corpus, "--corpus", &path],
        ] {
            let result = root.join("r.json").display().to_string();
            let mut args = args.clone();
            args.extend(["--seed", "1", "--result", &result]);
            let o = run_in(root, &args);
            o.refused(1, "not a regular file", &args);
        }
    }
}

/// `run` up to its first optional flag.
const RUN: [&str; 6] = ["run", "w.json", "--variant", "v", "--host-id", "h"];

#[test]
fn numeric_flags_are_range_checked_before_any_work() {
    let d = tempfile::tempdir().unwrap();
    let serve = [
        "serve", "--launch", "l.json", "--corpus", "c.jsonl", "--seed", "1",
    ];
    let cases: Vec<Vec<&str>> = vec![
        vec!["--request-timeout-seconds", "1e300"],
        vec!["--request-timeout-seconds", "nan"],
        vec!["--rate", "1e-300"],
        vec!["--rate", "inf"],
        vec!["--pin-cpu", "99999"],
        vec!["--requests", "4000000000"],
        vec!["--concurrency", "0"],
        vec!["--max-in-flight", "0"],
        vec!["--warmup", "18446744073709551616"],
        vec!["--slo-ttft-ms=-1"],
    ];
    for extra in cases {
        let mut args: Vec<&str> = serve.to_vec();
        args.extend(&extra);
        let o = run_in(d.path(), &args);
        assert_eq!(o.code, Some(2), "{extra:?}: {}", o.stderr);
        assert!(o.stderr.starts_with("error: invalid value"), "{}", o.stderr);
        assert_eq!(
            o.stderr.lines().filter(|l| l.starts_with("error")).count(),
            1
        );
    }
    for args in [
        vec!["mock-server", "--port", "0", "--itl-ms", "1e300"],
        vec!["mock-server", "--port", "0", "--ttft-ms=-5"],
        vec!["mock-server", "--port", "70000"],
        [&RUN[..], &["--term-grace-seconds", "1e9"]].concat(),
        vec!["latency", "run", "m.json", "f", "--timeout", "99999999999"],
        vec!["latency", "run", "m.json", "f", "--term-grace", "99999"],
        vec!["cargo", "--timeout-seconds", "0", "--", "build"],
    ] {
        let o = run_in(d.path(), &args);
        assert_eq!(o.code, Some(2), "{args:?}: {}", o.stderr);
        assert!(o.stderr.starts_with("error: invalid value"), "{}", o.stderr);
    }
}

#[test]
fn control_characters_in_path_arguments_are_usage_errors() {
    let d = tempfile::tempdir().unwrap();
    for args in [
        [&RUN[..], &["--output", "a\nOK b.json"]].concat(),
        vec!["workload", "check", "a\u{1b}[2Kb.json"],
        vec!["receipt", "show", "r\r.json"],
        vec!["latency", "run", "m.json", "f", "--log-dir", "raw\nx"],
        vec![
            "serve",
            "--launch",
            "l\u{9b}.json",
            "--corpus",
            "c",
            "--seed",
            "1",
        ],
    ] {
        let o = run_in(d.path(), &args);
        o.refused(2, "must not contain control characters", &args);
        assert!(
            !o.stderr.chars().any(|c| c != '\n' && c.is_control()),
            "{:?}",
            o.stderr
        );
    }
}

#[test]
fn non_utf8_paths_are_read_exactly_and_shown_escaped() {
    let d = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"w\xff\xfe.json");
    std::fs::copy(
        repo_root().join("qualification/workloads/cpu-smoke-v1.json"),
        d.path().join(name),
    )
    .unwrap();
    // A lossy conversion would name `w\u{fffd}\u{fffd}.json`, a different (missing) file.
    let o = run_in(
        d.path(),
        [OsStr::new("workload"), OsStr::new("check"), name],
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.starts_with("OK w\\xff\\xfe.json sha256:"),
        "{}",
        o.stdout
    );
}

#[test]
fn untrusted_workload_key_names_are_shown_escaped() {
    let d = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(repo_root().join("qualification/workloads/cpu-smoke-v1.json"))
            .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["\nOK fake.json sha256:0\r\u{1b}[2K"] = serde_json::json!(1);
    std::fs::write(d.path().join("w.json"), v.to_string()).unwrap();
    let o = run_in(d.path(), ["workload", "check", "w.json"]);
    assert_eq!(o.code, Some(1));
    assert!(o.stdout.is_empty(), "{}", o.stdout);
    assert!(
        !o.stderr.lines().any(|l| l.starts_with("OK ")),
        "{}",
        o.stderr
    );
    assert!(
        !o.stderr.chars().any(|c| c != '\n' && c.is_control()),
        "{:?}",
        o.stderr
    );
    assert!(o.stderr.contains("\\x0aOK fake.json"), "{}", o.stderr);
}

/// Every subcommand with stdout a pipe whose reader is gone: no panic, a conventional status.
#[test]
fn a_closed_stdout_never_panics() {
    let d = tempfile::tempdir().unwrap();
    let root = repo_root();
    let workload = root.join("qualification/workloads/cpu-smoke-v1.json");
    let workload = workload.to_str().unwrap();
    let receipt = d.path().join("receipt.json");
    std::fs::write(&receipt, "{}").unwrap();
    let receipt = receipt.to_str().unwrap();
    let fleet_plan = root.join("qualification/fleets/cpu-smoke.json");
    let fleet_plan = fleet_plan.to_str().unwrap();
    let subcommands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["--version"],
        vec!["workload", "check", workload, workload, workload],
        vec!["workload", "check", "--json", workload],
        vec!["workload", "show", workload],
        vec!["workload", "show", "--json", workload],
        vec!["receipt", "check", receipt],
        vec!["receipt", "check", "--json", receipt],
        vec!["receipt", "show", receipt],
        vec!["compare", receipt, receipt, "--json"],
        vec!["source-tree", "--root", root.to_str().unwrap()],
        vec!["source-tree", "--json", "--root", root.to_str().unwrap()],
        vec!["latency", "plan", "--shell"],
        vec!["latency", "check", "--json"],
        vec!["mock-server", "--port", "0"],
        vec!["cargo", "--", "--version"],
        vec!["doctor"],
        vec!["doctor", "--json"],
        vec!["triage", receipt],
        vec!["triage", "--json", receipt],
        vec!["fleet", "plan", fleet_plan],
        vec!["fleet", "plan", "--json", fleet_plan],
        vec!["fleet", "workflow", fleet_plan],
    ];
    let mut all = subcommands;
    for sub in [
        "workload",
        "run",
        "source-tree",
        "model",
        "cargo",
        "receipt",
        "compare",
        "serve",
        "mock-server",
        "latency",
        "fleet",
    ] {
        all.push(vec![sub, "--help"]);
    }
    for args in all {
        let mut fds = [0i32; 2];
        // SAFETY: pipe(2) fills the array with two new descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors are fresh and owned here; the read end is closed at once.
        let (reader, writer) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        drop(reader);
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("kiln-qual"))
            .args(&args)
            .current_dir(&root)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 1 | 2 | 141)),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
}

#[test]
fn latency_manifest_paths_outside_the_repository_are_refused() {
    for (result, why) in [
        ("../escaped.json", "must not contain '..'"),
        (
            "/tmp/kiln-qual-escaped.json",
            "must be repo-relative, not absolute",
        ),
        ("out/escaped.json", "resolves outside the repository"),
    ] {
        let repo = latency_repo(result);
        let root = repo.path();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        let o = run_in(root, ["latency", "check", MANIFEST]);
        o.refused(1, why, &());
        let o = run_in(root, ["latency", "run", MANIFEST, "echo_fixture"]);
        o.refused(1, why, &());
        assert!(!root.parent().unwrap().join("escaped.json").exists());
        assert!(!Path::new("/tmp/kiln-qual-escaped.json").exists());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}

/// A zip whose members declare more than 4 GiB: refused from the central directory, nothing
/// extracted, and an extraction directory left by a killed run is swept.
#[test]
fn a_zip_bomb_is_refused_without_extracting() {
    let repo = latency_repo("bench-results/backend-latency/echo.json");
    let root = repo.path();
    std::fs::create_dir_all(root.join("target")).unwrap();
    let stale = root.join("target/backend-latency-artifact-999999999-1");
    std::fs::create_dir(&stale).unwrap();
    let mut bytes = Vec::new();
    {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut bytes));
        let opts = zip::write::SimpleFileOptions::default();
        for name in ["a.log", "b.log"] {
            w.start_file(name, opts).unwrap();
            std::io::Write::write_all(&mut w, b"small").unwrap();
        }
        w.finish().unwrap();
    }
    // Patch each central-directory record's uncompressed size to 3 GiB.
    let mut i = 0;
    while i + 46 <= bytes.len() {
        if bytes[i..i + 4] == *b"PK\x01\x02" {
            bytes[i + 24..i + 28].copy_from_slice(&(3u32 << 30).to_le_bytes());
            i += 46;
        } else {
            i += 1;
        }
    }
    std::fs::write(root.join("bomb.zip"), &bytes).unwrap();
    let o = run_in(root, ["latency", "import", "bomb.zip"]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("expands to more than 4294967296 bytes; refused without extracting"),
        "{}",
        o.stderr
    );
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    let left: Vec<_> = std::fs::read_dir(root.join("target")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `latency write` of a 1 GiB raw log: hashed and parsed as a stream, peak RSS of the child
/// measured with wait4(2).
#[test]
fn a_one_gib_raw_log_is_parsed_in_bounded_memory() {
    let repo = latency_repo("bench-results/backend-latency/echo.json");
    let root = repo.path();
    std::fs::create_dir_all(root.join("bench-results/backend-latency/raw")).unwrap();
    let log = root.join("bench-results/backend-latency/raw/big.log");
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::File::create(&log).unwrap();
        // Sparse: 1 GiB of NUL bytes without a line break, then the metric line.
        f.seek(std::io::SeekFrom::Start(1 << 30)).unwrap();
        f.write_all(b"\nKILN_LATENCY_METRIC latency_ms 9.5 ms\n")
            .unwrap();
    }
    // Reaped below with wait4(2), which also returns the child's own peak RSS.
    #[allow(clippy::zombie_processes)]
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("kiln-qual"))
        .args(["latency", "write", MANIFEST, "echo_fixture"])
        .arg(&log)
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data filled by wait4 for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: waits for the child spawned above.
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    let peak_kib = usage.ru_maxrss;
    assert!(peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB");
    let artifact =
        std::fs::read_to_string(root.join("bench-results/backend-latency/echo.json")).unwrap();
    assert!(artifact.contains("latency_ms"), "{artifact}");
}

#[test]
fn a_committed_bench_results_symlink_never_leads_latency_writes_outside() {
    let repo = latency_repo("bench-results/backend-latency/echo.json");
    let root = repo.path();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("bench-results")).unwrap();
    common::git(root, &["add", "bench-results"]);
    common::git(root, &["commit", "-q", "-m", "bench-results elsewhere"]);
    let o = run_in(root, ["latency", "run", MANIFEST, "echo_fixture"]);
    o.refused(1, "bench-results", &());
    assert!(
        o.stderr.contains("bench-results is a symlink")
            || o.stderr.contains("resolves outside the repository"),
        "{}",
        o.stderr
    );
    // An explicit log directory and output through the link are refused by name too.
    std::fs::create_dir(root.join("logs")).unwrap();
    std::fs::write(root.join(".gitignore"), "*.log\ntarget/\nlogs/\n").unwrap();
    common::git(root, &["commit", "-qam", "ignore logs"]);
    let o = run_in(
        root,
        [
            "latency",
            "run",
            MANIFEST,
            "echo_fixture",
            "--log-dir",
            "logs",
            "--output",
            "bench-results/x.json",
        ],
    );
    o.refused(1, "bench-results/x.json: bench-results is a symlink", &());
    let o = run_in(
        root,
        [
            "latency",
            "run",
            MANIFEST,
            "echo_fixture",
            "--log-dir",
            "bench-results/raw",
        ],
    );
    o.refused(1, "bench-results is a symlink", &());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn serve_logs_stay_in_a_private_directory_inside_the_repository() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let outside = tempfile::tempdir().unwrap();
    common::git(root, &["init", "-q"]);
    std::fs::write(
        root.join("corpus.jsonl"),
        "{\"id\":\"a\",\"endpoint\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":4}\n",
    )
    .unwrap();
    let recipe = |log_directory: &str| {
        serde_json::json!({
            "schema": "kiln-qual.serve-launch.v1",
            "id": "log-dir-check",
            "command": ["/bin/sleep", "30"],
            "working_directory": ".",
            "port": 1,
            "log_directory": log_directory,
            "readiness_poll_interval_ms": 10,
            "startup_timeout_seconds": 1,
            "shutdown_timeout_seconds": 1,
            "acceptable_exit_codes": [0],
        })
        .to_string()
    };
    std::os::unix::fs::symlink(outside.path(), root.join("logs")).unwrap();
    for (n, (dir, why)) in [
        ("logs", "logs is a symlink"),
        ("../escaped-logs", "is outside"),
    ]
    .into_iter()
    .enumerate()
    {
        std::fs::write(root.join("launch.json"), recipe(dir)).unwrap();
        let result = root.join(format!("case{n}/command-result.json"));
        std::fs::create_dir_all(result.parent().unwrap()).unwrap();
        let o = run_in(
            root,
            [
                "serve",
                "--launch",
                "launch.json",
                "--corpus",
                "corpus.jsonl",
                "--seed",
                "7",
                "--result",
                result.to_str().unwrap(),
            ],
        );
        assert_eq!(o.code, Some(1), "{}", o.stderr);
        let text = std::fs::read_to_string(&result).unwrap();
        assert!(
            text.contains("create the log directory: refusing to write") && text.contains(why),
            "{text}"
        );
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(!root.parent().unwrap().join("escaped-logs").exists());
    // A real directory: each run gets its own fresh directory, private to its owner.
    std::fs::remove_file(root.join("logs")).unwrap();
    std::fs::write(root.join("launch.json"), recipe("logs")).unwrap();
    let result = root.join("case-ok/command-result.json");
    std::fs::create_dir_all(result.parent().unwrap()).unwrap();
    let o = run_in(
        root,
        [
            "serve",
            "--launch",
            "launch.json",
            "--corpus",
            "corpus.jsonl",
            "--seed",
            "7",
            "--result",
            result.to_str().unwrap(),
        ],
    );
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    let runs: Vec<_> = std::fs::read_dir(root.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&runs[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(std::fs::read_dir(&runs[0]).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".stdout.log")));
}
