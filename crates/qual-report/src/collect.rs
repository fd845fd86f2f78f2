//! Finding and reading receipts and their evidence.
//!
//! Every path given is a receipt file or a directory searched recursively for `*.json` files
//! (symlinked directories are not followed; a `runs/` directory inside `.qualification/` is run
//! evidence, not receipts, and is skipped; a JSON document found there without a `receipt_id`
//! — a workload, a recipe — is counted as skipped, while a broken or invalid receipt is
//! refused). Each file is read strictly and validated with
//! `qual_receipt::validate`; a file that fails is *refused* with its reasons, never shown as a
//! result. Files are read on every available core; the output order does not depend on it
//! (newest run first, then by receipt id).
//!
//! Run evidence is optional. When the receipt's `case_result` artifacts
//! (`.qualification/runs/<id>/cases/<iii>-<case>-r<rrr>/case-result.json`) are found under one
//! of the receipt file's ancestor directories, each repetition's case result is read — only when
//! its bytes still hash to the digest and size the receipt records — and so is any
//! `*.serve-evidence.json` in the same case directory (serving evidence is not digest-bound by
//! the receipt; the report says so). Evidence that is missing, changed or unreadable is noted
//! and left out; it never changes a verdict.

use qual_documents::Kind;
use qual_json::{Number, Value};
use qual_receipt::validate;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest case result read (the runner bounds them far below this).
const MAX_CASE_RESULT_BYTES: usize = 16 * 1024 * 1024;
/// Largest serving evidence read.
const MAX_SERVE_EVIDENCE_BYTES: usize = 256 * 1024 * 1024;

/// Everything a report shows.
#[derive(Clone, Debug, Default)]
pub struct ReportSet {
    /// Valid receipts, newest run first (then by receipt id).
    pub receipts: Vec<ReceiptView>,
    /// Files that were not valid receipts, with why, in path order.
    pub refused: Vec<Refused>,
    /// Evidence that was looked for but not used, one line each.
    pub evidence_notes: Vec<String>,
    /// JSON files found in directories that are not receipts at all (no `receipt_id`: a
    /// workload, a recipe), skipped. A file named on the command line is never skipped.
    pub skipped: usize,
    /// `kiln-qual compare --json` documents among the inputs, in path order.
    pub comparisons: Vec<crate::comparison::ComparisonView>,
    /// Serving-campaign records found (by their `schema`), in path order: not read here
    /// (`qual_campaign::report` reads and verifies them into [`ReportSet::campaigns`]).
    pub campaign_files: Vec<PathBuf>,
    /// Serving campaigns, verified and read.
    pub campaigns: Vec<crate::campaign::CampaignView>,
    /// `kiln-qual bench` result documents among the inputs (by their `schema`), read
    /// strictly, in path order.
    pub benches: Vec<crate::bench::BenchView>,
}

/// A file that is not a valid receipt.
#[derive(Clone, Debug)]
pub struct Refused {
    /// The path as found.
    pub path: PathBuf,
    /// Every reason (load error or violations), unescaped.
    pub reasons: Vec<String>,
}

/// One valid receipt, in the terms a report uses.
#[derive(Clone, Debug)]
pub struct ReceiptView {
    /// Where it was read.
    pub path: PathBuf,
    /// `receipt_id`.
    pub receipt_id: String,
    /// `workload.id`, or the profile of an environment receipt without a workload.
    pub workload: String,
    /// `workload.parameters.variant_id`, or `-`.
    pub variant: String,
    /// `qualification.backend`.
    pub backend: String,
    /// `qualification.kind`.
    pub kind: String,
    /// `environment.host_id`.
    pub host: String,
    /// `source.git_commit`.
    pub commit: String,
    /// `qualification.started_at_utc`.
    pub started_at: String,
    /// The start as milliseconds since the epoch (for ordering and time axes).
    pub started_ms: i128,
    /// `qualification.duration_seconds`.
    pub duration_seconds: f64,
    /// `qualification.verdict`.
    pub verdict: String,
    /// `results[]`.
    pub cases: Vec<CaseView>,
    /// `unsupported[]`.
    pub unsupported: Vec<String>,
    /// `notes[]`.
    pub notes: Vec<String>,
    /// Whether its Vulkan device is a CPU implementation, so it does not establish
    /// `qual_receipt::render::SOFTWARE_DEVICE_NOTE`.
    pub software_device: bool,
    /// Whether the run directory was found.
    pub run_evidence: bool,
    /// The workload's comparison rules, when its manifest was found next to the receipt (an
    /// ancestor directory holding the path the receipt's command names) with the exact digest
    /// the receipt records.
    pub rules: Vec<PolicyRule>,
}

