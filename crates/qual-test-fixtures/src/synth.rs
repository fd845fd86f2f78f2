//! Generated receipt sets for the report's tests and benchmarks (moved here from `qual-report`,
//! which ships no test code): several hosts, backends and commits of a
//! correctness workload and a serving workload, each receipt valid under
//! `qual_receipt::validate`, optionally with run evidence (`case-result.json` per repetition,
//! bound by digest) and serving evidence (per-request records) laid out as the runner does.
//!
//! Values are deterministic functions of the receipt's position; every `fail_every`-th receipt
//! fails one required case with a reason that contains Markdown, XML and control characters,
//! so every format's escaping is exercised.
//!
//! [`bench`] generates `kiln-qual bench` result documents (sweeps, searches, refused and
//! failing runs) for the report's bench sections.

use qual_json::{Number, Object, Value};
use qual_receipt::model::{
    Artifact, ArtifactLocation, CaseResultEntry, Environment, Metric, OsIdentity, Qualification,
    Receipt, ResultStatus, Source, Verdict, WorkloadBinding,
};
use std::collections::BTreeMap;
use std::path::Path;

/// What to generate.
#[derive(Clone, Debug)]
pub struct Options {
    /// Host ids.
    pub hosts: Vec<String>,
    /// Backends.
    pub backends: Vec<String>,
    /// Commits per host × backend × workload.
    pub commits: usize,
    /// Runs of each commit (≥ 1).
    pub runs_per_commit: usize,
    /// Repetitions per case.
    pub repetitions: u32,
    /// Write run evidence (case results and, for serving cases, serving evidence).
    pub evidence: bool,
    /// Measured requests per serving evidence file.
    pub requests: usize,
    /// Every n-th receipt fails (0: none fails).
    pub fail_every: usize,
    /// Every n-th serving receipt is a run the measurement-validity gate refused (its serving
    /// evidence carries `metrics.validity.violations`, and the run fails; 0: none).
    pub validity_refused_every: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            hosts: vec!["host-a".into(), "host-b".into()],
            backends: vec!["cpu".into(), "rocm".into()],
            commits: 3,
            repetitions: 2,
            evidence: true,
            requests: 64,
            fail_every: 5,
            runs_per_commit: 1,
            validity_refused_every: 0,
        }
    }
}

