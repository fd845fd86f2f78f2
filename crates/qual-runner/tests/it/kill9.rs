//! `kill -9` of the runner at pseudo-random points never leaves a partial receipt file: a
//! receipt name either does not exist or holds a complete, valid receipt — and within one
//! second of the kill nothing of the running case is alive (its box's init sees the runner's
//! death pipe close and takes the PID namespace with it).

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;

const REPO_VAR: &str = "QUAL_RUNNER_KILL9_REPO";
const ID_VAR: &str = "QUAL_RUNNER_KILL9_ID";
const WORKLOAD_VAR: &str = "QUAL_RUNNER_KILL9_WORKLOAD";

/// The child side: runs the workload in the repository named by the environment. Ignored so a
/// normal test run skips it; the parent test starts it explicitly.
#[test]
#[ignore = "started by killed_runners_never_leave_partial_receipts"]
fn kill9_child_run() {
    let Ok(root) = std::env::var(REPO_VAR) else {
        return;
    };
    let id = std::env::var(ID_VAR).unwrap();
    let req = qual_runner::RunRequest {
        cwd: root.clone().into(),
        workload: format!(
            "qualification/workloads/{}",
            std::env::var(WORKLOAD_VAR).unwrap_or_else(|_| "k-v1.json".into())
        )
        .into(),
        variant: "cpu".into(),
        host_id: "test-host".into(),
        output: Some(format!(".qualification/receipts/{id}.json").into()),
        vars: Vec::new(),
        model: None,
        model_id: None,
        receipt_id: Some(id),
        term_grace_seconds: 0.5,
        command: vec!["kiln-qual".into()],
    };
    let r = qual_runner::run(&req);
    // Report the outcome for the interruption test.
    println!("KILL9-CHILD-EXIT {}", qual_runner::exit_code(&r));
}

fn pseudo_random(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn killed_runners_never_leave_partial_receipts() {
    let m = marker();
    let env = marker_env(&m, "");
    let cases: Vec<String> = (0..3)
        .map(|i| {
            case(
                &format!("step-{i}"),
                &[fixture(), "sleep", "0.05"],
                &env,
                "",
                runner_protocol(),
            )
        })
        .collect();
    let repo = Repo::new(&[(
        "k-v1.json",
        workload("k-v1", "correctness", "[]", "{}", &cases, 2),
    )]);
    let exe = std::env::current_exe().unwrap();
    let mut seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill -9 seed {seed}");
    let mut completed = 0;
    for i in 0..12 {
        let id = format!("kill9-receipt-{i:02}-v1");
        let mut child = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "kill9::kill9_child_run",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(REPO_VAR, repo.root())
            .env(ID_VAR, &id)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let delay = Duration::from_millis(pseudo_random(&mut seed) % 1500);
        let start = Instant::now();
        while start.elapsed() < delay {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let killed = Instant::now();
        while !processes_with_marker(&m).is_empty() {
            assert!(
                killed.elapsed() < Duration::from_secs(1),
                "case processes alive 1 s after the runner was killed: {:?}",
                processes_with_marker(&m)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let path = repo
            .root()
            .join(format!(".qualification/receipts/{id}.json"));
        if path.exists() {
            completed += 1;
            validate(repo.root(), &path);
        }
    }
    // Only hidden temporary names may remain besides complete receipts.
    if let Ok(entries) = std::fs::read_dir(repo.root().join(".qualification/receipts")) {
        for e in entries {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                name.ends_with("-v1.json") || (name.starts_with('.') && name.ends_with(".tmp")),
                "{name}"
            );
        }
    }
    eprintln!("{completed} of 12 runs completed before their kill");
}

#[test]
fn sigint_terminates_the_case_and_removes_the_run_directory() {
    let m = marker();
    let cases = vec![
        case(
            "quick-case",
            &[fixture(), "print", "x"],
            "{}",
            "",
            runner_protocol(),
        ),
        case(
            "sleep-case",
            &[fixture(), "sleep", "60"],
            &marker_env(&m, ""),
            "",
            runner_protocol(),
        ),
    ];
    let repo = Repo::new(&[(
        "i-v1.json",
        workload("i-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(&exe)
        .args([
            "--ignored",
            "--exact",
            "kill9::kill9_child_run",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(REPO_VAR, repo.root())
        .env(ID_VAR, "interrupted-receipt-v1")
        .env(WORKLOAD_VAR, "i-v1.json")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run_dir = repo
        .root()
        .join(".qualification/runs/interrupted-receipt-v1");
    let start = Instant::now();
    while !run_dir.join("cases/002-sleep-case-r001").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the run did not reach the second case"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The case is running (visible through its marker), so the signal interrupts it.
    while processes_with_marker(&m).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the sleeping case never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("KILL9-CHILD-EXIT 130"), "{text}");
    assert!(start.elapsed() < Duration::from_secs(50));
    assert!(!run_dir.exists(), "the run directory was not removed");
    assert!(!repo
        .root()
        .join(".qualification/receipts/interrupted-receipt-v1.json")
        .exists());
    assert_no_case_process(&m);
}