/// One `comparison_policy.metric_rules[]` entry, as the trend charts draw it.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyRule {
    /// `result_id` (rules of `result` scope; `None` for other scopes).
    pub result_id: Option<String>,
    /// Metric name.
    pub metric: String,
    /// `equal`, `not_greater` or `not_less`.
    pub operator: String,
    /// Absolute tolerance.
    pub absolute: f64,
    /// Relative tolerance (of the baseline's magnitude).
    pub relative: f64,
}

impl PolicyRule {
    /// The band a candidate must stay in against `base`: `(low, high)`, unbounded sides as
    /// `None` (the tolerance is `max(absolute, relative × |base|)`, as `compare` applies it).
    pub fn band(&self, base: f64) -> (Option<f64>, Option<f64>) {
        let tol = self.absolute.max(self.relative * base.abs());
        match self.operator.as_str() {
            "not_greater" => (None, Some(base + tol)),
            "not_less" => (Some(base - tol), None),
            _ => (Some(base - tol), Some(base + tol)),
        }
    }
}

/// Workload manifests already read: path → (sha256 of the bytes, rules).
type PolicyCache =
    std::sync::Mutex<std::collections::HashMap<PathBuf, Option<(String, Vec<PolicyRule>)>>>;

impl ReportSet {
    /// The ids of the receipts whose Vulkan device is a CPU implementation.
    pub fn software_device_receipts(&self) -> Vec<&str> {
        self.receipts
            .iter()
            .filter(|r| r.software_device)
            .map(|r| r.receipt_id.as_str())
            .collect()
    }
}

impl ReceiptView {
    /// Whether the verdict is `passed`.
    pub fn passed(&self) -> bool {
        self.verdict == "passed"
    }

    /// Whether the measurement-validity gate refused any serving repetition of this run (its
    /// timings are not measurements to compare).
    pub fn validity_refused(&self) -> bool {
        self.cases.iter().any(|c| {
            c.repetitions.iter().any(|p| {
                p.serve
                    .as_ref()
                    .is_some_and(|s| !s.validity_violations.is_empty())
            })
        })
    }

    /// The matrix row this receipt belongs to: workload, variant, backend, host.
    pub fn row_key(&self) -> (String, String, String, String) {
        (
            self.workload.clone(),
            self.variant.clone(),
            self.backend.clone(),
            self.host.clone(),
        )
    }
}

/// One `results[]` entry and its repetitions.
#[derive(Clone, Debug)]
pub struct CaseView {
    /// Case id.
    pub id: String,
    /// Whether it decides the verdict.
    pub required: bool,
    /// Aggregated status (`passed`, `failed`, `skipped`).
    pub status: String,
    /// Aggregated details.
    pub details: Option<String>,
    /// Sum of the repetitions' durations.
    pub duration_seconds: f64,
    /// Aggregated metrics.
    pub metrics: Vec<MetricObs>,
    /// Per-repetition evidence, in order (empty without run evidence).
    pub repetitions: Vec<Repetition>,
}

