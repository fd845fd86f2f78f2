//! `kiln-qual report` over serving-campaign records, end to end through the binary: a reference
//! campaign and a paired candidate campaign (whose mock server stops one token short, so a gate
//! fails, the outputs differ from the reference and fail-fast skips a profile) are
//! produced against owned `kiln-qual mock-server`s, then rendered in every format — Markdown and
//! JUnit pinned by snapshots (temporary paths and timing-dependent numbers redacted) — and a
//! tampered receipt is refused, never rendered.

use crate::common::{self, free_port};
use assert_cmd::Command;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_kiln-qual");

fn recipe(path: &Path, extra: &[&str]) {
    let args: Vec<&str> = ["--itl-ms", "0.2"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    common::mock_launch_recipe(
        path,
        "report-campaign-mock",
        BIN,
        free_port(),
        &args,
        serde_json::Value::Null,
    );
}

fn campaign(dir: &Path, engine: &str, launch: &str, extra: &[&str]) -> assert_cmd::assert::Assert {
    common::stand_in_model(dir);
    Command::new(BIN)
        .args(["campaign", "--engine", engine, "--launch", launch])
        .args([
            "--campaign-id",
            "report-campaign",
            "--prompt-set-id",
            "report-prompts",
        ])
        .args([
            "--profiles",
            "greedy-short,mixed",
            "--sizes",
            "1,3",
            "--repeats",
            "1",
        ])
        .args(["--max-tokens", "4", "--memory-limit-bytes", "1099511627776"])
        .args(["--memory-source", "process-tree", "--memory-sample-ms", "1"])
        .args([
            "--output-evidence",
            "full",
            "--out-dir",
            "out",
            "--model-path",
            "model",
        ])
        .args(extra)
        .current_dir(dir)
        .assert()
}

/// Redacts what differs between runs: the temporary directory and measured numbers.
fn settings(root: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    let root = regex_escape(&root.display().to_string());
    s.add_filter(&root, "[TMP]");
    // Markdown row cells: req/s, tok/s, TTFT and ITL percentiles.
    s.add_filter(
        r"\| ([0-9.e-]+) \| ([0-9.e-]+) \| ([0-9.e-]+) / ([0-9.e-]+) / ([0-9.e-]+) \| ([0-9.e-]+) / ([0-9.e-]+) / ([0-9.e-]+) \|",
        "| [req/s] | [tok/s] | [ttft] | [itl] |",
    );
    s.add_filter(r"[0-9.]+ MiB \(", "[peak] MiB (");
    s.add_filter(r"\d+ samples", "[n] samples");
    s
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

#[test]
fn campaigns_render_in_every_format_and_a_tampered_one_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::create_dir(dir.join("out")).unwrap();
    recipe(&dir.join("ref.json"), &[]);
    recipe(&dir.join("cand.json"), &["--output-tokens", "3"]);
    campaign(dir, "ref", "ref.json", &[]).code(0);
    campaign(
        dir,
        "cand",
        "cand.json",
        &["--reference-dir", "out", "--reference-engine", "ref"],
    )
    .code(1);

    let rep = dir.join("rep");
    Command::new(BIN)
        .args([
            "report",
            "out",
            "--markdown",
            "rep/summary.md",
            "--junit",
            "rep/junit.xml",
        ])
        .args(["--csv", "rep/csv", "--html", "rep/report.html"])
        .current_dir(dir)
        .assert()
        .code(0)
        .stderr(predicates::str::contains(
            "2 campaigns (1 passed, 1 failed), 0 refused",
        ));
    let md = std::fs::read_to_string(rep.join("summary.md")).unwrap();
    let junit = std::fs::read_to_string(rep.join("junit.xml")).unwrap();
    let html = std::fs::read_to_string(rep.join("report.html")).unwrap();
    let rows = std::fs::read_to_string(rep.join("csv/campaign-rows.csv")).unwrap();

    // Markdown: per profile a row table with the failed gates, memory source, pairing.
    assert!(md.contains("### Serving campaigns"), "{md}");
    assert!(md.contains("failed: fixed\\_output\\_length"), "{md}");
    assert!(md.contains("process\\_tree\\_pss"), "{md}");
    assert!(
        md.contains("output\\_mismatch: request 0: content from byte 15"),
        "{md}"
    );
    assert!(
        md.contains("mixed: not run after the failure of greedy-short"),
        "{md}"
    );
    // JUnit: a testcase per row, gate failures as failures, the skipped profile skipped.
    assert_eq!(
        junit.matches("<testcase ").count(),
        2 + 2 + 2 + 1,
        "{junit}"
    );
    assert_eq!(junit.matches("type=\"gate\"").count(), 2, "{junit}");
    assert!(junit.contains("<skipped message=\"not run after the failure of greedy-short\"/>"));
    // CSV: one line per row (header + 2 + 2 + 2), the memory source on each.
    assert_eq!(rows.lines().count(), 7, "{rows}");
    assert!(
        rows.lines()
            .skip(1)
            .all(|l| l.contains(",process_tree_pss,sha256:")),
        "{rows}"
    );
    assert!(rows.contains(",cand,greedy-short,failed,1,0,failed,1,1,fixed_output_length,"));
    assert!(rows.contains(",ref,mismatched,output_mismatch: request 0: content from byte 15"));
    // HTML: the section, self-contained.
    assert!(html.contains("<h2 id=\"campaigns\">Serving campaigns</h2>"));
    assert!(html.contains("<code>fixed_output_length</code>: "));
    assert!(!html.contains("<script"));

    let s = settings(dir);
    s.bind(|| {
        insta::assert_snapshot!("campaign_markdown", md);
        insta::assert_snapshot!("campaign_junit", junit);
    });

    // A receipt changed after publication: its campaign is refused, not rendered.
    let receipt = dir.join("out/greedy-short.ref.json");
    let text = std::fs::read_to_string(&receipt).unwrap();
    std::fs::remove_file(&receipt).unwrap();
    std::fs::write(&receipt, text.replacen("\"repeat\": 0", "\"repeat\": 7", 1)).unwrap();
    let out = Command::new(BIN)
        .args(["report", "out/campaign.ref.json"])
        .current_dir(dir)
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "kiln-qual: refused out/campaign.ref.json",
        ))
        .stderr(predicates::str::contains(
            "/receipt_sha256 does not match the content",
        ))
        .get_output()
        .stdout
        .clone();
    let md = String::from_utf8(out).unwrap();
    assert!(!md.contains("### Serving campaigns"), "{md}");
    assert!(md.contains("### Refused files"), "{md}");
    // The lone receipt, named directly, is refused too.
    Command::new(BIN)
        .args(["report", "out/greedy-short.ref.json"])
        .current_dir(dir)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("receipt_sha256"));
    // The paired candidate receipt alone still renders; its reference changed, which is noted.
    Command::new(BIN)
        .args(["report", "out/greedy-short.cand.json"])
        .current_dir(dir)
        .assert()
        .code(0)
        .stderr(predicates::str::contains("changed since the pairing"))
        .stdout(predicates::str::contains("a receipt without its summary"));
}
