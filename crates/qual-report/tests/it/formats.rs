//! The four formats over a generated multi-host, multi-commit receipt set with run and serving
//! evidence: the Markdown and JUnit pinned by snapshots (the temporary directory redacted),
//! the CSV's shape, and the HTML's self-containment. (The JUnit's validation against
//! `schemas/junit.xsd` with `xmllint` is in the `browser` target, a loud-skip harness.)

use qual_test_fixtures::synth::{self, Options};
use std::path::Path;

fn small() -> Options {
    Options {
        hosts: vec!["host-a".into(), "host-b".into()],
        backends: vec!["cpu".into()],
        commits: 2,
        repetitions: 2,
        evidence: true,
        requests: 24,
        fail_every: 3,
        runs_per_commit: 1,
        validity_refused_every: 0,
    }
}

fn generated(o: &Options) -> (tempfile::TempDir, qual_report::ReportSet) {
    let tmp = tempfile::tempdir().expect("tempdir");
    synth::write_set(tmp.path(), o).expect("generate");
    let set = qual_report::collect(&[tmp.path().join("qualification/receipts")]);
    assert!(set.refused.is_empty(), "refused: {:?}", set.refused);
    assert_eq!(set.skipped, 0);
    assert!(set.evidence_notes.is_empty(), "{:?}", set.evidence_notes);
    (tmp, set)
}

fn redact(text: &str, root: &Path) -> String {
    text.replace(&root.display().to_string(), "[TMP]")
}

#[test]
fn evidence_is_read_per_repetition() {
    let (_tmp, set) = generated(&small());
    assert_eq!(set.receipts.len(), 8);
    let serving = set
        .receipts
        .iter()
        .find(|r| r.workload == "serving-mock-v1")
        .expect("a serving receipt");
    assert!(serving.run_evidence);
    let case = &serving.cases[1];
    assert_eq!(case.repetitions.len(), 2);
    let sv = case.repetitions[0]
        .serve
        .as_ref()
        .expect("serving evidence");
    assert_eq!(sv.concurrency, Some(4));
    assert_eq!(sv.ttft_ms.len(), 24);
    assert_eq!(sv.itl_ms.len(), 24 * 15);
    // newest first
    assert!(set
        .receipts
        .windows(2)
        .all(|w| w[0].started_ms >= w[1].started_ms));
}

#[test]
fn changed_evidence_is_not_used() {
    let tmp = tempfile::tempdir().expect("tempdir");
    synth::write_set(tmp.path(), &small()).expect("generate");
    let runs = tmp.path().join(".qualification/runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let case = std::fs::read_dir(run.join("cases"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = case.join("case-result.json");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text} ")).unwrap();
    let set = qual_report::collect(&[tmp.path().join("qualification/receipts")]);
    assert_eq!(set.evidence_notes.len(), 1, "{:?}", set.evidence_notes);
    assert!(set.evidence_notes[0].contains("no longer match the digest"));
}

#[test]
fn workloads_found_in_directories_are_skipped_not_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    synth::write_set(tmp.path(), &small()).expect("generate");
    let set = qual_report::collect(&[tmp.path().join("qualification")]);
    assert_eq!(
        (set.receipts.len(), set.skipped, set.refused.len()),
        (8, 2, 0)
    );
    let workload = tmp
        .path()
        .join("qualification/workloads/serving-mock-v1.json");
    let set = qual_report::collect(&[workload]);
    assert_eq!(set.refused.len(), 1, "a file named explicitly is validated");
}

#[test]
fn invalid_receipts_are_refused_with_reasons() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"schema_version\": 1, \"schema_version\": 2}").unwrap();
    let set = qual_report::collect(std::slice::from_ref(&bad));
    assert_eq!(set.receipts.len(), 0);
    assert_eq!(set.refused.len(), 1);
    assert!(qual_report::markdown::render(&set).contains("Refused files"));
}

#[test]
fn markdown_snapshot() {
    let (tmp, set) = generated(&small());
    let md = redact(&qual_report::markdown::render(&set), tmp.path());
    insta::assert_snapshot!("markdown", md);
}

#[test]
fn junit_snapshot() {
    let (tmp, set) = generated(&small());
    let xml = qual_report::junit::render(&set);
    insta::assert_snapshot!("junit", redact(&xml, tmp.path()));
}

#[test]
fn csv_has_one_row_per_observation() {
    let (_tmp, set) = generated(&small());
    let csv = qual_report::csv::render(&set);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(qual_report::csv::HEADER));
    let rows: Vec<&str> = lines.collect();
    let expected: usize = set
        .receipts
        .iter()
        .flat_map(|r| &r.cases)
        .map(|c| c.metrics.len() + c.repetitions.iter().map(|p| p.metrics.len()).sum::<usize>())
        .sum();
    assert_eq!(rows.len(), expected);
    assert!(rows.iter().any(|r| r.contains(",aggregate,ttft_ms.p50,")));
    assert!(rows
        .iter()
        .any(|r| r.contains(",2,output_tokens_per_second,")));
    for r in &rows {
        assert_eq!(r.split(',').count(), 13, "{r}");
    }
}

#[test]
fn html_is_self_contained_and_escaped() {
    let (_tmp, set) = generated(&small());
    let html = qual_report::html::render(&set);
    // Offline: no script, no link or resource attribute, every fetch forbidden by the CSP.
    for needle in ["<script", " src=", " href=", "<link", "url("] {
        assert!(!html.contains(needle), "{needle}");
    }
    assert!(html.contains("default-src 'none'"));
    assert!(!html.contains("<b>&"), "document text must be escaped");
    assert!(html.contains("&lt;b&gt;&amp;"));
    for section in [
        "Verdict matrix",
        "Metric trends",
        "Serving latency",
        "TTFT distribution",
        "Request timeline",
        "throughput vs concurrency",
        "do not establish",
    ] {
        assert!(html.contains(section), "missing {section}");
    }
    assert!(html.contains("class=\"band\""), "tolerance band drawn");
    assert!(html.contains("comparison policy&apos;s not_less tolerance"));
    let svgs = html.matches("<svg").count();
    assert!(svgs >= 10, "{svgs} charts");
    assert_eq!(svgs, html.matches("<desc id=").count());
}