/// One metric value.
#[derive(Clone, Debug)]
pub struct MetricObs {
    /// Metric name.
    pub name: String,
    /// The value as a float (for plots).
    pub value: f64,
    /// The value exactly as written (`1`, `20.1972365`).
    pub text: String,
    /// Unit.
    pub unit: String,
    /// Whether lower is better.
    pub lower_is_better: bool,
}

/// One execution of a case, from its retained `case-result.json`.
#[derive(Clone, Debug)]
pub struct Repetition {
    /// 1-based repetition number (`r001` is 1).
    pub number: u32,
    /// Status.
    pub status: String,
    /// Details.
    pub details: Option<String>,
    /// Duration.
    pub duration_seconds: f64,
    /// Metrics.
    pub metrics: Vec<MetricObs>,
    /// Serving evidence next to it, if any.
    pub serve: Option<ServeView>,
}

/// What the plots need from one serving evidence file.
#[derive(Clone, Debug, Default)]
pub struct ServeView {
    /// `load.arrival.concurrency` (closed loop), if declared.
    pub concurrency: Option<u64>,
    /// `load.arrival.mode`.
    pub arrival: String,
    /// TTFT of each successful measured request, ms, sorted.
    pub ttft_ms: Vec<f64>,
    /// Every inter-token gap of successful measured requests, ms, sorted.
    pub itl_ms: Vec<f64>,
    /// E2E of each successful measured request, ms, sorted.
    pub e2e_ms: Vec<f64>,
    /// Per measured request: (send, first content, last content) in ms from the first send;
    /// failed requests have no content times.
    pub timeline: Vec<(f64, Option<f64>, Option<f64>)>,
    /// Measured requests that did not succeed.
    pub failed_requests: usize,
    /// Output tokens per second, if recorded.
    pub output_tokens_per_second: Option<f64>,
    /// The evidence's own failure reasons.
    pub reasons: Vec<String>,
    /// Timing statistics with their error bound (`metric_rows` entries that carry one):
    /// (name, value, lower, upper; upper infinite when unbounded above), in row order.
    pub bounds: Vec<(String, f64, f64, f64)>,
    /// The statistics the validity gate held to the tolerance.
    pub gated: Vec<String>,
    /// Why the measurement-validity gate refused the run (`metrics.validity.violations`);
    /// empty when it accepted it.
    pub validity_violations: Vec<String>,
}

/// Reads every receipt under `paths` with their evidence.
pub fn collect(paths: &[PathBuf]) -> ReportSet {
    let mut found = Vec::new();
    let mut set = ReportSet::default();
    let mut files: Vec<(PathBuf, bool)> = Vec::new();
    for p in paths {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                found.clear();
                walk(p, &mut found);
                files.extend(found.drain(..).map(|f| (f, false)));
            }
            _ => files.push((p.clone(), true)),
        }
    }
    files.sort();
    files.dedup_by(|a, b| {
        let same = a.0 == b.0;
        if same {
            b.1 |= a.1;
        }
        same
    });
    let cache = PolicyCache::default();
    let loaded = parallel_map(&files, |(p, explicit)| read_one(p, *explicit, &cache));
    for ((path, _), outcome) in files.into_iter().zip(loaded) {
        match outcome {
            Ok(Some(Item::Receipt(view, notes))) => {
                set.receipts.push(view);
                set.evidence_notes.extend(notes);
            }
            Ok(Some(Item::Comparison(c))) => set.comparisons.push(c),
            Ok(Some(Item::Campaign)) => set.campaign_files.push(path),
            Ok(Some(Item::Bench(b))) => set.benches.push(*b),
            Ok(None) => set.skipped += 1,
            Err(reasons) => set.refused.push(Refused { path, reasons }),
        }
    }
    set.receipts.sort_by(|a, b| {
        b.started_ms
            .cmp(&a.started_ms)
            .then_with(|| a.receipt_id.cmp(&b.receipt_id))
    });
    set
}

