//! `oracle check`: validation of oracle result files.
//!
//! Owns the dispatch on a result's `schema` and three validators:
//! - ours, `kiln-qual.oracle-result.v1`: strict closed shape, self-hash, tolerances in range,
//!   summaries, checks and verdict recomputed from the per-position metrics; with
//!   `verify_inputs`, every input file is re-read and must still hash to its recorded digest,
//!   and a case compared from two files is recomputed from the re-read tensors: the recorded
//!   metrics must equal the recomputation.
//! - Kiln's `kiln.rocm-hf-next-token-oracle.v2` (serving-and-oracles §9.6): rule 1 (exact key
//!   sets, self-hash, schema), rule 2 where the request contract is present under the
//!   repository root (request identity, candidates, input binding, and the source receipts'
//!   file and content hashes where the receipts are present), rule 4 (evidence: top-10 order and
//!   uniqueness, argmax and its text, candidates, finite logits, ranks, pinned constants,
//!   request binding), rule 5 (verdict recomputed), rule 6 (artifact), rule 7 (source closed,
//!   `commit == origin_main`, implementation hashes canonical, fingerprint interpreter equal).
//!   Rules 3 (v1 thermal containment) and 8 (`--require-current-source`) are not implemented.
//! - Kiln's v1 results are refused: they carry a machine-temperature policy, which is
//!   unsupported (§9.7). Any other schema is refused as unsupported.
//!
//! Every violation is collected (not only the first) with a JSON pointer.

use crate::result::{verdict_of, CaseOutcome, OracleResult, RESULT_SCHEMA};
use crate::tolerance::check as check_tolerances;
use qual_json::{Limits, Value};
use std::path::{Path, PathBuf};

/// Kiln's current next-token oracle result schema.
pub const KILN_V2_SCHEMA: &str = "kiln.rocm-hf-next-token-oracle.v2";
/// Kiln's historical next-token oracle result schema (refused).
pub const KILN_V1_SCHEMA: &str = "kiln.rocm-hf-next-token-oracle.v1";
/// The refusal of every Kiln v1 oracle result.
pub const V1_REASON: &str = "version 1 oracle results carry a machine-temperature policy, which is unsupported (only kiln.rocm-hf-next-token-oracle.v2 next-token results are validated)";

/// Largest oracle result read.
pub const MAX_RESULT_BYTES: usize = 64 << 20;
/// Largest request contract read (Kiln's limit).
pub const MAX_REQUEST_BYTES: usize = 256 << 10;

/// What `oracle check` may consult besides the file.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Repository root for Kiln's repo-relative `contract_path` and receipt paths.
    pub repo_root: Option<PathBuf>,
    /// Re-read our results' input files and compare their digests.
    pub verify_inputs: bool,
}

/// A valid result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Valid {
    /// Its schema.
    pub schema: String,
    /// Its self-hash.
    pub result_sha256: String,
}

/// Validates one result file; `Err` lists every violation.
pub fn check_file(path: &Path, opts: &CheckOptions) -> Result<Valid, Vec<String>> {
    let limits = Limits {
        max_bytes: MAX_RESULT_BYTES,
        ..Limits::default()
    };
    let (doc, _) = qual_json::load_file(path, limits).map_err(|e| vec![e.to_string()])?;
    check_value(&doc, opts)
}

/// Validates a parsed result.
pub fn check_value(doc: &Value, opts: &CheckOptions) -> Result<Valid, Vec<String>> {
    let Some(schema) = doc.get("schema").and_then(Value::as_str) else {
        return Err(vec!["/schema: missing or not a string".into()]);
    };
    match schema {
        RESULT_SCHEMA => check_ours(doc, opts),
        KILN_V2_SCHEMA => check_kiln_v2(doc, opts),
        KILN_V1_SCHEMA => Err(vec![format!("/schema: {V1_REASON}")]),
        crate::attribution::ATTRIBUTION_SCHEMA => {
            let mut errs = Vec::new();
            let digest = self_hash(doc, &mut errs);
            errs.extend(crate::attribution::check(doc, opts.verify_inputs));
            if errs.is_empty() {
                Ok(Valid {
                    schema: schema.into(),
                    result_sha256: digest,
                })
            } else {
                Err(errs)
            }
        }
        other => Err(vec![format!(
            "/schema: unsupported oracle-result schema {}",
            qual_json::show::quote(other)
        )]),
    }
}

