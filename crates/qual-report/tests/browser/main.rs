//! The `qual-report` checks that need a real program, as one `harness = false` binary
//! (`qual_test_fixtures::harness`): the HTML report in headless Chromium (`chromium`), and the
//! JUnit XML validated against `schemas/junit.xsd` by `xmllint`. A trial whose program is
//! missing is reported ignored, saying what to install, and fails under `CI=true`; it is
//! never counted as passed.

// Tests start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod chromium;

use qual_test_fixtures::harness::{self, Trial};
use qual_test_fixtures::synth::{self, Options};
use std::path::Path;
use std::process::Command;

fn on_path(name: &str) -> Result<(), String> {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(name).is_file()));
    if found {
        Ok(())
    } else {
        Err(format!("needs {name} on PATH (run scripts/setup-browser)"))
    }
}

fn junit_validates_against_the_xsd() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        hosts: vec!["host-a".into(), "host-b".into()],
        commits: 2,
        fail_every: 3,
        ..Options::default()
    };
    synth::write_set(tmp.path(), &opts).expect("generate");
    let set = qual_report::collect(&[tmp.path().join("qualification/receipts")]);
    assert!(set.refused.is_empty(), "{:?}", set.refused);
    xmllint(tmp.path(), &qual_report::junit::render(&set));
}

/// The JUnit XML of bench results (a real sweep and a generated search with refused and
/// failed runs) against `schemas/junit.xsd`.
fn bench_junit_validates_against_the_xsd() {
    use qual_test_fixtures::synth::bench::{bench_document, BenchOptions};
    let tmp = tempfile::tempdir().expect("tempdir");
    let search = tmp.path().join("search.json");
    let doc = bench_document(&BenchOptions {
        refused: vec![0],
        failed: vec![1],
        verdict: serde_json::json!({"status": "server_failed", "reasons": ["no measured request succeeded"]}),
        ..BenchOptions::default()
    });
    std::fs::write(&search, doc.to_string()).unwrap();
    let sweep = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-sweep.json");
    let set = qual_report::collect(&[sweep, search]);
    assert!(set.refused.is_empty(), "{:?}", set.refused);
    xmllint(tmp.path(), &qual_report::junit::render(&set));
}

fn xmllint(dir: &Path, xml: &str) {
    let file = dir.join("junit.xml");
    std::fs::write(&file, xml).unwrap();
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/junit.xsd");
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .arg(&file)
        .output()
        .expect("start xmllint");
    assert!(
        out.status.success(),
        "xmllint refused the JUnit XML:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    let browser = match chromium::chromium() {
        Some(_) => Ok(()),
        None => Err("needs Chromium (scripts/setup-browser installs Debian's chromium)".into()),
    };
    harness::run(vec![
        Trial::new(
            "html_report_renders_in_chromium",
            chromium::html_report_renders_in_chromium,
        )
        .needs(browser.clone()),
        Trial::new(
            "bench_report_renders_in_chromium",
            chromium::bench_report_renders_in_chromium,
        )
        .needs(browser),
        Trial::new(
            "bench_junit_validates_against_the_xsd",
            bench_junit_validates_against_the_xsd,
        )
        .needs(on_path("xmllint")),
        Trial::new(
            "junit_validates_against_the_xsd",
            junit_validates_against_the_xsd,
        )
        .needs(on_path("xmllint")),
    ]);
}