/// A deterministic pseudo-random number in `[0, 1)` from a seed.
fn noise(seed: u64) -> f64 {
    let mut x = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(0x2545_F491_4F6C_DD1D);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn metric(name: &str, value: Number, unit: &str, aggregation: &str, lower: bool) -> Metric {
    Metric {
        name: name.into(),
        value,
        unit: unit.into(),
        aggregation: aggregation.into(),
        lower_is_better: lower,
    }
}

fn int(v: i64) -> Number {
    Number::Int(qual_json::Int::from(v))
}

fn float(v: f64) -> Number {
    // Rounded to 6 decimals so the text round-trips and stays short.
    Number::Float((v * 1e6).round() / 1e6)
}

/// Where the receipt id's timestamp and `started_at_utc` come from: 2026-07-01 plus `minutes`.
fn times(minutes: u64) -> (String, String, String) {
    let base = 1_782_864_000u64; // 2026-07-01T00:00:00Z
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(base + minutes * 60);
    let end = t + std::time::Duration::from_millis(4_500);
    (
        qual_receipt::model::id_timestamp(t),
        qual_receipt::model::format_utc_millis(t),
        qual_receipt::model::format_utc_millis(end),
    )
}

const EVIL: &str =
    "assertion failed: <b>&\"ttft\"</b> | [link](http://x) `code` *bold*\u{1b}[31m\nsecond line";

struct CaseSpec {
    id: &'static str,
    serving: Option<u64>,
}

const CORRECTNESS: [CaseSpec; 2] = [
    CaseSpec {
        id: "known-answer",
        serving: None,
    },
    CaseSpec {
        id: "decode-throughput",
        serving: None,
    },
];
const SERVING: [CaseSpec; 2] = [
    CaseSpec {
        id: "serve-c1",
        serving: Some(1),
    },
    CaseSpec {
        id: "serve-c4",
        serving: Some(4),
    },
];

/// Writes the set under `root` (receipts in `qualification/receipts/<backend>/<host>/`, run
/// evidence in `.qualification/runs/<id>/`). Returns the number of receipts written.
pub fn write_set(root: &Path, o: &Options) -> std::io::Result<usize> {
    let mut n = 0usize;
    let mut digests = BTreeMap::new();
    for (workload, rules) in [
        (
            "cpu-correctness-v1",
            r#"[{"scope":"result","result_id":"decode-throughput","metric":"tokens_per_second","operator":"not_less","absolute_tolerance":0,"relative_tolerance":0.1}]"#,
        ),
        (
            "serving-mock-v1",
            r#"[{"scope":"result","result_id":"serve-c4","metric":"ttft_ms.p50","operator":"not_greater","absolute_tolerance":1,"relative_tolerance":0.05},{"scope":"result","result_id":"serve-c4","metric":"output_tokens_per_second","operator":"not_less","absolute_tolerance":0,"relative_tolerance":0.2}]"#,
        ),
    ] {
        // Only what the report reads of a workload manifest: its comparison rules.
        let text = format!(
            "{{\"schema_version\":1,\"workload_id\":\"{workload}\",\"comparison_policy\":{{\"mode\":\"same_environment_performance\",\"metric_rules\":{rules}}}}}\n"
        );
        let dir = root.join("qualification/workloads");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("{workload}.json")), &text)?;
        digests.insert(workload, qual_json::sha256_prefixed(text.as_bytes()));
    }
    for (hi, host) in o.hosts.iter().enumerate() {
        for (bi, backend) in o.backends.iter().enumerate() {
            for (wi, (workload, kind, cases)) in [
                ("cpu-correctness-v1", "correctness", &CORRECTNESS),
                ("serving-mock-v1", "serving", &SERVING),
            ]
            .into_iter()
            .enumerate()
            {
                for (commit, run) in
                    (0..o.commits).flat_map(|c| (0..o.runs_per_commit.max(1)).map(move |r| (c, r)))
                {
                    n += 1;
                    let seq = n as u64;
                    let minutes =
                        commit as u64 * 60 + run as u64 * 20 + (hi * 7 + bi * 3 + wi) as u64;
                    let refused = kind == "serving"
                        && o.validity_refused_every > 0
                        && n.is_multiple_of(o.validity_refused_every);
                    let fail = refused || (o.fail_every > 0 && n.is_multiple_of(o.fail_every));
                    write_one(
                        root,
                        o,
                        (host, backend, workload, kind, &digests[workload]),
                        cases,
                        commit,
                        minutes,
                        seq,
                        (fail, refused),
                    )?;
                }
            }
        }
    }
    Ok(n)
}