fn self_hash(doc: &Value, errs: &mut Vec<String>) -> String {
    let stored = doc
        .get("result_sha256")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let want = qual_json::self_digest(doc, "result_sha256").unwrap_or_default();
    if stored != want {
        errs.push(format!(
            "/result_sha256: {} does not match the canonical hash of the document {want}",
            qual_json::show::quote(&stored)
        ));
    }
    stored
}

fn check_ours(doc: &Value, opts: &CheckOptions) -> Result<Valid, Vec<String>> {
    let mut errs = Vec::new();
    let digest = self_hash(doc, &mut errs);
    let r: OracleResult = match doc
        .to_serde()
        .ok_or_else(|| "not representable".to_string())
        .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            errs.push(format!("/: {e}"));
            return Err(errs);
        }
    };
    errs.extend(
        r.tolerances
            .problems()
            .into_iter()
            .map(|p| format!("/tolerances: {p}")),
    );
    for (i, c) in r.cases.iter().enumerate() {
        if let CaseOutcome::Compared {
            summary,
            checks,
            positions,
        } = &c.outcome
        {
            let at = format!("/cases/{i}/outcome");
            let vocab = c.reference.shape[1];
            match crate::compare::summarize(positions, vocab, r.top_k) {
                Some(s) if &s == summary => {}
                _ => errs.push(format!(
                    "{at}/summary: does not match the per-position metrics"
                )),
            }
            if &check_tolerances(&r.tolerances, summary) != checks {
                errs.push(format!(
                    "{at}/checks: do not match the tolerances applied to the summary"
                ));
            }
        }
        if let CaseOutcome::ComparedTopK {
            summary,
            checks,
            unchecked_tolerances,
            positions,
        } = &c.outcome
        {
            let at = format!("/cases/{i}/outcome");
            let vocab = c.reference.shape[1];
            if c.candidate.view != (crate::result::View::TopK { k: summary.listed }) {
                errs.push(format!(
                    "/cases/{i}/candidate/view: must be the top-k view the summary lists"
                ));
            }
            match crate::topk::summarize(positions, vocab, summary.listed, r.top_k) {
                Some(s) if &s == summary => {}
                _ => errs.push(format!(
                    "{at}/summary: does not match the per-position metrics"
                )),
            }
            if crate::topk::check(&r.tolerances, summary)
                != (checks.clone(), unchecked_tolerances.clone())
            {
                errs.push(format!(
                    "{at}/checks: do not match the tolerances applied to the summary"
                ));
            }
        }
        if let Some(g) = &c.greedy {
            let argmaxes: Option<Vec<u32>> = match &c.outcome {
                CaseOutcome::Compared { positions, .. } => {
                    Some(positions.iter().map(|p| p.reference_argmax).collect())
                }
                CaseOutcome::ComparedTopK { positions, .. } => {
                    Some(positions.iter().map(|p| p.reference_argmax).collect())
                }
                CaseOutcome::Refused { .. } => None,
            };
            if g.tokens.is_empty()
                || g.tokens.len() != g.texts.len()
                || g.tokens.len() != g.reference_argmax.len()
                || argmaxes.is_some_and(|a| a != g.reference_argmax)
            {
                errs.push(format!(
                    "/cases/{i}/greedy: tokens, texts and reference argmaxes must be equally long and agree with the per-position metrics"
                ));
            }
        }
        if opts.verify_inputs {
            errs.extend(recompute_case(i, c, &r));
        }
    }
    if verdict_of(&r.cases) != r.verdict {
        errs.push("/verdict: does not follow from the cases".into());
    }
    if errs.is_empty() {
        Ok(Valid {
            schema: RESULT_SCHEMA.into(),
            result_sha256: digest,
        })
    } else {
        Err(errs)
    }
}

