//! `kiln-qual report` over `kiln-qual bench` result documents, end to end through the binary: a
//! real closed-loop sweep (c = 1, 2, 4) and a run whose every request the mock fails (an in-band
//! error after two content events) against owned `kiln-qual mock-server`s with a word-level
//! tokenizer, then the report in HTML, JUnit, CSV and Markdown, its content checked; and a
//! bench document with an unknown member refused with its JSON pointer while the others are
//! still reported.

use crate::common::{mock_server, KilledOnDrop};
use assert_cmd::Command;
use std::path::{Path, PathBuf};

const BIN: &str = env!("CARGO_BIN_EXE_kiln-qual");

/// A mock server (killed on drop) and its port.
struct Mock {
    _server: KilledOnDrop,
    port: u16,
}

fn mock(extra: &[&str]) -> Mock {
    let (_server, port) = mock_server(BIN, extra);
    Mock { _server, port }
}

/// `bench` against `m` writing `dir/name.json`; returns the document's path and the exit code.
fn bench(dir: &Path, tok: &Path, m: &Mock, name: &str, args: &[&str]) -> (PathBuf, i32) {
    let out = dir.join(format!("{name}.json"));
    let a = Command::new(BIN)
        .arg("bench")
        .args(["--url", &format!("http://127.0.0.1:{}", m.port)])
        .arg("--tokenizer")
        .arg(tok)
        .args(["--input-tokens", "uniform:5:30", "--output-tokens", "5"])
        // Timing truth on a shared machine is unknown: the report is what is under test.
        .args(["--tolerance-ms", "1000"])
        .args(args)
        .arg("--output")
        .arg(&out)
        .assert();
    let code = a.get_output().status.code().unwrap_or(-1);
    assert!(out.is_file(), "bench {name} wrote no document: {a:?}");
    (out, code)
}

#[test]
fn report_renders_a_bench_sweep_and_its_failures_in_every_format() {
    let d = tempfile::tempdir().unwrap();
    let tok = qual_test_fixtures::word_level_tokenizer(d.path(), &qual_bench::workload::WORDS);
    let ok = mock(&["--ttft-ms", "5", "--itl-ms", "1"]);
    let (sweep, code) = bench(
        d.path(),
        &tok,
        &ok,
        "sweep",
        &["--concurrency", "1,2,4", "--requests", "12"],
    );
    assert!(code == 0 || code == 6, "sweep exited {code}");
    let failing = mock(&["--error-event-after", "2"]);
    let (failed, code) = bench(
        d.path(),
        &tok,
        &failing,
        "failing",
        &["--concurrency", "2", "--requests", "6"],
    );
    assert_eq!(
        code, 5,
        "a run whose requests all failed is the server's failure"
    );

    let (html, junit, csv, md) = (
        d.path().join("r.html"),
        d.path().join("j.xml"),
        d.path().join("csv"),
        d.path().join("r.md"),
    );
    let a = Command::new(BIN)
        .arg("report")
        .arg(&sweep)
        .arg(&failed)
        .arg("--html")
        .arg(&html)
        .arg("--junit")
        .arg(&junit)
        .arg("--csv")
        .arg(&csv)
        .arg("--markdown")
        .arg(&md)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        stderr.contains("2 bench results (") && stderr.contains(" 0 refused"),
        "{stderr}"
    );

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h2 id=\"bench\">Bench results</h2>"));
    // Offline and self-contained: nothing to fetch, nothing to run.
    assert!(!page.contains("<script") && !page.contains(" src=") && !page.contains("<link"));
    for (title, n) in [
        ("TTFT distribution (CDF)", 3),
        ("E2E distribution (CDF)", 3),
        ("Output throughput against concurrency", 1),
        ("Latency percentiles against concurrency", 1),
    ] {
        let found = page.matches(&format!(">{title}</title>")).count();
        assert_eq!(found, n, "{title}");
    }
    for c in [1, 2, 4] {
        assert!(
            page.contains(&format!(">Request timeline of c={c} r0</title>")),
            "timeline of c={c}"
        );
    }
    assert!(page.contains("all 12 measured requests"));
    // The failing document: its verdict as written and its reasons with an example.
    assert!(page.contains("verdict: server_failed: c=2 run 0: 6 of 6 measured requests failed"));
    assert!(page.contains("c=2 r0: 6 "), "failure reasons listed");

    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"bench sweep.json\" tests=\"3\""),
        "{xml}"
    );
    for c in [1, 2, 4] {
        assert!(xml.contains(&format!(
            "<testcase name=\"c={c} r0\" classname=\"bench.sweep.json\""
        )));
    }
    assert!(
        xml.contains("<testsuite name=\"bench failing.json\" tests=\"1\" failures=\"1\""),
        "{xml}"
    );
    assert!(xml.contains("type=\"server_failed\""), "{xml}");

    let rows = std::fs::read_to_string(csv.join("bench-rows.csv")).unwrap();
    let mut lines = rows.lines();
    assert_eq!(lines.next(), Some(qual_report::bench::CSV_HEADER));
    for c in [1, 2, 4] {
        let lead = format!(",c={c},concurrency,{c},0,");
        assert!(
            rows.lines()
                .any(|l| l.contains(&lead) && l.contains(",measured_requests,12,")),
            "{rows}"
        );
        assert!(rows
            .lines()
            .any(|l| l.contains(&lead) && l.contains(",ttft_ms.p50,")));
    }
    assert!(
        rows.contains(",server_failed,c=2,concurrency,2,0,"),
        "{rows}"
    );
    assert!(
        rows.lines()
            .any(|l| l.contains(",failures.") && l.ends_with(",6,,")),
        "{rows}"
    );

    let summary = std::fs::read_to_string(&md).unwrap();
    assert!(summary.contains("### Bench results"));
    assert!(summary.contains("| c=4 | r0 | completed |"), "{summary}");

    // A document with a member bench never writes is refused with its pointer; the rest is
    // still reported.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sweep).unwrap()).unwrap();
    doc["points"][1]["runs"][0]["extra"] = serde_json::json!(1);
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, doc.to_string()).unwrap();
    let a = Command::new(BIN)
        .arg("report")
        .arg(&bad)
        .arg(&failed)
        .arg("--junit")
        .arg(&junit)
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        stderr.contains("/points/1/runs/0: unknown field `extra`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 bench result (0 passed, 1 not passed), 1 refused"),
        "{stderr}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("bench failing.json") && !xml.contains("bench bad.json"));
}