/// `f` over `items` on every available core, results in input order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let mut parts: Vec<Vec<(usize, R)>> = Vec::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        out.push((i, f(item)));
                    }
                    out
                })
            })
            .collect();
        for h in handles {
            parts.push(h.join().expect("report reader thread"));
        }
    });
    let mut all: Vec<(usize, R)> = parts.into_iter().flatten().collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        out.push(dir.to_path_buf());
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            let is_runs =
                e.file_name() == "runs" && dir.file_name().is_some_and(|n| n == ".qualification");
            if !is_runs {
                walk(&path, out);
            }
        } else if path.extension().is_some_and(|x| x == "json")
            && !path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".serve-evidence.json"))
        {
            out.push(path);
        }
    }
}

fn s(v: &Value, path: &[&str]) -> String {
    at(v, path)
        .and_then(Value::as_str)
        .unwrap_or("-")
        .to_owned()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    Some(cur)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn metrics(v: Option<&Value>) -> Vec<MetricObs> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let value = m.get("value")?;
            let text = match value {
                Value::Number(Number::Int(i)) => {
                    format!("{}{}", if i.is_negative() { "-" } else { "" }, i.digits())
                }
                Value::Number(Number::Float(f)) => qual_json::python_float_repr(*f),
                _ => return None,
            };
            Some(MetricObs {
                name: m.get("name")?.as_str()?.to_owned(),
                value: value.as_f64()?,
                text,
                unit: m
                    .get("unit")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                lower_is_better: m.get("lower_is_better").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect()
}

/// What one input file was.
enum Item {
    Receipt(ReceiptView, Vec<String>),
    Comparison(crate::comparison::ComparisonView),
    /// A serving-campaign record, left to `qual-campaign`.
    Campaign,
    /// A bench result document.
    Bench(Box<crate::bench::BenchView>),
}

type Loaded = Result<Option<Item>, Vec<String>>;

fn read_one(path: &Path, explicit: bool, cache: &PolicyCache) -> Loaded {
    // Read once; the document table says what it is (receipts by the receipt loader's rules).
    let src = qual_documents::read(path).map_err(|e| vec![e.to_string()])?;
    let kind = src.kind();
    let value = src.into_value().map_err(|e| vec![e.to_string()])?;
    if value.as_object().is_none() {
        let e = validate::LoadError::NotAnObject {
            path: path.display().to_string(),
        };
        return Err(vec![e.to_string()]);
    }
    match kind {
        Some(Kind::Comparison) => {
            return crate::comparison::read(path.to_path_buf(), &value)
                .map(|c| Some(Item::Comparison(c)));
        }
        Some(Kind::CampaignReceipt | Kind::CampaignSummary) => return Ok(Some(Item::Campaign)),
        Some(Kind::BenchResult) => {
            return crate::bench::read(path.to_path_buf(), &value)
                .map(|b| Some(Item::Bench(Box::new(b))))
                .map_err(|v| v.iter().map(ToString::to_string).collect());
        }
        _ => {}
    }
    if !explicit && value.get("receipt_id").is_none() {
        return Ok(None);
    }
    let violations = validate::validate(&value);
    if !violations.is_empty() {
        return Err(violations
            .iter()
            .map(|v| validate::Dotted(v).to_string())
            .collect());
    }
    let started_at = s(&value, &["qualification", "started_at_utc"]);
    let workload = match at(&value, &["workload", "id"]).and_then(Value::as_str) {
        Some(id) => id.to_owned(),
        None => s(&value, &["qualification", "profile"]),
    };
    let cases = at(&value, &["results"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| CaseView {
            id: s(r, &["id"]),
            required: r.get("required").and_then(Value::as_bool) == Some(true),
            status: s(r, &["status"]),
            details: r.get("details").and_then(Value::as_str).map(str::to_owned),
            duration_seconds: r
                .get("duration_seconds")
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
            metrics: metrics(r.get("metrics")),
            repetitions: Vec::new(),
        })
        .collect();
    let mut view = ReceiptView {
        path: path.to_path_buf(),
        receipt_id: s(&value, &["receipt_id"]),
        workload,
        variant: s(&value, &["workload", "parameters", "variant_id"]),
        backend: s(&value, &["qualification", "backend"]),
        kind: s(&value, &["qualification", "kind"]),
        host: s(&value, &["environment", "host_id"]),
        commit: s(&value, &["source", "git_commit"]),
        started_ms: validate::parse_utc_timestamp(&started_at).unwrap_or(0),
        started_at,
        duration_seconds: at(&value, &["qualification", "duration_seconds"])
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
        verdict: s(&value, &["qualification", "verdict"]),
        cases,
        unsupported: strings(value.get("unsupported")),
        notes: strings(value.get("notes")),
        software_device: qual_receipt::render::software_device_note(&value).is_some(),
        run_evidence: false,
        rules: Vec::new(),
    };
    let contradicted = verify_against_run(path, &value, &view.receipt_id);
    if !contradicted.is_empty() {
        return Err(contradicted);
    }
    view.rules = policy_rules(path, &value, cache);
    let notes = read_evidence(path, &value, &mut view);
    Ok(Some(Item::Receipt(view, notes)))
}

/// `receipt verify`'s checks ([`qual_receipt::verify::verify_run`]) whenever the receipt's
/// retained run directory is present: under the nearest ancestor of the receipt holding
/// `.qualification/runs/<receipt_id>/run-config.json` (the runner's own record), which is
/// taken as the repository root. Every finding is returned (the receipt is then refused,
/// never rendered); none when it agrees or when no run record is there (the report then
/// shows the receipt on its own checks: removing the record is no more than removing the
/// whole run directory, which leaves a receipt as unverified as it was).
fn verify_against_run(path: &Path, receipt: &Value, receipt_id: &str) -> Vec<String> {
    if receipt_id.is_empty() || receipt_id.contains(['/', '\\']) || receipt_id.starts_with('.') {
        return Vec::new();
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let Some(root) = abs.ancestors().skip(1).find(|a| {
        a.join(".qualification/runs")
            .join(receipt_id)
            .join("run-config.json")
            .is_file()
    }) else {
        return Vec::new();
    };
    qual_receipt::verify::verify_run(receipt, root, None)
        .iter()
        .map(|f| format!("contradicted by its run directory: {f}"))
        .collect()
}

/// The comparison rules of the workload the receipt names, when its manifest is found under an
/// ancestor of the receipt at the path the receipt's command names and hashes to the digest
/// the receipt records (otherwise none: a changed manifest never draws a band).
fn policy_rules(receipt_path: &Path, receipt: &Value, cache: &PolicyCache) -> Vec<PolicyRule> {
    let Some(want) = at(receipt, &["workload", "sha256"]).and_then(Value::as_str) else {
        return Vec::new();
    };
    let Some(rel) = at(receipt, &["qualification", "command"])
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .filter_map(Value::as_str)
                .find(|a| a.ends_with(".json") && !a.starts_with('-'))
        })
    else {
        return Vec::new();
    };
    let Some(root) = find_root(receipt_path, rel) else {
        return Vec::new();
    };
    let file = root.join(rel);
    let mut guard = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let entry = guard.entry(file.clone()).or_insert_with(|| {
        let (v, bytes) = qual_json::load_file(&file, qual_json::Limits::default()).ok()?;
        let rules = at(&v, &["comparison_policy", "metric_rules"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some(PolicyRule {
                    result_id: r
                        .get("result_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    metric: r.get("metric")?.as_str()?.to_owned(),
                    operator: r.get("operator")?.as_str()?.to_owned(),
                    absolute: r.get("absolute_tolerance")?.as_f64()?,
                    relative: r.get("relative_tolerance")?.as_f64()?,
                })
            })
            .collect();
        Some((qual_json::sha256_prefixed(&bytes), rules))
    });
    match entry {
        Some((digest, rules)) if digest == want => rules.clone(),
        _ => Vec::new(),
    }
}

/// A `case_result` artifact: its path, digest, size, result index and repetition.
struct CaseArtifact<'a> {
    path: &'a str,
    sha256: &'a str,
    bytes: u64,
    index: usize,
    repetition: u32,
}

fn case_artifacts(receipt: &Value) -> Vec<CaseArtifact<'_>> {
    let mut out = Vec::new();
    for a in receipt
        .get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if a.get("kind").and_then(Value::as_str) != Some("case_result")
            || a.get("location").and_then(Value::as_str) != Some("local_ignored")
        {
            continue;
        }
        let (Some(path), Some(sha256), Some(bytes)) = (
            a.get("path").and_then(Value::as_str),
            a.get("sha256").and_then(Value::as_str),
            a.get("bytes")
                .and_then(Value::as_int)
                .and_then(|i| i.as_u64()),
        ) else {
            continue;
        };
        // …/cases/<iii>-<case-id>-r<rrr>/case-result.json
        let mut parts = path.rsplit('/');
        let (Some(_file), Some(dir)) = (parts.next(), parts.next()) else {
            continue;
        };
        let index = dir.get(..3).and_then(|d| d.parse::<usize>().ok());
        let rep = dir
            .rsplit_once("-r")
            .and_then(|(_, r)| r.parse::<u32>().ok());
        if let (Some(index), Some(repetition)) = (index, rep) {
            if index >= 1 {
                out.push(CaseArtifact {
                    path,
                    sha256,
                    bytes,
                    index,
                    repetition,
                });
            }
        }
    }
    out
}