/// `--verify-inputs` for one case: every file-backed input is re-read and must still hash to
/// its recorded digest and have its recorded size and shape; when both sides are files and
/// the case was compared in full, the comparison is recomputed from the re-read tensors with
/// the code that made it, and the recorded per-position metrics, summary and checks must
/// equal the recomputation (a result re-pointed at another tensor, digest and self-hash
/// updated, is refused here). In-memory inputs (a server's response) cannot be re-read: their
/// metrics are checked for consistency only.
fn recompute_case(i: usize, c: &crate::result::CaseRecord, r: &OracleResult) -> Vec<String> {
    let mut errs = Vec::new();
    let mut files = Vec::new();
    for (side, t) in [("reference", &c.reference), ("candidate", &c.candidate)] {
        // In-memory tensors (a server's response) have no file to re-read.
        if t.format == crate::tensor::TensorFormat::Memory {
            continue;
        }
        let Some(want) = &t.file_sha256 else {
            errs.push(format!(
                "/cases/{i}/{side}/file_sha256: a file input without a recorded digest"
            ));
            continue;
        };
        match crate::tensor::read_tensor_file(Path::new(&t.source)) {
            Ok(f) if &f.file_sha256 != want => errs.push(format!(
                "/cases/{i}/{side}/file_sha256: the file no longer has this digest"
            )),
            Ok(f) => {
                if t.bytes != Some(f.bytes) || t.shape != [f.logits.positions, f.logits.vocab] {
                    errs.push(format!(
                        "/cases/{i}/{side}: bytes or shape differ from the re-read file"
                    ));
                }
                files.push(f);
            }
            Err(e) => errs.push(format!("/cases/{i}/{side}/source: {e}")),
        }
    }
    if let ([reference, candidate], CaseOutcome::Compared { .. }) = (files.as_slice(), &c.outcome) {
        let again =
            crate::result::compare_files(&c.id, reference, candidate, None, r.top_k, &r.tolerances);
        if again.input_token_ids_sha256.is_some()
            && again.input_token_ids_sha256 != c.input_token_ids_sha256
        {
            errs.push(format!(
                "/cases/{i}/input_token_ids_sha256: differs from the token ids the re-read tensors carry"
            ));
        }
        match (&again.outcome, &c.outcome) {
            (a, b) if a == b => {}
            (
                CaseOutcome::Compared {
                    summary: a,
                    positions: pa,
                    ..
                },
                CaseOutcome::Compared {
                    summary: b,
                    positions: pb,
                    ..
                },
            ) => {
                let first = pa.iter().zip(pb).position(|(x, y)| x != y);
                errs.push(format!(
                    "/cases/{i}/outcome: the recorded metrics differ from the comparison recomputed from the re-read tensors ({}{})",
                    if a == b { "summary equal" } else { "summary differs" },
                    first
                        .map(|p| format!(", first at position {p}"))
                        .unwrap_or_else(|| if pa.len() == pb.len() { String::new() } else { ", position counts differ".into() })
                ));
            }
            (CaseOutcome::Refused { reason }, _) => errs.push(format!(
                "/cases/{i}/outcome: recorded as compared, the re-read tensors are refused: {reason}"
            )),
            _ => errs.push(format!(
                "/cases/{i}/outcome: differs from the comparison recomputed from the re-read tensors"
            )),
        }
    }
    errs
}

/// Collects violations of one object against an exact key set.
struct Obj<'a> {
    at: String,
    o: Option<&'a qual_json::Object>,
}

/// The result checker's phrasing: both lists sorted, as JSON arrays.
const PHRASING: qual_json::Phrasing = qual_json::Phrasing {
    missing: "missing keys {}",
    unknown: "unknown keys {}",
    list: qual_json::KeyList::Json,
    unknown_first: false,
};

