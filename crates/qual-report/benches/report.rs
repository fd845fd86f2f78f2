//! `report` over 10 000 generated receipts (5 hosts × 4 backends × 2 workloads × 250 commits,
//! with run evidence and serving evidence), against a baseline measured in the same run: simply
//! reading and strictly parsing the same files (receipts, case results, serving evidence) on
//! the same number of threads. Prints both times and their ratio; exits 1 when the report takes
//! 10 s or more (the budget on 2 cores).
//!
//! Run: `cargo bench -p qual-report --bench report` (set `REPORT_BENCH_RECEIPTS` for another
//! size).

use qual_test_fixtures::synth::{self, Options};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if e.file_type().expect("file type").is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

fn main() {
    let wanted: usize = std::env::var("REPORT_BENCH_RECEIPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        hosts: (0..5).map(|i| format!("host-{i}")).collect(),
        backends: vec!["cpu".into(), "rocm".into(), "cuda".into(), "metal".into()],
        commits: wanted.div_ceil(40),
        repetitions: 1,
        evidence: true,
        requests: 16,
        fail_every: 7,
        runs_per_commit: 1,
        validity_refused_every: 0,
    };
    let t = Instant::now();
    let n = synth::write_set(tmp.path(), &opts).expect("generate");
    let mut all = Vec::new();
    files(tmp.path(), &mut all);
    eprintln!(
        "generated {n} receipts ({} JSON files) in {:.2?}",
        all.len(),
        t.elapsed()
    );
    let threads = std::thread::available_parallelism().map_or(1, usize::from);

    // Baseline: read and strictly parse every file, nothing else.
    let t = Instant::now();
    let chunk = all.len().div_ceil(threads);
    let parsed: usize = std::thread::scope(|s| {
        all.chunks(chunk.max(1))
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .filter(|p| {
                            let limits = qual_json::Limits {
                                max_bytes: 256 * 1024 * 1024,
                                ..qual_json::Limits::default()
                            };
                            qual_json::load_file(p, limits).is_ok()
                        })
                        .count()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().expect("baseline thread"))
            .sum()
    });
    let baseline = t.elapsed();
    assert_eq!(parsed, all.len(), "every generated file parses");

    // The report: collect (read, validate, evidence) and render all four formats.
    let t = Instant::now();
    let set = qual_report::collect(&[tmp.path().join("qualification/receipts")]);
    let collected = t.elapsed();
    assert_eq!(set.receipts.len(), n, "refused: {:?}", set.refused.first());
    let md = qual_report::markdown::render(&set);
    let xml = qual_report::junit::render(&set);
    let csv = qual_report::csv::render(&set);
    let html = qual_report::html::render(&set);
    let total = t.elapsed();
    println!(
        "report bench: {n} receipts, {} files, {threads} threads",
        all.len()
    );
    println!(
        "  baseline (read + strict parse): {:.3} s",
        baseline.as_secs_f64()
    );
    println!(
        "  report (collect {:.3} s + render {:.3} s): {:.3} s  [markdown {} KiB, junit {} KiB, csv {} KiB, html {} KiB]",
        collected.as_secs_f64(),
        (total - collected).as_secs_f64(),
        total.as_secs_f64(),
        md.len() / 1024,
        xml.len() / 1024,
        csv.len() / 1024,
        html.len() / 1024
    );
    println!(
        "  ratio report / baseline: {:.2}",
        total.as_secs_f64() / baseline.as_secs_f64()
    );
    if total.as_secs_f64() >= 10.0 {
        println!("  FAIL: budget is 10 s");
        std::process::exit(1);
    }
    println!("  ok: within the 10 s budget");
}