/// The repository root the receipt's artifact paths are relative to: the nearest ancestor of
/// the receipt file under which `probe` exists.
fn find_root(receipt_path: &Path, probe: &str) -> Option<PathBuf> {
    let abs = if receipt_path.is_absolute() {
        receipt_path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(receipt_path)
    };
    abs.ancestors()
        .skip(1)
        .find(|a| a.join(probe).is_file())
        .map(Path::to_path_buf)
}

fn read_evidence(path: &Path, receipt: &Value, view: &mut ReceiptView) -> Vec<String> {
    let mut notes = Vec::new();
    let artifacts = case_artifacts(receipt);
    let Some(first) = artifacts.first() else {
        return notes;
    };
    let Some(root) = find_root(path, first.path) else {
        return notes;
    };
    view.run_evidence = true;
    let id = view.receipt_id.clone();
    for a in &artifacts {
        let Some(case) = view.cases.get_mut(a.index - 1) else {
            continue;
        };
        let file = root.join(a.path);
        match read_case_result(&file, a) {
            Ok(mut rep) => {
                rep.serve = match read_serve_evidence(file.parent().unwrap_or(&root)) {
                    Ok(sv) => sv,
                    Err(e) => {
                        notes.push(format!(
                            "{id}: serving evidence of {} not used: {e}",
                            a.path
                        ));
                        None
                    }
                };
                case.repetitions.push(rep);
            }
            Err(e) => notes.push(format!("{id}: {} not used: {e}", a.path)),
        }
    }
    for c in &mut view.cases {
        c.repetitions.sort_by_key(|r| r.number);
    }
    notes
}