impl<'a> Obj<'a> {
    fn new(v: Option<&'a Value>, at: &str, keys: &[&str], errs: &mut Vec<String>) -> Obj<'a> {
        let o = v.and_then(Value::as_object);
        match o {
            None => errs.push(format!("{at}: must be an object")),
            Some(o) => {
                let diff = qual_json::ClosedKeys::new(keys).check(o);
                errs.extend(
                    diff.messages(&PHRASING)
                        .into_iter()
                        .map(|m| format!("{at}: {m}")),
                );
            }
        }
        Obj { at: at.into(), o }
    }
    fn get(&self, k: &str) -> Option<&'a Value> {
        self.o.and_then(|o| o.get(k))
    }
    fn p(&self, k: &str) -> String {
        format!("{}/{k}", self.at)
    }
    fn digest(&self, k: &str, errs: &mut Vec<String>) -> Option<&'a str> {
        let v = self.get(k).and_then(Value::as_str);
        if !v.is_some_and(qual_json::is_sha256_digest) {
            errs.push(format!(
                "{}: must be a sha256:<64 lowercase hex> digest",
                self.p(k)
            ));
        }
        v
    }
    fn git(&self, k: &str, errs: &mut Vec<String>) -> Option<&'a str> {
        let v = self.get(k).and_then(Value::as_str);
        if !v.is_some_and(|s| {
            s.len() == 40 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        }) {
            errs.push(format!("{}: must be a 40-hex git object id", self.p(k)));
        }
        v
    }
    fn text(&self, k: &str, min: usize, errs: &mut Vec<String>) -> Option<&'a str> {
        let v = self.get(k).and_then(Value::as_str);
        if v.is_none_or(|s| s.chars().count() < min) {
            errs.push(format!(
                "{}: must be a string of at least {min} characters",
                self.p(k)
            ));
        }
        v
    }
    fn int(&self, k: &str, lo: i64, hi: i64, errs: &mut Vec<String>) -> Option<i64> {
        let v = self.get(k).and_then(Value::as_int).and_then(|i| i.as_i64());
        if !v.is_some_and(|i| (lo..=hi).contains(&i)) {
            errs.push(format!("{}: must be an integer in {lo}..={hi}", self.p(k)));
        }
        v
    }
    fn number(&self, k: &str, errs: &mut Vec<String>) -> Option<f64> {
        let v = self.get(k).and_then(Value::as_f64);
        if !v.is_some_and(f64::is_finite) {
            errs.push(format!("{}: must be a finite number", self.p(k)));
        }
        v
    }
    fn constant(&self, k: &str, want: &Value, errs: &mut Vec<String>) {
        if self.get(k) != Some(want) {
            errs.push(format!(
                "{}: must be {}",
                self.p(k),
                qual_json::to_canonical_string(want)
            ));
        }
    }
}

const TOP_V2: &[&str] = &[
    "schema",
    "result_sha256",
    "created_at_utc",
    "duration_seconds",
    "source",
    "implementation",
    "request",
    "model_identity",
    "model_fingerprint",
    "containment",
    "oracle",
    "reference_artifact",
    "verdict",
];

const ORACLE_KEYS: &[&str] = &[
    "attention_implementation",
    "argmax",
    "argmax_text",
    "candidate_tokens",
    "configuration_sha256",
    "deterministic_algorithms",
    "device",
    "dtype",
    "duration_seconds",
    "input_token_count",
    "input_token_ids_sha256",
    "linear_attention_implementation",
    "logits_sha256",
    "memory_high_events",
    "memory_max_events",
    "memory_oom_events",
    "memory_oom_kill_events",
    "memory_peak_bytes",
    "memory_swap_bytes",
    "modeling_sha256",
    "output_bytes",
    "request_id",
    "request_sha256",
    "tf32_allowed",
    "top_logit_margin",
    "top_tokens",
    "torch_commit",
    "torch_hip_version",
    "torch_version",
    "transformers_version",
    "vocab",
];

const VOCAB: i64 = 248_320;

fn process_evidence(v: Option<&Value>, at: &str, errs: &mut Vec<String>) {
    let p = Obj::new(
        v,
        at,
        &[
            "elapsed_seconds",
            "schema",
            "timeout_seconds",
            "worker_exit_code",
        ],
        errs,
    );
    if p.number("elapsed_seconds", errs).is_some_and(|x| x < 0.0) {
        errs.push(format!("{}: must be >= 0", p.p("elapsed_seconds")));
    }
    p.constant(
        "schema",
        &Value::from("kiln.hf-process-containment.v1"),
        errs,
    );
    if p.number("timeout_seconds", errs).is_some_and(|x| x <= 0.0) {
        errs.push(format!("{}: must be > 0", p.p("timeout_seconds")));
    }
    p.constant("worker_exit_code", &int(0), errs);
}

