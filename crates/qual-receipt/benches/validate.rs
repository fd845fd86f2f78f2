//! Validates 1 000 receipts in one process and prints receipts/s.
//!
//! The receipts are built in memory from one hand-written correctness receipt with 8 results of
//! 3 metrics each and 26 artifacts (the shape of a real runner receipt), each copy with its own
//! receipt id, so nothing is cached between validations. Target: at least 5 000 receipts/s on
//! one core (a full `receipt check` of the 30-file reference corpus then takes well under a
//! second); the figure is printed, never asserted. Baseline, measured in the same run: a plain
//! `serde_json` parse of the same receipts' canonical text (what reading each document once
//! costs); the ratio says what validation costs beyond that.

use qual_json::Value;
use std::time::Instant;

fn receipt(i: usize) -> Value {
    let mut results = Vec::new();
    for r in 0..8 {
        results.push(format!(
            r#"{{"id":"case-{r}","required":true,"status":"passed","duration_seconds":1.5,
            "details":null,"metrics":[
              {{"name":"case_pass","value":1,"unit":"bool","aggregation":"exact","lower_is_better":false}},
              {{"name":"exit_code","value":0,"unit":"code","aggregation":"exact","lower_is_better":false}},
              {{"name":"output_assertion_failures","value":0,"unit":"count","aggregation":"sum","lower_is_better":true}}]}}"#
        ));
    }
    let mut artifacts = Vec::new();
    for a in 0..26 {
        artifacts.push(format!(
            r#"{{"kind":"case_stdout","location":"local_ignored","path":".qualification/runs/r/cases/{a:03}/stdout.txt","sha256":"sha256:{}","bytes":{a}}}"#,
            "ab".repeat(32)
        ));
    }
    let text = format!(
        r#"{{"schema_version":1,"receipt_id":"bench-receipt-{i:05}","created_at_utc":"2026-07-28T22:25:40.000Z",
        "source":{{"tree_hash_format":"kiln-source-tree-v1","tree_hash":"sha256:{h}","git_commit":"{c}","git_worktree_clean":true}},
        "qualification":{{"kind":"correctness","backend":"rocm","profile":"core","verdict":"passed",
          "started_at_utc":"2026-07-28T22:25:35.119Z","finished_at_utc":"2026-07-28T22:25:39.900Z","duration_seconds":4.78,
          "command":["kiln-qual","run","qualification/workloads/core.json","--variant","rocm"]}},
        "environment":{{"host_id":"bench-host","os":{{"name":"Linux","version":"6.8","kernel":"6.8.0","architecture":"x86_64"}},
          "device":{{"name":"GPU","architecture":"gfx1151","memory_bytes":1024,"unified_memory":true,"driver":"6.1"}},
          "runtime":{{"backend":"rocm","rocm":"6.1"}},"compiler":{{"rustc":"1.85"}}}},
        "model":null,"workload":{{"id":"core","sha256":"sha256:{h}","seed":7,"parameters":{{"variant_id":"rocm"}}}},
        "effective_config":{{"scheduler":{{"max_batch":2,"enabled":true}}}},
        "results":[{results}],"metrics":[],"artifacts":[{artifacts}],"unsupported":[],"notes":["bench"]}}"#,
        h = "cd".repeat(32),
        c = "0123456789abcdef0123456789abcdef01234567",
        results = results.join(","),
        artifacts = artifacts.join(","),
    );
    qual_json::from_str(&text).expect("bench receipt parses")
}

fn main() {
    let receipts: Vec<Value> = (0..1000).map(receipt).collect();
    assert!(
        qual_receipt::validate::validate(&receipts[0]).is_empty(),
        "bench receipt must be valid: {:?}",
        qual_receipt::validate::validate(&receipts[0])
    );
    let start = Instant::now();
    let mut invalid = 0usize;
    for r in &receipts {
        if !qual_receipt::validate::validate(r).is_empty() {
            invalid += 1;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(invalid, 0);
    let texts: Vec<String> = receipts
        .iter()
        .map(qual_json::to_canonical_string)
        .collect();
    let start = Instant::now();
    for t in &texts {
        let v: serde_json::Value = serde_json::from_str(t).expect("canonical text parses");
        std::hint::black_box(v);
    }
    let baseline = start.elapsed().as_secs_f64();
    println!(
        "validated {} receipts in {:.3} s: {:.0} receipts/s (target >= 5000 receipts/s)",
        receipts.len(),
        elapsed,
        receipts.len() as f64 / elapsed
    );
    println!(
        "baseline serde_json parse of the same receipts: {:.3} s ({:.0} receipts/s); validate / parse time ratio {:.2}x",
        baseline,
        receipts.len() as f64 / baseline,
        elapsed / baseline
    );
}