#[allow(clippy::too_many_arguments)]
fn write_one(
    root: &Path,
    o: &Options,
    (host, backend, workload, kind, workload_sha256): (&str, &str, &str, &str, &str),
    cases: &[CaseSpec],
    commit: usize,
    minutes: u64,
    seq: u64,
    (fail, refused): (bool, bool),
) -> std::io::Result<()> {
    let (id_ts, started, finished) = times(minutes);
    let variant = backend.to_owned();
    let receipt_id = format!(
        "{id_ts}-{backend}-{host}-{workload}-{}-{seq}-v1",
        qual_receipt::model::receipt_identity(workload, &variant)
    );
    let commit_hex = format!(
        "{:08x}{:032x}",
        (commit as u32 + 1).wrapping_mul(2_654_435_761),
        commit
    );
    let run_dir = format!(".qualification/runs/{receipt_id}");
    let mut results = Vec::new();
    let mut artifacts = Vec::new();
    for (ci, case) in cases.iter().enumerate() {
        let failing = fail && ci == 0;
        let status = if failing {
            ResultStatus::Failed
        } else {
            ResultStatus::Passed
        };
        let drift = 1.0 + commit as f64 * 0.01;
        let base = |k: u64| noise(seq * 31 + ci as u64 * 7 + k);
        let mut per_rep: Vec<Vec<Metric>> = Vec::new();
        for rep in 0..o.repetitions {
            let r = base(u64::from(rep) * 101);
            let mut m = vec![
                metric(
                    "case_pass",
                    int(i64::from(!failing)),
                    "bool",
                    "exact",
                    false,
                ),
                metric("exit_code", int(i64::from(failing)), "code", "exact", false),
                metric(
                    "output_assertion_failures",
                    int(i64::from(failing)),
                    "count",
                    "sum",
                    true,
                ),
            ];
            match case.serving {
                Some(c) => {
                    m.push(metric(
                        "ttft_ms.p50",
                        float((18.0 + 4.0 * r + c as f64) * drift),
                        "ms",
                        "p50",
                        true,
                    ));
                    m.push(metric(
                        "output_tokens_per_second",
                        float(180.0 * c as f64 / drift * (0.9 + 0.2 * r)),
                        "tokens/s",
                        "rate",
                        false,
                    ));
                    m.push(metric(
                        "requests_failed",
                        int(i64::from(failing && !refused)),
                        "count",
                        "sum",
                        true,
                    ));
                }
                None if ci == 1 => {
                    m.push(metric(
                        "tokens_per_second",
                        float(95.0 / drift + 10.0 * r),
                        "tokens/s",
                        "mean",
                        false,
                    ));
                }
                None => {}
            }
            m.sort_by(|a, b| a.name.cmp(&b.name));
            per_rep.push(m);
        }
        let details = failing.then(|| EVIL.to_owned());
        results.push(CaseResultEntry {
            id: case.id.into(),
            required: true,
            status,
            duration_seconds: 1.5 * f64::from(o.repetitions),
            metrics: per_rep[0].clone(),
            details: details.clone(),
        });
        if o.evidence {
            for (rep, m) in per_rep.iter().enumerate() {
                let dir = format!("{run_dir}/cases/{:03}-{}-r{:03}", ci + 1, case.id, rep + 1);
                std::fs::create_dir_all(root.join(&dir))?;
                let mut cr = Object::new();
                cr.insert("case_id", Value::from(case.id));
                cr.insert(
                    "details",
                    details.as_deref().map_or(Value::Null, Value::from),
                );
                cr.insert("duration_seconds", Value::from(1.5));
                cr.insert("effective_config", Value::Object(Object::new()));
                cr.insert(
                    "metrics",
                    Value::Array(m.iter().map(Metric::to_value).collect()),
                );
                cr.insert("schema_version", Value::from(1u64));
                cr.insert("status", Value::from(status.as_str()));
                cr.insert("tolerances", Value::Array(Vec::new()));
                let bytes = qual_json::to_pretty_json(&Value::Object(cr)).into_bytes();
                let path = format!("{dir}/case-result.json");
                std::fs::write(root.join(&path), &bytes)?;
                artifacts.push(Artifact {
                    kind: "case_result".into(),
                    location: ArtifactLocation::LocalIgnored,
                    path,
                    sha256: qual_json::sha256_prefixed(&bytes),
                    bytes: bytes.len() as u64,
                });
                if let Some(c) = case.serving {
                    let ev = serve_evidence(
                        case.id,
                        (c, o.requests),
                        seq * 13 + rep as u64,
                        (failing && !refused, refused),
                    );
                    std::fs::write(
                        root.join(format!("{dir}/command-result.serve-evidence.json")),
                        ev,
                    )?;
                }
            }
        }
    }
    let verdict = if fail {
        Verdict::Failed
    } else {
        Verdict::Passed
    };
    let model = (kind == "serving").then(|| {
        qual_json::from_str(&format!(
            r#"{{"chat_template_hash":"sha256:{h}","config_hash":"sha256:{h}","id":"tiny-model","path":"/models/tiny","tokenizer_hash":"sha256:{h}","weight_files":[{{"bytes":104,"path":"model.safetensors","sha256":"sha256:{h}"}}]}}"#,
            h = "ab".repeat(32)
        ))
        .expect("synthetic model parses")
    });
    let mut parameters = Object::new();
    parameters.insert("variant_id", Value::from(variant.as_str()));
    let receipt = Receipt {
        receipt_id: receipt_id.clone(),
        created_at_utc: finished.clone(),
        source: Source {
            tree_hash_format: "kiln-source-tree-v1".into(),
            tree_hash: format!("sha256:{}", "cd".repeat(32)),
            git_commit: commit_hex,
            git_worktree_clean: true,
        },
        qualification: Qualification {
            kind: kind.into(),
            backend: backend.into(),
            profile: workload.into(),
            verdict,
            started_at_utc: started,
            finished_at_utc: finished,
            duration_seconds: 4.5,
            command: vec!["kiln-qual".into(), "run".into(), format!("qualification/workloads/{workload}.json")],
        },
        environment: Environment {
            host_id: host.into(),
            os: OsIdentity {
                name: "Debian GNU/Linux".into(),
                version: "12".into(),
                kernel: "6.8.0".into(),
                architecture: "x86_64".into(),
            },
            device: qual_json::from_str(
                r#"{"name":"Test Device","architecture":"x86_64","memory_bytes":1073741824,"unified_memory":true,"driver":"6.8.0"}"#,
            )
            .expect("synthetic device parses"),
            runtime: BTreeMap::from([("backend".to_owned(), backend.to_owned())]),
            compiler: BTreeMap::from([("rustc".to_owned(), "1.85.0".to_owned())]),
            platform: None,
        },
        model,
        workload: Some(WorkloadBinding {
            id: workload.into(),
            sha256: workload_sha256.to_owned(),
            seed: Value::from(17u64),
            parameters,
        }),
        effective_config: Value::Object(Object::new()),
        results,
        metrics: Vec::new(),
        artifacts,
        unsupported: if kind == "serving" { vec!["speculative_decoding".into()] } else { Vec::new() },
        notes: vec!["generated by qual_report::synth".into()],
    };
    let dir = root.join(format!("qualification/receipts/{backend}/{host}"));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join(format!("{receipt_id}.json")),
        qual_json::to_pretty_json(&receipt.to_value()),
    )
}