fn int(i: i64) -> Value {
    Value::Number(qual_json::Number::Int(i.into()))
}

fn receipt_ref(v: Option<&Value>, at: &str, errs: &mut Vec<String>) {
    let r = Obj::new(v, at, &["path", "file_sha256", "content_sha256"], errs);
    r.text("path", 1, errs);
    r.digest("file_sha256", errs);
    r.digest("content_sha256", errs);
}

fn model_identity(v: Option<&Value>, at: &str, errs: &mut Vec<String>) {
    let m = Obj::new(
        v,
        at,
        &[
            "id",
            "content_sha256",
            "config_hash",
            "tokenizer_hash",
            "chat_template_hash",
            "weight_files",
        ],
        errs,
    );
    m.text("id", 1, errs);
    for k in [
        "content_sha256",
        "config_hash",
        "tokenizer_hash",
        "chat_template_hash",
    ] {
        m.digest(k, errs);
    }
    match m.get("weight_files").and_then(Value::as_array) {
        Some(files) if !files.is_empty() => {
            for (i, f) in files.iter().enumerate() {
                let w = Obj::new(
                    Some(f),
                    &format!("{at}/weight_files/{i}"),
                    &["path", "bytes", "sha256"],
                    errs,
                );
                w.text("path", 1, errs);
                w.int("bytes", 1, i64::MAX, errs);
                w.digest("sha256", errs);
            }
        }
        _ => errs.push(format!("{at}/weight_files: must be a non-empty array")),
    }
}