fn read_case_result(file: &Path, a: &CaseArtifact<'_>) -> Result<Repetition, String> {
    let bytes =
        qual_json::read_file_limited(file, MAX_CASE_RESULT_BYTES).map_err(|e| e.to_string())?;
    if bytes.len() as u64 != a.bytes || qual_json::sha256_prefixed(&bytes) != a.sha256 {
        return Err("its bytes no longer match the digest the receipt records".into());
    }
    let v = qual_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    Ok(Repetition {
        number: a.repetition,
        status: s(&v, &["status"]),
        details: v.get("details").and_then(Value::as_str).map(str::to_owned),
        duration_seconds: v
            .get("duration_seconds")
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
        metrics: metrics(v.get("metrics")),
        serve: None,
    })
}

fn read_serve_evidence(case_dir: &Path) -> Result<Option<ServeView>, String> {
    // The case's own files (the serve evidence beside its result) are in its `scratch/`,
    // the one directory a case can write; older runs kept them in the case directory.
    let entries: Vec<std::fs::DirEntry> = [case_dir.join("scratch"), case_dir.to_path_buf()]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.flatten())
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let mut names: Vec<PathBuf> = entries
        .into_iter()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".serve-evidence.json"))
        })
        .collect();
    names.sort();
    let Some(file) = names.first() else {
        return Ok(None);
    };
    let limits = qual_json::Limits {
        max_bytes: MAX_SERVE_EVIDENCE_BYTES,
        ..qual_json::Limits::default()
    };
    let (v, _) = qual_json::load_file(file, limits).map_err(|e| e.to_string())?;
    if v.get("schema").and_then(Value::as_str) != Some("kiln-qual.serve-evidence.v1") {
        return Err("not a kiln-qual.serve-evidence.v1 document".into());
    }
    Ok(Some(serve_view(&v)))
}