/// A serving evidence document with `n` measured requests at `concurrency`; `refused`: the
/// validity gate refused the run.
fn serve_evidence(
    case: &str,
    (concurrency, n): (u64, usize),
    seed: u64,
    (failing, refused): (bool, bool),
) -> String {
    let mut reqs = Vec::new();
    let mut slots = vec![0i64; concurrency as usize];
    for i in 0..n {
        let slot = i % slots.len();
        let send = slots[slot] + 50_000;
        let ttft = (15.0 + 10.0 * noise(seed + i as u64 * 3)) * 1e6;
        let mut t = send + ttft as i64;
        let mut events = Vec::new();
        for k in 0..16u64 {
            events.push(t.to_string());
            t += ((4.0 + 3.0 * noise(seed + i as u64 * 17 + k)) * 1e6) as i64;
        }
        slots[slot] = t;
        let ok = !(failing && i % 9 == 4);
        let status = if ok { "succeeded" } else { "failed" };
        let ev = if ok { events.join(",") } else { String::new() };
        reqs.push(format!(
            r#"{{"index":{i},"phase":"measured","send_ns":{send},"content_event_ns":[{ev}],"outcome":{{"status":"{status}"}}}}"#
        ));
    }
    let violation = r#""12 of 64 measured requests were sent late (limit 5%)""#;
    let reasons = if failing {
        r#"["1 measured request(s) failed"]"#.to_owned()
    } else if refused {
        format!("[{violation}]")
    } else {
        "[]".to_owned()
    };
    let validity = if refused {
        format!(r#","validity":{{"gated":[],"violations":[{violation}]}}"#)
    } else {
        String::new()
    };
    format!(
        r#"{{"schema":"kiln-qual.serve-evidence.v1","case_id":"{case}","status":"{}","reasons":{reasons},"load":{{"arrival":{{"mode":"closed_loop","concurrency":{concurrency}}},"measured":{n}}},"metrics":{{"output_tokens_per_second":{}{validity}}},"requests":[{}]}}"#,
        if failing || refused {
            "failed"
        } else {
            "passed"
        },
        180.0 * concurrency as f64 * (0.9 + 0.2 * noise(seed)),
        reqs.join(",")
    )
}

/// Generated `kiln-qual bench` result documents (`kiln-qual.bench-result.v1`) in the shape
/// `qual_bench::run::BenchResult` serializes, for the report's tests: a closed-loop sweep,
/// optionally with an SLA search, refused runs, failed requests and plot data.
pub mod bench {
    use serde_json::{json, Value};

    /// What to generate.
    #[derive(Clone, Debug)]
    pub struct BenchOptions {
        /// The concurrency of each load point, in the order run.
        pub levels: Vec<u64>,
        /// Runs per point.
        pub repeats: usize,
        /// Measured requests per run (0: an empty run).
        pub requests: usize,
        /// Points whose first run the validity gate refused.
        pub refused: Vec<usize>,
        /// Points whose first run had failed requests (a quarter of them, `missing_done`).
        pub failed: Vec<usize>,
        /// The SLA search's bracket `(knee, first_failing)`, when there is a search.
        pub search: Option<(Option<f64>, Option<f64>)>,
        /// Runs carry `plot` (documents before it do not).
        pub plot: bool,
        /// The verdict as written.
        pub verdict: Value,
    }

    impl Default for BenchOptions {
        fn default() -> BenchOptions {
            BenchOptions {
                levels: vec![1, 2, 4],
                repeats: 1,
                requests: 40,
                refused: Vec::new(),
                failed: Vec::new(),
                search: None,
                plot: true,
                verdict: json!({"status": "passed"}),
            }
        }
    }

    fn summary(n: usize, base: f64, spread: f64) -> Value {
        if n == 0 {
            return json!({"n": 0, "mean": null, "min": null, "max": null, "percentiles": [
                {"label": "p50", "value": null, "n": 0, "min_samples": 1, "below_minimum": true},
                {"label": "p99", "value": null, "n": 0, "min_samples": 662, "below_minimum": true}
            ]});
        }
        let pct = |label: &str, f: f64, min: usize| {
            let v = base + spread * f;
            json!({"label": label, "value": v, "n": n, "min_samples": min,
                   "below_minimum": n < min, "bound": {"lower": v, "upper": v}})
        };
        json!({"n": n, "mean": base + spread * 0.5, "min": base, "max": base + spread,
               "percentiles": [pct("p50", 0.5, 1), pct("p99", 0.99, 662)]})
    }

    fn quantiles(base: f64, spread: f64) -> Value {
        let q: Vec<f64> = (0..=100)
            .map(|i| base + spread * (f64::from(i) / 100.0).powi(2))
            .collect();
        json!(q)
    }

    fn run(o: &BenchOptions, point: usize, repeat: usize, c: u64) -> Value {
        let n = o.requests;
        let failed = if repeat == 0 && o.failed.contains(&point) {
            n / 4
        } else {
            0
        };
        let ok = n - failed;
        let refused = repeat == 0 && o.refused.contains(&point);
        let c = c as f64;
        let (ttft, e2e) = (10.0 + c, 40.0 + 3.0 * c + repeat as f64);
        let rps = (ok > 0).then(|| 20.0 * c / (1.0 + 0.1 * c));
        let headline = json!({
            "requests_per_second": rps, "output_tokens_per_second": rps.map(|r| r * 6.0),
            "goodput_requests_per_second": null, "slo_attainment": null,
            "ttft_ms.p50": (ok > 0).then_some(ttft + 1.0), "ttft_ms.p99": (ok > 0).then_some(ttft + 1.98),
            "itl_ms.p50": (ok > 0).then_some(3.5), "itl_ms.p99": (ok > 0).then_some(3.99),
            "e2e_ms.p50": (ok > 0).then_some(e2e + 2.5), "e2e_ms.p99": (ok > 0).then_some(e2e + 4.95),
            "tpot_ms.p50": (ok > 0).then_some(3.0),
            "error_rate": (n > 0).then(|| failed as f64 / n as f64),
        });
        let failures = if failed > 0 {
            json!([{"kind": "missing_done", "count": failed,
                    "example": "stream ended without data: [DONE] <b>*x*</b>",
                    "example_index": 3, "example_corpus_id": "synthetic-3",
                    "request_indices": (0..failed.min(20)).map(|i| 3 + 4 * i).collect::<Vec<_>>()}])
        } else {
            json!([])
        };
        let mut r = json!({
            "repeat": repeat,
            "stop": {"stop": "completed"},
            "valid": !refused,
            "invalid_reasons": if refused {
                json!(["invalid run: e2e_ms.p50 is known only to ±2 ms (tolerance 0.5 ms)"])
            } else {
                json!([])
            },
            "headline": headline,
            "undefined": {"goodput_requests_per_second": "no slo declared",
                          "slo_attainment": "no slo declared"},
            "distributions": {
                "ttft_ms": summary(ok, ttft, 2.0),
                "itl_ms": summary(ok * 5, 3.0, 1.0),
                "e2e_ms": summary(ok, e2e, 5.0),
                "tpot_ms": summary(ok, 2.5, 1.0),
            },
            "turns": [],
            "failures": failures,
            "time_series": [],
            "prompt_token_mismatches": if ok > 0 { json!(0) } else { Value::Null },
            "metrics": {"measured_requests": n, "succeeded_requests": ok,
                        "failed_requests": failed, "window_seconds": (ok > 0).then_some(1.5),
                        "output_tokens_total": ok * 6},
        });
        if o.plot {
            let timeline: Vec<Value> = (0..n)
                .map(|i| {
                    let send = (i as f64 / c).floor() * e2e;
                    let good = i % 4 != 3 || failed == 0;
                    json!({"index": i, "send_ms": send,
                           "first_ms": good.then_some(send + ttft),
                           "last_ms": good.then_some(send + e2e), "succeeded": good})
                })
                .collect();
            let (quant, from) = if ok > 0 {
                (
                    json!({"ttft_ms": quantiles(ttft, 2.0), "itl_ms": quantiles(3.0, 1.0),
                           "e2e_ms": quantiles(e2e, 5.0)}),
                    json!({"ttft_ms": ok, "itl_ms": ok * 5, "e2e_ms": ok}),
                )
            } else {
                (json!({}), json!({}))
            };
            r["plot"] = json!({"quantiles": quant, "quantiles_from": from,
                               "timeline": timeline, "timeline_of": n});
        }
        r
    }

    /// The document.
    pub fn bench_document(o: &BenchOptions) -> Value {
        let points: Vec<Value> = o
            .levels
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let runs: Vec<Value> = (0..o.repeats.max(1)).map(|r| run(o, i, r, c)).collect();
                let mean = |key: &str| {
                    let xs: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| r["headline"][key].as_f64())
                        .collect();
                    (!xs.is_empty()).then(|| {
                        json!({"mean": xs.iter().sum::<f64>() / xs.len() as f64,
                               "repeats": xs.len(), "half_width": null})
                    })
                };
                let mut intervals = serde_json::Map::new();
                for key in [
                    "requests_per_second",
                    "output_tokens_per_second",
                    "ttft_ms.p50",
                    "ttft_ms.p99",
                    "itl_ms.p50",
                    "itl_ms.p99",
                    "e2e_ms.p50",
                    "e2e_ms.p99",
                    "error_rate",
                ] {
                    if let Some(v) = mean(key) {
                        intervals.insert(key.into(), v);
                    }
                }
                json!({"point": {"mode": "concurrency", "concurrency": c},
                       "label": format!("c={c}"), "runs": runs, "intervals": intervals,
                       "passes": !o.refused.contains(&i) && !o.failed.contains(&i)})
            })
            .collect();
        let search = o.search.map(|(knee, first_failing)| {
            json!({"search": {"low": 1.0, "high": 8.0, "resolution": 1.0, "min_attainment": 0.9},
                   "knee": knee, "first_failing": first_failing,
                   "conclusion": "bisection converged to a bracket of 1 (resolution 1)"})
        });
        json!({
            "schema": "kiln-qual.bench-result.v1",
            "tool": "kiln-qual 0.1.0",
            "config": {"url": "http://127.0.0.1:1", "stream": true},
            "workload": {"sessions": o.requests, "turns": o.requests,
                         "request_set_sha256": format!("sha256:{}", "0".repeat(64))},
            "points": points,
            "search": search,
            "verdict": o.verdict,
            "definitions": {"percentile_method": "type 7"},
        })
    }
}