fn check_kiln_v2(doc: &Value, opts: &CheckOptions) -> Result<Valid, Vec<String>> {
    let mut errs = Vec::new();
    // Rule 1.
    let top = Obj::new(Some(doc), "", TOP_V2, &mut errs);
    let digest = self_hash(doc, &mut errs);
    top.text("created_at_utc", 1, &mut errs);
    if top
        .number("duration_seconds", &mut errs)
        .is_some_and(|d| d <= 0.0)
    {
        errs.push("/duration_seconds: must be > 0".into());
    }
    // Rule 7.
    let src = Obj::new(
        top.get("source"),
        "/source",
        &["commit", "origin_main", "tree"],
        &mut errs,
    );
    let commit = src.git("commit", &mut errs);
    let origin = src.git("origin_main", &mut errs);
    src.git("tree", &mut errs);
    if commit.is_some() && commit != origin {
        errs.push("/source/commit: must equal origin_main".into());
    }
    let imp = Obj::new(
        top.get("implementation"),
        "/implementation",
        &["hf_worker_sha256", "python_sha256", "process_runner_sha256"],
        &mut errs,
    );
    imp.digest("hf_worker_sha256", &mut errs);
    let py = imp.digest("python_sha256", &mut errs);
    imp.digest("process_runner_sha256", &mut errs);
    let fp = Obj::new(
        top.get("model_fingerprint"),
        "/model_fingerprint",
        &["implementation_sha256", "python_sha256", "process"],
        &mut errs,
    );
    fp.digest("implementation_sha256", &mut errs);
    if fp.digest("python_sha256", &mut errs) != py {
        errs.push(
            "/model_fingerprint/python_sha256: must equal /implementation/python_sha256".into(),
        );
    }
    process_evidence(fp.get("process"), "/model_fingerprint/process", &mut errs);
    // Request (shape; rule 2 below).
    let req = Obj::new(
        top.get("request"),
        "/request",
        &["contract_path", "id", "sha256", "source"],
        &mut errs,
    );
    let contract_path = req.text("contract_path", 1, &mut errs);
    let req_id = req.text("id", 1, &mut errs);
    let req_sha = req.digest("sha256", &mut errs);
    let pair = Obj::new(
        req.get("source"),
        "/request/source",
        &["source_commit", "kiln_receipt", "vllm_receipt"],
        &mut errs,
    );
    pair.git("source_commit", &mut errs);
    receipt_ref(
        pair.get("kiln_receipt"),
        "/request/source/kiln_receipt",
        &mut errs,
    );
    receipt_ref(
        pair.get("vllm_receipt"),
        "/request/source/vllm_receipt",
        &mut errs,
    );
    model_identity(top.get("model_identity"), "/model_identity", &mut errs);
    // Containment (v2 shape).
    let con = Obj::new(
        top.get("containment"),
        "/containment",
        &["host_available_before_gib", "network", "service"],
        &mut errs,
    );
    con.int("host_available_before_gib", 1, i64::MAX, &mut errs);
    con.constant("network", &Value::from("forbidden"), &mut errs);
    process_evidence(con.get("service"), "/containment/service", &mut errs);
    // Rule 4.
    let argmax = oracle_evidence(top.get("oracle"), req_id, req_sha, &mut errs);
    // Rule 6.
    let art = Obj::new(
        top.get("reference_artifact"),
        "/reference_artifact",
        &["bytes", "location", "sha256"],
        &mut errs,
    );
    let bytes = art.int("bytes", 1, i64::MAX, &mut errs);
    art.constant("location", &Value::from("local_ignored"), &mut errs);
    art.digest("sha256", &mut errs);
    let out_bytes = top
        .get("oracle")
        .and_then(|o| o.get("output_bytes"))
        .and_then(Value::as_int)
        .and_then(|i| i.as_i64());
    if bytes.is_some() && bytes != out_bytes {
        errs.push("/reference_artifact/bytes: must equal /oracle/output_bytes".into());
    }
    // Rule 5.
    let ver = Obj::new(
        top.get("verdict"),
        "/verdict",
        &[
            "argmax_candidate",
            "argmax_token_id",
            "candidate_attribution_complete",
        ],
        &mut errs,
    );
    if let Some((arg, kiln, vllm)) = argmax {
        let a = crate::divergence::attribute(arg as u32, kiln as u32, vllm as u32);
        let name = match a {
            crate::divergence::Attribution::CandidateA => "kiln",
            crate::divergence::Attribution::CandidateB => "vllm",
            crate::divergence::Attribution::Neither => "neither",
        };
        ver.constant("argmax_candidate", &Value::from(name), &mut errs);
        ver.constant("argmax_token_id", &int(arg), &mut errs);
        ver.constant(
            "candidate_attribution_complete",
            &Value::Bool(a.complete()),
            &mut errs,
        );
    }
    // Rule 2, where the contract is present.
    if let (Some(root), Some(cp)) = (&opts.repo_root, contract_path) {
        bind_request(root, cp, doc, &mut errs);
    }
    if errs.is_empty() {
        Ok(Valid {
            schema: KILN_V2_SCHEMA.into(),
            result_sha256: digest,
        })
    } else {
        Err(errs)
    }
}

