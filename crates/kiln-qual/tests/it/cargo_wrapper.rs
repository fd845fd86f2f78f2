//! `kiln-qual cargo`: the bounded wrapper passes exit codes through, filters the environment,
//! forces offline mode, enforces its deadline and refuses a missing program. The wrapped
//! program is replaced with `--cargo` so that the tests run without building anything.

use assert_cmd::Command;
use predicates::prelude::*;

fn kq() -> Command {
    let mut c = Command::cargo_bin("kiln-qual").unwrap();
    c.env("PATH", "/usr/bin:/bin");
    c
}

#[test]
fn exit_code_passes_through() {
    kq().args([
        "cargo",
        "--cargo",
        "sh",
        "--",
        "-c",
        "echo out; echo err >&2; exit 7",
    ])
    .assert()
    .code(7)
    .stdout("out\n")
    .stderr(predicate::str::contains("err\n"));
}

#[test]
fn environment_is_filtered_and_offline_is_forced() {
    let out = kq()
        .args(["cargo", "--cargo", "env", "--", "-u", "UNSET_NOTHING"])
        .env("KQ_SECRET_TOKEN", "do-not-leak")
        .env("CARGO_NET_OFFLINE", "false")
        .env("RUSTFLAGS", "-Cdebuginfo=0")
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("KQ_SECRET_TOKEN"), "{text}");
    assert!(
        text.lines().any(|l| l == "CARGO_NET_OFFLINE=true"),
        "{text}"
    );
    assert!(!text.contains("CARGO_NET_OFFLINE=false"), "{text}");
    assert!(
        text.lines().any(|l| l == "RUSTFLAGS=-Cdebuginfo=0"),
        "{text}"
    );
    assert!(text.lines().any(|l| l == "PATH=/usr/bin:/bin"), "{text}");
}

#[test]
fn allow_env_adds_a_variable() {
    kq().args([
        "cargo",
        "--allow-env",
        "KQ_EXTRA",
        "--cargo",
        "env",
        "--",
        "-u",
        "UNSET_NOTHING",
    ])
    .env("KQ_EXTRA", "1")
    .assert()
    .code(0)
    .stdout(predicate::str::contains("KQ_EXTRA=1\n"));
}

#[test]
fn deadline_ends_the_run_with_124() {
    kq().args([
        "cargo",
        "--cargo",
        "sleep",
        "--timeout-seconds",
        "1",
        "--term-grace-seconds",
        "1",
        "--",
        "120",
    ])
    .timeout(std::time::Duration::from_secs(120))
    .assert()
    .code(124)
    .stderr(predicate::str::contains("exceeded 1s"));
}

#[test]
fn missing_program_is_127_and_missing_args_is_usage() {
    kq().args(["cargo", "--cargo", "no-such-cargo-for-kq", "--", "build"])
        .assert()
        .code(127)
        .stderr(predicate::str::contains(
            "failed to spawn no-such-cargo-for-kq",
        ));
    kq().args(["cargo"]).assert().code(2);
    kq().args(["cargo", "--timeout-seconds", "0", "--", "build"])
        .assert()
        .code(2);
}

#[test]
fn sigint_to_the_wrapper_ends_the_wrapped_group_with_130() {
    let marker = format!("kq-cargo-int-{}", std::process::id());
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("kiln-qual"))
        .args([
            "cargo",
            "--allow-env",
            "KQ_TEST_MARKER",
            "--term-grace-seconds",
            "2",
            "--cargo",
            "sleep",
            "--",
            "120",
        ])
        .env("PATH", "/usr/bin:/bin")
        .env("KQ_TEST_MARKER", &marker)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let wrapper = child.id();
    // The wrapped `sleep` carries the marker (so does the wrapper, which is excluded).
    let wrapped = || -> Vec<u32> {
        let needle = format!("KQ_TEST_MARKER={marker}");
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != wrapper)
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                    .unwrap_or(false)
            })
            .collect()
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while wrapped().is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "wrapped program never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let sent = std::process::Command::new("kill")
        .args(["-INT", &wrapper.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(wrapped().is_empty(), "wrapped program survived");
}
