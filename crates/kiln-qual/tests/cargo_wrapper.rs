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
