//! Command-line conventions: `--version` names the commit, completions and the man page come
//! from the clap definition, `NO_COLOR` and non-terminals get no colour; and `report` end to
//! end over a generated receipt set (every output written; a refused file exits 1).

use assert_cmd::Command;

fn kq() -> Command {
    Command::cargo_bin("kiln-qual").unwrap()
}

#[test]
fn version_names_the_commit() {
    let out = kq().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("kiln-qual "), "{text}");
    assert!(text.contains(" (commit "), "{text}");
}

#[test]
fn completions_and_man_page_come_from_the_definition() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = kq().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("kiln-qual"), "{shell}");
        assert!(
            text.contains("report"),
            "{shell}: report subcommand missing"
        );
    }
    let out = kq().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = kq().arg("man").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(".TH kiln-qual"), "{text}");
    assert!(text.contains("completions"));
}

#[test]
fn no_colour_without_a_terminal_or_with_no_color() {
    for no_color in [None, Some("1")] {
        let mut c = kq();
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        let out = c.arg("--bogus-flag").output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(
            !out.stderr.contains(&0x1b),
            "{:?}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn report_writes_every_format_and_refuses_invalid_files() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = qual_test_fixtures::synth::Options::default();
    let n = qual_test_fixtures::synth::write_set(tmp.path(), &opts).unwrap();
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = kq()
        .current_dir(tmp.path())
        .args([
            "report",
            "qualification/receipts",
            "--markdown",
            "out/summary.md",
            "--junit",
            "out/junit.xml",
            "--csv",
            "out/csv",
            "--html",
            "out/report.html",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains(&format!("report: {n} receipts")),
        "{stderr}"
    );
    for f in ["summary.md", "junit.xml", "csv/metrics.csv", "report.html"] {
        let len = std::fs::metadata(out_dir.join(f))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 100, "{f}: {len} bytes");
    }
    // No format flag: Markdown on stdout.
    let out = kq()
        .current_dir(tmp.path())
        .args(["report", "qualification"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("## kiln-qual report"));
    // A file that is not a receipt is refused (listed, exit 1), the rest still reported.
    let bad = tmp.path().join("qualification/receipts/bad.json");
    std::fs::write(&bad, "{\"a\": 1, \"a\": 2}").unwrap();
    let out = kq()
        .current_dir(tmp.path())
        .args(["report", "qualification/receipts"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kiln-qual: refused qualification/receipts/bad.json"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Refused files"));
}
