//! Adversarial cases through the whole runner: each asserts the receipt's evidence and that no
//! process of the case is alive afterwards.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use qual_runner::{exit_code, run};

fn alive(pid: i32) -> bool {
    // A zombie is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let after = s.rsplit(')').next().unwrap_or("");
            !after.trim_start().starts_with('Z')
        }
        Err(_) => false,
    }
}

fn with_timeout(c: String, secs: u64) -> String {
    c.replace(
        "\"timeout_seconds\":30",
        &format!("\"timeout_seconds\":{secs}"),
    )
}

#[test]
fn deadline_and_ignored_sigterm_end_in_a_failed_receipt() {
    let m = marker();
    let cases = vec![with_timeout(
        case(
            "stubborn",
            &[fixture(), "ignore-term", "60"],
            &marker_env(&m, ""),
            "",
            runner_protocol(),
        ),
        // Long enough for the fixture to start (in its own network namespace) and ignore
        // SIGTERM on a loaded machine; a shorter deadline could kill it with SIGTERM first.
        5,
    )];
    let repo = Repo::new(&[(
        "t-v1.json",
        workload("t-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let t = Instant::now();
    let r = run(&repo.request("t-v1.json", "cpu"));
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert!(
        details(&v, 0).contains("timed out after 5 seconds"),
        "{}",
        details(&v, 0)
    );
    let cfg = std::fs::read_to_string(
        repo.root()
            .join(".qualification/runs/runner-test-receipt-v1/run-config.json"),
    )
    .unwrap();
    assert!(cfg.contains("\"status\": \"timed_out\""), "{cfg}");
    assert!(cfg.contains("\"signal_used\": 9"), "{cfg}");
    assert_no_case_process(&m);
}

#[test]
fn a_sleeper_past_its_deadline_gets_sigterm_and_a_failed_receipt() {
    let m = marker();
    let cases = vec![with_timeout(
        case(
            "sleeper",
            &[fixture(), "sleep", "60"],
            &marker_env(&m, ""),
            "",
            runner_protocol(),
        ),
        1,
    )];
    let repo = Repo::new(&[(
        "d-v1.json",
        workload("d-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let req = repo.request("d-v1.json", "cpu");
    let t = Instant::now();
    let runner = std::thread::spawn(move || run(&req));
    // Positive control: while the case runs, its process is visible through the marker, so
    // the check after the run can fail.
    while processes_with_marker(&m).is_empty() {
        assert!(
            !runner.is_finished() && t.elapsed() < Duration::from_secs(60),
            "the case process was never seen"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = runner.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert!(
        details(&v, 0).contains("timed out after 1 seconds"),
        "{}",
        details(&v, 0)
    );
    let cfg = std::fs::read_to_string(
        repo.root()
            .join(".qualification/runs/runner-test-receipt-v1/run-config.json"),
    )
    .unwrap();
    assert!(cfg.contains("\"status\": \"timed_out\""), "{cfg}");
    assert!(cfg.contains("\"signal_used\": 15"), "{cfg}");
    assert_no_case_process(&m);
}

#[test]
fn an_escaped_setsid_grandchild_is_found_killed_and_recorded() {
    // Relative to the case's working directory (the worktree, writable in the box).
    let m = marker();
    let cases = vec![case(
        "escape-case",
        &[fixture(), "escape", "scratch/pid", "60"],
        &marker_env(&m, ""),
        "",
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "e-v1.json",
        workload("e-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let r = run(&repo.request("e-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert!(
        details(&v, 0).contains("command left descendant processes running"),
        "{}",
        details(&v, 0)
    );
    let pid: i32 = std::fs::read_to_string(repo.root().join("scratch/pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The pid the case saw is its pid inside the box's PID namespace.
    let cfg = std::fs::read_to_string(
        repo.root()
            .join(".qualification/runs/runner-test-receipt-v1/run-config.json"),
    )
    .unwrap();
    assert!(cfg.contains(&format!("\"box_pid\": {pid}")), "{cfg}");
    assert_no_case_process(&m);
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn a_one_gib_stdout_flood_is_bounded_and_drained() {
    let m = marker();
    let cases = vec![case(
        "flood-case",
        &[fixture(), "flood", "1073741824"],
        &marker_env(&m, ""),
        "",
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "f-v1.json",
        workload("f-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let before = vm_hwm_kib();
    let r = run(&repo.request("f-v1.json", "cpu"));
    let after = vm_hwm_kib();
    assert_eq!(exit_code(&r), 0, "{r:?}");
    // The peak resident size grows by at most the capture bound plus slack, never by 1 GiB.
    assert!(
        after.saturating_sub(before) < 160 * 1024,
        "VmHWM grew {} KiB",
        after - before
    );
    let log = repo
        .root()
        .join(".qualification/runs/runner-test-receipt-v1/cases/001-flood-case-r001/stdout.log");
    let len = std::fs::metadata(&log).unwrap().len();
    assert!(len <= 16 * 1024 * 1024 + 128, "{len}");
    let cfg = std::fs::read_to_string(
        repo.root()
            .join(".qualification/runs/runner-test-receipt-v1/run-config.json"),
    )
    .unwrap();
    assert!(cfg.contains("\"total_bytes\": 1073741824"), "{cfg}");
    assert_no_case_process(&m);
}

#[test]
fn forbidden_network_reaches_only_its_own_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let m = marker();
    let cases = vec![case(
        "net-case",
        &[fixture(), "net", &port],
        &marker_env(&m, ""),
        r#"{"stream":"stdout","match":"required","pattern":"^outside: unreachable$"},{"stream":"stdout","match":"required","pattern":"^inside: round-trip$"}"#,
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "n-v1.json",
        workload("n-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    listener.set_nonblocking(true).unwrap();
    let r = run(&repo.request("n-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 0, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert_eq!(
        v.get("results").unwrap().as_array().unwrap()[0]
            .get("status")
            .unwrap()
            .as_str(),
        Some("passed")
    );
    let stdout = std::fs::read_to_string(
        repo.root()
            .join(".qualification/runs/runner-test-receipt-v1/cases/001-net-case-r001/stdout.log"),
    )
    .unwrap();
    assert_eq!(stdout, "outside: unreachable\ninside: round-trip\n");
    let cfg = std::fs::read_to_string(
        repo.root()
            .join(".qualification/runs/runner-test-receipt-v1/run-config.json"),
    )
    .unwrap();
    assert!(cfg.contains("loopback-only-v1"), "{cfg}");
    // The host listener never saw a connection from the case.
    assert!(listener.accept().is_err());
    assert_no_case_process(&m);
}

#[test]
fn a_hundred_megabyte_case_result_is_refused_and_discarded() {
    let m = marker();
    let cases = vec![case(
        "big-case",
        &[fixture(), "big-result", "100000000"],
        &marker_env(&m, ""),
        "",
        &command_protocol(&["lat"]),
    )];
    let repo = Repo::new(&[(
        "b-v1.json",
        workload("b-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let r = run(&repo.request("b-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert!(details(&v, 0).contains("byte limit"), "{}", details(&v, 0));
    let case_dir = repo
        .root()
        .join(".qualification/runs/runner-test-receipt-v1/cases/001-big-case-r001");
    assert!(!case_dir.join("command-result.json").exists());
    let kinds: Vec<String> = v
        .get("artifacts")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.get("kind").unwrap().as_str().unwrap().to_string())
        .collect();
    assert!(
        !kinds.iter().any(|k| k == "command_case_result"),
        "{kinds:?}"
    );
    assert_no_case_process(&m);
}

#[test]
fn death_by_signal_is_a_failed_exit_code() {
    let m = marker();
    let cases = vec![case(
        "signal-case",
        &[fixture(), "raise", "9"],
        &marker_env(&m, ""),
        "",
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "s-v1.json",
        workload("s-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let r = run(&repo.request("s-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert!(
        details(&v, 0).contains("exit code -9 not in [0]"),
        "{}",
        details(&v, 0)
    );
    assert_no_case_process(&m);
}

#[test]
fn two_hundred_lingering_children_are_killed_and_recorded() {
    let m = marker();
    let cases = vec![case(
        "fork-case",
        &[fixture(), "fork-children", "200", "60"],
        &marker_env(&m, ""),
        "",
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "c-v1.json",
        workload("c-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let t = Instant::now();
    let r = run(&repo.request("c-v1.json", "cpu"));
    assert!(t.elapsed() < Duration::from_secs(40));
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert!(
        details(&v, 0).contains("command left descendant processes running"),
        "{}",
        details(&v, 0)
    );
    let cfg = std::fs::read_to_string(
        repo.root()
            .join(".qualification/runs/runner-test-receipt-v1/run-config.json"),
    )
    .unwrap();
    let v = qual_json::from_str(&cfg).unwrap();
    let residue = v.get("cases").unwrap().as_array().unwrap()[0]
        .get("containment")
        .unwrap()
        .get("residue")
        .unwrap()
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(residue.len(), 200, "{residue:?}");
    for r in residue {
        let pid = r.get("pid").unwrap().as_int().unwrap().as_i64().unwrap() as i32;
        assert!(!alive(pid), "child {pid} is still alive");
    }
    assert_no_case_process(&m);
}

/// Something outside the box (here: this test, while the case runs) puts a file at the
/// receipt path: the runner does not overwrite it, fails loudly (exit 4, naming the path) and
/// leaves the file as it was.
#[test]
fn a_file_appearing_at_the_receipt_path_fails_the_run_loudly() {
    let cases = vec![case(
        "slow",
        &[fixture(), "sleep", "1.5"],
        "{}",
        "",
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "a-v1.json",
        workload("a-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let mut req = repo.request("a-v1.json", "cpu");
    req.output = Some(".qualification/receipts/appeared.json".into());
    let target = repo.root().join(".qualification/receipts/appeared.json");
    let writer = {
        let target = target.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(30);
            // The receipt directory exists once the run has started its cases.
            while !target.parent().unwrap().is_dir() {
                assert!(Instant::now() < until);
                std::thread::sleep(Duration::from_millis(5));
            }
            std::fs::write(&target, b"{\"forged\": true}\n").unwrap();
        })
    };
    let r = run(&req);
    writer.join().unwrap();
    assert_eq!(exit_code(&r), 4, "{r:?}");
    let text = format!("{:?}", r.err().unwrap());
    assert!(text.contains("appeared at the receipt path"), "{text}");
    assert_eq!(std::fs::read(&target).unwrap(), b"{\"forged\": true}\n");
}