/// Rule 4; returns (argmax, kiln token, vllm token) when they are readable.
fn oracle_evidence(
    v: Option<&Value>,
    req_id: Option<&str>,
    req_sha: Option<&str>,
    errs: &mut Vec<String>,
) -> Option<(i64, i64, i64)> {
    let o = Obj::new(v, "/oracle", ORACLE_KEYS, errs);
    o.constant("attention_implementation", &Value::from("eager"), errs);
    o.constant("deterministic_algorithms", &Value::Bool(true), errs);
    o.constant("dtype", &Value::from("bfloat16"), errs);
    o.constant(
        "linear_attention_implementation",
        &Value::from("transformers_torch_fallback"),
        errs,
    );
    o.constant("tf32_allowed", &Value::Bool(false), errs);
    o.constant("torch_version", &Value::from("2.13.0+rocm7.2"), errs);
    o.constant("transformers_version", &Value::from("5.13.1"), errs);
    o.constant("vocab", &int(VOCAB), errs);
    for k in [
        "configuration_sha256",
        "input_token_ids_sha256",
        "logits_sha256",
        "modeling_sha256",
        "request_sha256",
    ] {
        o.digest(k, errs);
    }
    o.git("torch_commit", errs);
    o.text("torch_hip_version", 1, errs);
    o.text("device", 1, errs);
    o.int("input_token_count", 1, i64::MAX, errs);
    o.int("output_bytes", 1, i64::MAX, errs);
    for k in [
        "memory_high_events",
        "memory_max_events",
        "memory_oom_events",
        "memory_oom_kill_events",
        "memory_swap_bytes",
    ] {
        o.int(k, 0, i64::MAX, errs);
    }
    o.int("memory_peak_bytes", 1, i64::MAX, errs);
    if o.number("duration_seconds", errs).is_some_and(|d| d <= 0.0) {
        errs.push("/oracle/duration_seconds: must be > 0".into());
    }
    if o.number("top_logit_margin", errs).is_some_and(|d| d <= 0.0) {
        errs.push("/oracle/top_logit_margin: must be > 0".into());
    }
    if o.get("request_id").and_then(Value::as_str) != req_id {
        errs.push("/oracle/request_id: must equal /request/id".into());
    }
    if o.get("request_sha256").and_then(Value::as_str) != req_sha {
        errs.push("/oracle/request_sha256: must equal /request/sha256".into());
    }
    let argmax = o.int("argmax", 0, VOCAB - 1, errs);
    let argmax_text = o.text("argmax_text", 1, errs);
    // Top 10: exactly ten, descending (ties allowed), unique ids, finite logits.
    let mut first: Option<(i64, String)> = None;
    match o.get("top_tokens").and_then(Value::as_array) {
        Some(tops) if tops.len() == 10 => {
            let mut prev = f64::INFINITY;
            let mut seen = std::collections::BTreeSet::new();
            for (i, t) in tops.iter().enumerate() {
                let at = format!("/oracle/top_tokens/{i}");
                let t = Obj::new(Some(t), &at, &["token_id", "text", "logit"], errs);
                let id = t.int("token_id", 0, VOCAB - 1, errs);
                let text = t.get("text").and_then(Value::as_str);
                if text.is_none() {
                    errs.push(format!("{at}/text: must be a string"));
                }
                if let Some(l) = t.number("logit", errs) {
                    if l > prev {
                        errs.push(format!(
                            "{at}/logit: top tokens must be sorted by descending logit"
                        ));
                    }
                    prev = l;
                }
                if let Some(id) = id {
                    if !seen.insert(id) {
                        errs.push(format!("{at}/token_id: repeats an earlier token"));
                    }
                    if i == 0 {
                        first = Some((id, text.unwrap_or("").to_string()));
                    }
                }
            }
        }
        _ => errs.push("/oracle/top_tokens: must be an array of exactly 10 tokens".into()),
    }
    if let (Some(a), Some((id, text))) = (argmax, &first) {
        if a != *id {
            errs.push("/oracle/argmax: must equal /oracle/top_tokens/0/token_id".into());
        }
        if argmax_text.is_some_and(|t| t != text) {
            errs.push("/oracle/argmax_text: must equal /oracle/top_tokens/0/text".into());
        }
    }
    let mut cand = [None, None];
    match o.get("candidate_tokens").and_then(Value::as_array) {
        Some(cs) if cs.len() == 2 => {
            for (i, (c, engine)) in cs.iter().zip(["kiln", "vllm"]).enumerate() {
                let at = format!("/oracle/candidate_tokens/{i}");
                let c = Obj::new(
                    Some(c),
                    &at,
                    &["engine", "token_id", "text", "logit", "rank"],
                    errs,
                );
                c.constant("engine", &Value::from(engine), errs);
                cand[i] = c.int("token_id", 0, VOCAB - 1, errs);
                if c.get("text").and_then(Value::as_str).is_none() {
                    errs.push(format!("{at}/text: must be a string"));
                }
                c.number("logit", errs);
                let rank = c.int("rank", 1, VOCAB, errs);
                // Kiln's rank is 1 + the logits strictly greater: the argmax has rank 1 (a
                // token tied with it does too).
                if let (Some(a), Some(t), Some(r)) = (argmax, cand[i], rank) {
                    if t == a && r != 1 {
                        errs.push(format!("{at}/rank: the argmax token must have rank 1"));
                    }
                }
            }
            if cand[0].is_some() && cand[0] == cand[1] {
                errs.push(
                    "/oracle/candidate_tokens: the two candidates must name distinct tokens".into(),
                );
            }
        }
        _ => errs.push("/oracle/candidate_tokens: must be [kiln, vllm]".into()),
    }
    Some((argmax?, cand[0]?, cand[1]?))
}

