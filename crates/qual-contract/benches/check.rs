//! Benchmark (not a test): `workload check` throughput over the Kiln corpus (431 files:
//! 31 real workloads + 400 mutants) in one process.
//!
//! Prints files/s for the full check (strict parse + semantic validation + digest), the same
//! for a plain `serde_json` parse of the same bytes as an in-process baseline, and, when
//! `python3` exists, the real workloads loaded by Python's `json` module in one `python3`
//! process (timed inside it, best of 20 rounds) — the first step of the original Python
//! implementation, measured in the same run, as the cross-language baseline. Then the output
//! assertions of the real workloads validated as `workload check` does
//! (`pattern::validate_assertion`: parse and size bound, no matcher), against compiling each
//! one as the runner does (`pattern::compile_assertion`), the same-process baseline that
//! validation used to be. Whole-process comparisons with the original implementation are
//! `scripts/bench-vs-original`. Run: `cargo bench -p qual-contract --bench check`.

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::time::Instant;

fn files() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kiln-corpus");
    let mut out = Vec::new();
    for dir in ["workloads", "workload-mutants"] {
        let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json") {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    if out.is_empty() {
        eprintln!("note: ../shared/kiln-corpus is absent; using the bundled example workloads");
        let ex = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../qualification/workloads");
        for e in std::fs::read_dir(ex).unwrap().flatten() {
            out.push((
                e.path().display().to_string(),
                std::fs::read(e.path()).unwrap(),
            ));
        }
    }
    out.sort();
    out
}

fn main() {
    let files = files();
    let real: Vec<_> = files
        .iter()
        .filter(|(p, _)| p.contains("/workloads/"))
        .collect();
    let rounds = 20;
    let t = Instant::now();
    let mut valid = 0usize;
    for _ in 0..rounds {
        for (_, bytes) in &files {
            if qual_contract::check_bytes(bytes).is_ok() {
                let _ = qual_json::sha256_prefixed(bytes);
                valid += 1;
            }
        }
    }
    let check = t.elapsed().as_secs_f64() / rounds as f64;
    let t = Instant::now();
    for _ in 0..rounds {
        for (_, bytes) in &files {
            let _: Result<serde_json::Value, _> = serde_json::from_slice(bytes);
        }
    }
    let serde = t.elapsed().as_secs_f64() / rounds as f64;
    let t = Instant::now();
    for _ in 0..rounds {
        for (_, bytes) in &real {
            assert!(qual_contract::check_bytes(bytes).is_ok());
        }
    }
    let real_time = t.elapsed().as_secs_f64() / rounds as f64;
    let n = files.len() as f64;
    println!(
        "workload check: {} files, {} valid per round",
        files.len(),
        valid / rounds
    );
    println!(
        "  full check (strict parse + validate + digest): {:>10.0} files/s ({:.2} ms per round)",
        n / check,
        check * 1e3
    );
    println!(
        "  baseline serde_json parse only:                {:>10.0} files/s ({:.2} ms per round)",
        n / serde,
        serde * 1e3
    );
    println!(
        "  full check / parse-only time ratio:            {:>10.2}x",
        check / serde
    );
    if real.is_empty() {
        return;
    }
    println!(
        "  {} real workloads, full check: {:.2} ms per round",
        real.len(),
        real_time * 1e3
    );
    match python_json_load_seconds(&real.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>()) {
        Some(py) => println!(
            "  baseline python3 json.load (parse only) of the same {} files: {:.2} ms per round; full check / python3 parse time ratio {:.2}x",
            real.len(),
            py * 1e3,
            real_time / py
        ),
        None => println!("  python3 baseline skipped: python3 is not available"),
    }
    assertions(&real);
}

/// Output assertions: validation (no matcher) vs full compilation, same patterns, same process.
fn assertions(real: &[&(String, Vec<u8>)]) {
    let mut patterns = Vec::new();
    for (_, bytes) in real {
        let v = qual_json::from_slice(bytes).expect("real workloads parse");
        for variant in v
            .get("variants")
            .and_then(|x| x.as_array())
            .into_iter()
            .flatten()
        {
            for case in variant
                .get("cases")
                .and_then(|x| x.as_array())
                .into_iter()
                .flatten()
            {
                let items = case.get("output_assertions").and_then(|x| x.as_array());
                for a in items.into_iter().flatten() {
                    if let Some(p) = a.get("pattern").and_then(|x| x.as_str()) {
                        patterns.push(p.to_owned());
                    }
                }
            }
        }
    }
    patterns.sort();
    patterns.dedup();
    let t = Instant::now();
    for p in &patterns {
        assert!(qual_contract::pattern::compile_assertion(p).is_ok());
    }
    let compile = t.elapsed().as_secs_f64();
    // Validation remembers verdicts per process, so time the first (uncached) pass only.
    let t = Instant::now();
    for p in &patterns {
        assert!(qual_contract::pattern::validate_assertion(p).is_ok());
    }
    let validate = t.elapsed().as_secs_f64();
    println!(
        "  {} distinct output assertions: validate {:.2} ms, compile (baseline) {:.2} ms; compile / validate {:.1}x",
        patterns.len(),
        validate * 1e3,
        compile * 1e3,
        compile / validate
    );
}

/// Best-of-20 seconds for Python's `json.load` of `paths` in one `python3` process.
fn python_json_load_seconds(paths: &[String]) -> Option<f64> {
    let script = "import json,sys,time\nbest=1e9\nfor _ in range(20):\n t=time.perf_counter()\n for p in sys.argv[1:]:\n  json.load(open(p,'rb'))\n best=min(best,time.perf_counter()-t)\nprint(best)\n";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(paths)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}
