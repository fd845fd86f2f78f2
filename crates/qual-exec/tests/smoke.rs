//! Smoke tests of the public `execute` API: a plain run, the loopback-only probe against a real
//! execution, unbounded durations and a missing working directory.

use qual_exec::*;
use std::time::Duration;

fn spec(argv: &[&str]) -> ExecSpec {
    ExecSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: std::env::temp_dir(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        timeout: Duration::from_secs(30),
        term_grace: Duration::from_secs(2),
        capture: CaptureLimits::default(),
        network: NetworkPolicy::Inherit,
        sandbox: Default::default(),
    }
}

#[test]
fn echo() {
    let e = execute(&spec(&["sh", "-c", "echo hi; echo err >&2; exit 3"])).unwrap();
    println!("{}", serde_json::to_string_pretty(&e).unwrap());
    assert_eq!(e.termination, Termination::Exited { code: 3 });
    assert_eq!(e.stdout.text_lossy(), "hi\n");
    assert_eq!(e.stderr.text_lossy(), "err\n");
    assert!(e.containment.clean);
}

#[test]
fn isolation_probe_agrees_with_execution() {
    let probe = probe_loopback_only();
    let mut s = spec(&["cat", "/proc/net/dev"]);
    s.network = NetworkPolicy::LoopbackOnly;
    let run = execute(&s);
    match probe {
        Ok(isolation) => {
            assert_ne!(isolation, NetworkIsolation::None);
            let e = run.unwrap();
            assert_eq!(e.containment.network, isolation);
            let text = e.stdout.text_lossy();
            let names: Vec<&str> = text
                .lines()
                .skip(2)
                .filter_map(|l| l.split(':').next())
                .map(str::trim)
                .collect();
            assert_eq!(names, ["lo"], "{text}");
        }
        Err(ExecError::IsolationUnavailable { capability, .. }) => {
            eprintln!("isolation unavailable here: {capability}");
            assert!(matches!(
                run.unwrap_err(),
                ExecError::IsolationUnavailable { .. }
            ));
        }
        Err(other) => panic!("probe failed unexpectedly: {other}"),
    }
}

#[test]
fn unbounded_durations_do_not_overflow() {
    let mut s = spec(&["true"]);
    s.timeout = Duration::MAX;
    s.term_grace = Duration::MAX;
    let e = execute(&s).unwrap();
    assert_eq!(e.termination, Termination::Exited { code: 0 });
}

#[test]
fn missing_working_directory_is_a_spawn_error() {
    let mut s = spec(&["true"]);
    s.cwd = std::env::temp_dir().join("kq-no-such-dir-for-qual-exec");
    let e = execute(&s).unwrap_err();
    assert!(
        matches!(&e, ExecError::Spawn { reason, .. } if reason.contains("working directory")),
        "{e}"
    );
}