/// Rule 2: the request contract (and its receipts, where present) bind the result.
fn bind_request(root: &Path, contract_path: &str, doc: &Value, errs: &mut Vec<String>) {
    let rel = Path::new(contract_path);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        errs.push("/request/contract_path: must be repository-relative without ..".into());
        return;
    }
    let path = root.join(rel);
    if !path.exists() {
        return;
    }
    let limits = Limits {
        max_bytes: MAX_REQUEST_BYTES,
        ..Limits::default()
    };
    let req = match qual_json::load_file(&path, limits) {
        Ok((v, _)) => v,
        Err(e) => {
            errs.push(format!("/request/contract_path: {e}"));
            return;
        }
    };
    // Objects compare as canonical text (key order is not significant).
    let same = |a: Option<&Value>, b: Option<&Value>| {
        a.map(qual_json::to_canonical_string) == b.map(qual_json::to_canonical_string)
    };
    let r = |k: &str| doc.get("request").and_then(|x| x.get(k));
    if r("sha256").and_then(Value::as_str) != Some(qual_json::canonical_digest(&req).as_str()) {
        errs.push("/request/sha256: does not match the canonical hash of the contract".into());
    }
    if !same(r("id"), req.get("id")) {
        errs.push("/request/id: does not match the contract".into());
    }
    if !same(r("source"), req.get("source")) {
        errs.push("/request/source: does not match the contract".into());
    }
    if !same(doc.get("model_identity"), req.get("model_identity")) {
        errs.push("/model_identity: does not match the contract".into());
    }
    let o = |k: &str| doc.get("oracle").and_then(|x| x.get(k));
    if !same(
        o("input_token_ids_sha256"),
        req.get("input_token_ids_sha256"),
    ) {
        errs.push("/oracle/input_token_ids_sha256: does not match the contract".into());
    }
    let n = req
        .get("input_token_ids")
        .and_then(Value::as_array)
        .map(|a| a.len() as i64);
    if o("input_token_count")
        .and_then(Value::as_int)
        .and_then(|i| i.as_i64())
        != n
    {
        errs.push(
            "/oracle/input_token_count: does not match the contract's input_token_ids".into(),
        );
    }
    if let (Some(want), Some(got)) = (
        req.get("candidates").and_then(Value::as_array),
        o("candidate_tokens").and_then(Value::as_array),
    ) {
        for (i, (w, g)) in want.iter().zip(got).enumerate() {
            for k in ["engine", "token_id", "text"] {
                if !same(w.get(k), g.get(k)) {
                    errs.push(format!(
                        "/oracle/candidate_tokens/{i}/{k}: does not match the contract"
                    ));
                }
            }
        }
    }
    // Source receipts, where present: file bytes and canonical content.
    if let Some(src) = req.get("source") {
        for which in ["kiln_receipt", "vllm_receipt"] {
            let Some(rr) = src.get(which) else { continue };
            let Some(p) = rr.get("path").and_then(Value::as_str) else {
                continue;
            };
            let path = root.join(p);
            if !path.exists() {
                continue;
            }
            match qual_json::load_file(&path, Limits::default()) {
                Ok((v, bytes)) => {
                    if rr.get("file_sha256").and_then(Value::as_str)
                        != Some(qual_json::sha256_prefixed(&bytes).as_str())
                    {
                        errs.push(format!(
                            "/request/source/{which}/file_sha256: does not match the receipt file"
                        ));
                    }
                    let content = qual_json::self_digest(&v, "receipt_sha256");
                    if rr.get("content_sha256").and_then(Value::as_str) != content.as_deref() {
                        errs.push(format!("/request/source/{which}/content_sha256: does not match the receipt's canonical content"));
                    }
                }
                Err(e) => errs.push(format!("/request/source/{which}/path: {e}")),
            }
        }
    }
}