/// The plot data of one serving evidence document.
pub fn serve_view(v: &Value) -> ServeView {
    let mut sv = ServeView {
        concurrency: at(v, &["load", "arrival", "concurrency"])
            .and_then(Value::as_int)
            .and_then(|i| i.as_u64()),
        arrival: s(v, &["load", "arrival", "mode"]),
        reasons: strings(v.get("reasons")),
        output_tokens_per_second: at(v, &["metrics", "output_tokens_per_second"])
            .and_then(Value::as_f64),
        gated: strings(at(v, &["metrics", "validity", "gated"])),
        validity_violations: strings(at(v, &["metrics", "validity", "violations"])),
        ..ServeView::default()
    };
    for row in v
        .get("metric_rows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let num = |k: &[&str]| at(row, k).and_then(Value::as_f64);
        if let (Some(name), Some(value), Some(lower)) = (
            row.get("name").and_then(Value::as_str),
            num(&["value"]),
            num(&["bound", "lower"]),
        ) {
            let upper = num(&["bound", "upper"]).unwrap_or(f64::INFINITY);
            sv.bounds.push((name.to_string(), value, lower, upper));
        }
    }
    let ns = |x: &Value| x.as_int().and_then(|i| i.as_i64());
    let measured: Vec<&Value> = v
        .get("requests")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.get("phase").and_then(Value::as_str) == Some("measured"))
        .collect();
    let t0 = measured
        .iter()
        .filter_map(|r| r.get("send_ns").and_then(ns))
        .min()
        .unwrap_or(0);
    for r in measured {
        let ok = at(r, &["outcome", "status"]).and_then(Value::as_str) == Some("succeeded");
        let Some(send) = r.get("send_ns").and_then(ns) else {
            sv.failed_requests += usize::from(!ok);
            continue;
        };
        let events: Vec<i64> = r
            .get("content_event_ns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(ns)
            .collect();
        let ms = |t: i64| (t - send) as f64 / 1e6;
        let rel = |t: i64| (t - t0) as f64 / 1e6;
        if !ok || events.is_empty() {
            sv.failed_requests += usize::from(!ok);
            sv.timeline.push((rel(send), None, None));
            continue;
        }
        let (first, last) = (events[0], events[events.len() - 1]);
        sv.ttft_ms.push(ms(first));
        sv.e2e_ms.push(ms(last));
        sv.itl_ms
            .extend(events.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6));
        sv.timeline
            .push((rel(send), Some(rel(first)), Some(rel(last))));
    }
    for xs in [&mut sv.ttft_ms, &mut sv.itl_ms, &mut sv.e2e_ms] {
        xs.sort_by(f64::total_cmp);
    }
    sv.timeline.sort_by(|a, b| a.0.total_cmp(&b.0));
    sv
}
