//! The shell-facing conventions that need no terminal: man pages (the printed page points to
//! no page that is not there; `man --out-dir` writes every page it points to and overwrites
//! none), `--color` (always styles even through a pipe, never does not, and typed control
//! characters are never styled into the terminal), and the global `-q`/`-v`. Progress and
//! Ctrl-C on a real terminal and completion in real shells are in `tests/real/terminal.rs`.

use assert_cmd::Command;
use std::collections::BTreeSet;

fn kq() -> Command {
    Command::cargo_bin("kiln-qual").unwrap()
}

/// The `kiln-qual-…(1)` pages a roff page refers to (hyphens are escaped in roff).
fn page_refs(roff: &str) -> BTreeSet<String> {
    let text = roff.replace("\\-", "-");
    let mut refs = BTreeSet::new();
    for (i, _) in text.match_indices("kiln-qual-") {
        let rest = &text[i..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if rest[name.len()..].starts_with("(1)") {
            refs.insert(name);
        }
    }
    refs
}

#[test]
fn the_printed_man_page_points_to_no_missing_page() {
    let out = kq().arg("man").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(".SH SUBCOMMANDS"), "{text}");
    assert!(text.contains("kiln\\-qual receipt"), "{text}");
    assert!(page_refs(&text).is_empty(), "{:?}", page_refs(&text));
}

#[test]
fn man_out_dir_writes_every_page_it_points_to_and_overwrites_none() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("man");
    std::fs::create_dir(&dir).unwrap();
    let out = kq()
        .args(["man", "--out-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", out);
    let names: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for page in [
        "kiln-qual.1",
        "kiln-qual-receipt.1",
        "kiln-qual-receipt-check.1",
        "kiln-qual-bench-compare.1",
    ] {
        assert!(names.contains(page), "{page} missing: {names:?}");
    }
    let mut pointed = 0;
    for n in &names {
        let text = std::fs::read_to_string(dir.join(n)).unwrap();
        for r in page_refs(&text) {
            pointed += 1;
            assert!(names.contains(&format!("{r}.1")), "{n} points to {r}(1)");
        }
    }
    assert!(pointed > 20, "only {pointed} references");
    let before = std::fs::read(dir.join("kiln-qual.1")).unwrap();
    std::fs::write(dir.join("kiln-qual-man.1"), "mine").unwrap();
    let again = kq()
        .args(["man", "--out-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("exists"), "{err}");
    assert_eq!(std::fs::read(dir.join("kiln-qual.1")).unwrap(), before);
    assert_eq!(
        std::fs::read_to_string(dir.join("kiln-qual-man.1")).unwrap(),
        "mine"
    );
}

#[test]
fn color_flag_styles_help_and_errors_and_never_typed_controls() {
    let always = kq().args(["--color", "always", "--help"]).output().unwrap();
    assert!(always.status.success());
    assert!(
        always.stdout.contains(&0x1b),
        "no styling with --color always"
    );
    let never = kq()
        .args(["bench", "--help", "--color=never"])
        .output()
        .unwrap();
    assert!(!never.stdout.contains(&0x1b));
    let err = kq()
        .args(["--color", "always", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(err.status.code(), Some(2));
    assert!(err.stderr.contains(&0x1b), "error not styled");
    // A typed escape sequence: shown escaped, and the error is then not styled at all.
    let hostile = kq()
        .args(["--color", "always", "--bo\u{1b}[2Jgus"])
        .output()
        .unwrap();
    assert_eq!(hostile.status.code(), Some(2));
    let text = String::from_utf8_lossy(&hostile.stderr);
    assert!(!hostile.stderr.contains(&0x1b), "{text:?}");
    assert!(text.contains("\\x1b[2J"), "{text}");
    let bad = kq().args(["--color", "sometimes", "man"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn bench_and_campaign_help_group_their_options() {
    for (cmd, headings) in [
        ("bench", &["Target:", "Workload:", "Load:", "Outputs:"][..]),
        (
            "campaign",
            &["Server:", "Campaign:", "Gates:", "Reference:"][..],
        ),
    ] {
        let out = kq().args([cmd, "--help"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for h in headings {
            assert!(text.lines().any(|l| l == *h), "{cmd}: no {h}\n{text}");
        }
    }
}

#[test]
fn quiet_keeps_the_verdict_and_drops_the_case_table() {
    let d =
        crate::common::example_checkout(&["qualification/workloads/cpu-smoke-v1.json"], "smoke");
    let run = |flags: &[&str], out: &str| {
        let mut c = kq();
        c.current_dir(d.path()).args(flags).args([
            "run",
            "qualification/workloads/cpu-smoke-v1.json",
            "--variant",
            "cpu",
            "--host-id",
            "ci-host",
            "--output",
            out,
        ]);
        c.output().unwrap()
    };
    let normal = run(&[], ".qualification/receipts/normal.json");
    let text = String::from_utf8_lossy(&normal.stderr);
    assert_eq!(normal.status.code(), Some(0), "{text}");
    assert!(text.contains("case results:"), "{text}");
    let quiet = run(&["-q"], ".qualification/receipts/quiet.json");
    let text = String::from_utf8_lossy(&quiet.stderr);
    assert_eq!(quiet.status.code(), Some(0), "{text}");
    assert!(!text.contains("case results:"), "{text}");
    assert!(text.contains("verdict: passed"), "{text}");
    assert_eq!(
        String::from_utf8_lossy(&quiet.stdout).trim(),
        ".qualification/receipts/quiet.json"
    );
    let both = kq().args(["-q", "-v", "man"]).output().unwrap();
    assert_eq!(both.status.code(), Some(2));
}
