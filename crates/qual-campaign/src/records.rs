//! The campaign's records: per-profile receipts (`kiln-qual.serving-campaign-receipt.v1`) and
//! the campaign summary (`kiln-qual.serving-campaign.v1`), with their self-hashes.
//!
//! One set of closed serde types serves both writing and reading: every input is parsed
//! strictly by `qual-json` (duplicate keys, non-finite numbers, depth) and then by these types
//! with `deny_unknown_fields`. Self-hash (spec §9.1): `sha256:` of the canonical JSON of the
//! object with its hash field removed, computed on the parsed document (never on file bytes);
//! files are written pretty-printed with sorted keys and a trailing newline.

use crate::profiles::{ComparisonMode, Profile, PromptTokens};
use qual_json::Value;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Receipt schema.
pub const RECEIPT_SCHEMA: &str = "kiln-qual.serving-campaign-receipt.v1";
/// Summary schema.
pub const SUMMARY_SCHEMA: &str = "kiln-qual.serving-campaign.v1";
/// Workload schema (inside a receipt).
pub const WORKLOAD_SCHEMA: &str = "kiln-qual.serving-campaign-workload.v1";
/// Largest receipt or summary read back.
pub const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// Passed or failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Everything required held.
    Passed,
    /// Something required did not.
    Failed,
}

impl Verdict {
    /// `Passed` iff `ok`.
    pub fn of(ok: bool) -> Verdict {
        if ok {
            Verdict::Passed
        } else {
            Verdict::Failed
        }
    }
}

/// A finalization check's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Held.
    Passed,
    /// Did not hold.
    Failed,
    /// Does not apply to this run.
    NotApplicable,
}

/// One gate of a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    /// Gate name (unique within a row).
    pub name: String,
    /// What was measured against what.
    pub detail: String,
    /// Passed or failed.
    pub outcome: Verdict,
}

/// Nearest-rank-free percentiles (type 7), `null` when no sample exists.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 99th.
    pub p99: Option<f64>,
    /// 99.9th.
    pub p999: Option<f64>,
}

/// A failed request of a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestError {
    /// Request index within the row.
    pub index: u64,
    /// Why it failed.
    pub error: String,
}

/// The exact output bytes of one request (in `full` evidence mode), as JSON strings (the
/// streamed text is UTF-8, so a JSON string holds it exactly).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactOutput {
    /// Reasoning text.
    pub reasoning: String,
    /// Content text.
    pub content: String,
}

/// Output evidence of one successful request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputEvidence {
    /// Request index within the row.
    pub index: u64,
    /// `sha256:` of reasoning + `\x1e` + content.
    pub output_sha256: String,
    /// `sha256:` of the reasoning text.
    pub reasoning_sha256: String,
    /// `sha256:` of the content text.
    pub content_sha256: String,
    /// Reasoning bytes.
    pub reasoning_utf8_bytes: u64,
    /// Content bytes.
    pub content_utf8_bytes: u64,
    /// `usage.completion_tokens`.
    pub completion_tokens: u64,
    /// The finish reason.
    pub finish_reason: Option<String>,
    /// The bytes themselves (`full` mode), else `null`.
    pub exact_output: Option<ExactOutput>,
}

/// Memory over one row.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySnapshot {
    /// The first read of the row.
    pub baseline_bytes: u64,
    /// The largest read.
    pub peak_bytes: u64,
    /// `max(0, peak − baseline)`.
    pub peak_delta_bytes: u64,
    /// Reads taken.
    pub samples: u64,
}

/// The engine's own counters over one row (a Prometheus scrape before and after).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerMetricsDelta {
    /// Every counter (`_total`) present in both scrapes: after − before.
    pub counter_deltas: BTreeMap<String, f64>,
    /// The counter read as completed requests, and its delta, when the engine has one.
    pub requests_completed: Option<NamedDelta>,
    /// The counter read as generated tokens, and its delta, when the engine has one.
    pub completion_tokens: Option<NamedDelta>,
}

/// One named counter delta.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedDelta {
    /// The metric name.
    pub metric: String,
    /// after − before.
    pub delta: f64,
}

/// One measured row (one concurrency × repeat).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Requests dispatched at once.
    pub concurrency: u64,
    /// Repeat index.
    pub repeat: u64,
    /// Phase label (`measure-c%03d-r%03d`).
    pub phase: String,
    /// N.
    pub request_count: u64,
    /// |S|.
    pub success_count: u64,
    /// N − |S|.
    pub error_count: u64,
    /// Failed requests.
    pub errors: Vec<RequestError>,
    /// Σ usage.completion_tokens over S.
    pub completion_tokens: u64,
    /// Σ semantic events over S.
    pub client_visible_stream_event_count: u64,
    /// First dispatch → last completion, seconds.
    pub elapsed_s: f64,
    /// |S| / W.
    pub request_throughput_per_s: f64,
    /// completion_tokens / W.
    pub output_token_throughput_per_s: f64,
    /// Requests within every SLO.
    pub slo_good_request_count: u64,
    /// |G| / W.
    pub slo_goodput_requests_per_s: f64,
    /// Σ tokens of G / W.
    pub slo_goodput_tokens_per_s: f64,
    /// Latest minus earliest dispatch over all requests, ms.
    pub dispatch_spread_ms: f64,
    /// TTFT over S, ms.
    pub ttft_ms: Percentiles,
    /// Pooled client-visible ITLs over S, ms.
    pub client_visible_itl_ms: Percentiles,
    /// End-to-end over S, ms.
    pub e2e_ms: Percentiles,
    /// Smallest prompt-token count (failed = 0).
    pub prompt_tokens_min: u64,
    /// Largest prompt-token count.
    pub prompt_tokens_max: u64,
    /// Per-index prompt tokens (failed = 0).
    pub prompt_token_counts: Vec<u64>,
    /// Canonical hash of `[{index, prompt_sha256}]`.
    pub prompt_set_sha256: String,
    /// Output evidence of the successful requests, index order.
    pub outputs: Vec<OutputEvidence>,
    /// Canonical hash of `outputs` without `exact_output`.
    pub output_set_sha256: String,
    /// Memory over the row, `null` when the sampler failed.
    pub memory: Option<MemorySnapshot>,
    /// Engine counters over the row, `null` when not scraped.
    pub server_metrics: Option<ServerMetricsDelta>,
    /// Gates in fixed order.
    pub gates: Vec<Gate>,
    /// Passed iff every request succeeded with `max_tokens` tokens and every gate passed.
    pub verdict: Verdict,
}

/// Sampling sent in every request.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    /// Temperature (owned by the profile).
    pub temperature: f64,
    /// top_p (owned by the profile).
    pub top_p: f64,
    /// Base seed; request `i` sends `seed + i`.
    pub seed: u64,
    /// `ignore_eos` sent (fixed output length).
    pub ignore_eos: bool,
}

/// SLO bounds for goodput.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloBounds {
    /// TTFT bound, ms.
    pub ttft_ms: f64,
    /// Largest client-visible ITL bound, ms.
    pub client_visible_itl_ms: f64,
    /// E2E bound, ms.
    pub e2e_ms: f64,
}

/// The workload of one profile; its fingerprint excludes `run_id`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// [`WORKLOAD_SCHEMA`].
    pub schema: String,
    /// Prompt template version.
    pub prompt_template_version: String,
    /// Long-block repetitions.
    pub long_prompt_repetitions: u64,
    /// `<campaign-id>-<engine>-<profile>`.
    pub run_id: String,
    /// `<prompt-set-id>-<profile>`.
    pub prompt_set_id: String,
    /// Requested model id.
    pub model: String,
    /// Always `/v1/chat/completions`.
    pub endpoint: String,
    /// Always streamed with a usage record.
    pub stream_include_usage: bool,
    /// Concurrency sweep (strictly increasing).
    pub sizes: Vec<u64>,
    /// Repeats per size.
    pub repeats: u64,
    /// Warmup requests.
    pub warmup_requests: u64,
    /// `max_tokens` of measured requests.
    pub max_tokens: u64,
    /// Sampling.
    pub sampling: Sampling,
    /// `all_at_once`.
    pub arrival_pattern: String,
    /// Always true.
    pub require_max_tokens: bool,
    /// Prompt-token shape.
    pub prompt_tokens: PromptTokens,
    /// Dispatch spread bound, ms.
    pub max_dispatch_spread_ms: f64,
    /// Goodput SLO.
    pub slo: SloBounds,
    /// Profile.
    pub profile: Profile,
    /// Comparison mode.
    pub comparison_mode: ComparisonMode,
    /// Memory ceiling, bytes.
    pub memory_limit_bytes: u64,
    /// Per-request deadline, seconds.
    pub request_timeout_s: f64,
}

/// A file bound by digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileDigest {
    /// Path as given.
    pub path: String,
    /// Resolved path (symlinks followed).
    pub resolved: String,
    /// Size.
    pub bytes: u64,
    /// `sha256:` of the content.
    pub sha256: String,
}

/// The model served, bound by content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelIdentity {
    /// The fingerprint (`qual-probe`'s model object).
    pub fingerprint: serde_json::Value,
    /// Canonical hash of the fingerprint without its `path`.
    pub content_sha256: String,
}

/// What the engine was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineIdentity {
    /// `--engine`.
    pub name: String,
    /// Server origin.
    pub base_url: String,
    /// Model ids from `/v1/models`.
    pub available_models: Vec<String>,
    /// Model bound by content.
    pub model_identity: Option<ModelIdentity>,
    /// Executable (and, for interpreters, script) of an owned server.
    pub executables: Vec<FileDigest>,
    /// Extra runtime artifacts (`--runtime-artifact`).
    pub runtime_artifacts: Vec<FileDigest>,
    /// A runtime manifest file (`--runtime-manifest`): its digest and content digest.
    pub runtime_manifest: Option<ManifestBinding>,
    /// The launch recipe of an owned server.
    pub launch_recipe: Option<LaunchBinding>,
}

/// A bound runtime manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestBinding {
    /// The manifest file.
    pub file: FileDigest,
    /// The manifest's `runtime_content_sha256`.
    pub runtime_content_sha256: String,
}

/// A bound launch recipe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchBinding {
    /// Path.
    pub path: String,
    /// `sha256:` of the file bytes.
    pub file_sha256: String,
    /// Canonical hash of the recipe document.
    pub canonical_sha256: String,
}

/// Which memory source measured the rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplerIdentity {
    /// `drm_vram_used`, `nvml_used`, `process_tree_pss` or `unavailable`.
    pub source: String,
    /// What the number means.
    pub measures: String,
    /// DRM counter path or the measured server pid's `/proc` root.
    pub path: Option<String>,
    /// NVML device identity.
    pub device: Option<serde_json::Value>,
    /// Sampling interval, ms.
    pub interval_ms: u64,
}

/// The prompt-context preflight: the longest prompt of every row (and of the warmup),
/// tokenized by the server's own tokenizer endpoint before any traffic. The count is of the
/// raw prompt text (the chat template adds its own tokens; each row's `usage.prompt_tokens`
/// is the templated count and is checked against the same ceiling after the row).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptContext {
    /// The tokenizer endpoint used.
    pub endpoint: String,
    /// Prompts tokenized.
    pub checked_prompt_count: u64,
    /// Largest raw prompt-token count.
    pub max_prompt_tokens: u64,
    /// The declared context ceiling (prompt + output tokens), if any.
    pub context_tokens: Option<u64>,
    /// `context_tokens − max_prompt_tokens − max_tokens`, when a ceiling is declared.
    pub min_headroom_tokens: Option<i64>,
}

/// The warmup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Warmup {
    /// Requests sent (concurrency = count).
    pub requests: u64,
    /// `max_tokens` of warmup requests (`min(16, max_tokens)`).
    pub max_tokens: u64,
    /// Passed when every warmup request succeeded (or none was sent).
    pub outcome: Verdict,
    /// Failures.
    pub errors: Vec<RequestError>,
}

/// One completion failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// `server_startup`, `warmup`, `measurement`, `memory_sampler`, `reference_comparison`,
    /// or a finalization check name.
    pub phase: String,
    /// What happened (≤ 4096 chars).
    pub detail: String,
}

/// What ran and what was checked at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    /// sizes × repeats.
    pub expected_run_count: u64,
    /// Rows present.
    pub completed_run_count: u64,
    /// Failures.
    pub failures: Vec<Failure>,
    /// Finalization checks.
    pub finalization_checks: BTreeMap<String, CheckStatus>,
}

/// One difference from the reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Mismatch {
    /// A (concurrency, repeat) present on one side only.
    MissingRun {
        /// Concurrency.
        concurrency: u64,
        /// Repeat.
        repeat: u64,
        /// `candidate` or `reference`: where it is missing.
        missing_from: String,
    },
    /// Different prompt sets.
    PromptMismatch {
        /// Concurrency.
        concurrency: u64,
        /// Repeat.
        repeat: u64,
        /// Reference prompt-set hash.
        expected: String,
        /// Candidate prompt-set hash.
        actual: String,
    },
    /// Different prompt-token vectors.
    PromptTokenMismatch {
        /// Concurrency.
        concurrency: u64,
        /// Repeat.
        repeat: u64,
        /// Reference counts.
        expected: Vec<u64>,
        /// Candidate counts.
        actual: Vec<u64>,
    },
    /// Different outputs.
    OutputMismatch {
        /// Concurrency.
        concurrency: u64,
        /// Repeat.
        repeat: u64,
        /// Requests that differ.
        mismatch_count: u64,
        /// Their indices.
        mismatched_request_indices: Vec<u64>,
        /// Per request.
        request_mismatches: Vec<RequestMismatch>,
    },
}

/// How one request's output differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestMismatch {
    /// Request index.
    pub index: u64,
    /// Differing evidence fields, sorted (`missing` when one side has no evidence).
    pub fields: Vec<String>,
    /// Reference output hash.
    pub expected_output_sha256: Option<String>,
    /// Candidate output hash.
    pub actual_output_sha256: Option<String>,
    /// Both sides carried exact bytes.
    pub exact_output_compared: bool,
    /// First differing reasoning byte (or the shorter length), when bytes were compared.
    pub reasoning_first_divergent_utf8_byte: Option<u64>,
    /// First differing content byte (or the shorter length), when bytes were compared.
    pub content_first_divergent_utf8_byte: Option<u64>,
}

/// How a comparison bears on the verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictEffect {
    /// A mismatch fails the receipt (`qualification_gate`).
    Required,
    /// Recorded only (`evidence`).
    EvidenceOnly,
}

/// Matched or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// No mismatch.
    Matched,
    /// At least one mismatch.
    Mismatched,
}

/// The pairing with the reference engine's receipt of the same profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Comparison {
    /// Reference receipt path.
    pub reference_receipt: String,
    /// `sha256:` of its bytes.
    pub reference_receipt_sha256: String,
    /// Its engine name.
    pub reference_engine: String,
    /// Matched or not.
    pub result: Match,
    /// Every difference.
    pub mismatches: Vec<Mismatch>,
    /// The profile's comparison mode.
    pub comparison_mode: ComparisonMode,
    /// `qualification_gate` or `evidence`.
    pub reference_role: String,
    /// Effect on the verdict.
    pub verdict_effect: VerdictEffect,
}

/// Tool identity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// `kiln-qual`.
    pub name: String,
    /// Crate version.
    pub version: String,
}

impl Tool {
    /// This build.
    pub fn current() -> Tool {
        Tool {
            name: "kiln-qual".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// A per-profile receipt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// [`RECEIPT_SCHEMA`].
    pub schema: String,
    /// Writer.
    pub tool: Tool,
    /// UTC `YYYY-MM-DDTHH:MM:SSZ`.
    pub created_at: String,
    /// Campaign id.
    pub campaign_id: String,
    /// Engine identity.
    pub engine: EngineIdentity,
    /// Workload.
    pub workload: Workload,
    /// Canonical hash of the workload without `run_id`.
    pub workload_fingerprint: String,
    /// Memory source.
    pub memory_sampler: SamplerIdentity,
    /// Prometheus endpoint scraped around every row, if any.
    pub metrics_endpoint: Option<String>,
    /// The prompt-context preflight, when one ran.
    pub prompt_context: Option<PromptContext>,
    /// Warmup.
    pub warmup: Warmup,
    /// Measured rows in order.
    pub runs: Vec<Row>,
    /// Completion accounting.
    pub completion: Completion,
    /// The owned server's lifecycle record (`null` when attached).
    pub server_lifecycle: Option<serde_json::Value>,
    /// `qualification_gate` or `evidence`.
    pub reference_role: String,
    /// Reference pairing, when a reference was given.
    pub comparison: Option<Comparison>,
    /// Verdict.
    pub verdict: Verdict,
    /// Self-hash.
    pub receipt_sha256: String,
}

/// One profile's line in the summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileLine {
    /// Profile.
    pub profile: Profile,
    /// `completed` or `not_run_after_failure`.
    pub status: ProfileStatus,
    /// Receipt file name (relative to the summary's directory), when written.
    pub receipt: Option<String>,
    /// `sha256:` of the receipt bytes.
    pub receipt_sha256: Option<String>,
    /// The receipt's verdict.
    pub verdict: Option<Verdict>,
    /// The profile whose failure stopped this one.
    pub blocked_by_profile: Option<Profile>,
}

/// Whether a profile ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileStatus {
    /// Ran to a receipt.
    Completed,
    /// Skipped after an earlier profile failed (fail-fast).
    NotRunAfterFailure,
}

/// Fail-fast or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionPolicy {
    /// Stop after the first failed profile.
    FailFast,
    /// Run every profile.
    ContinueAfterFailure,
}

/// Server ownership.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum ServerOwner {
    /// One server launched and shut down by the campaign.
    OwnedProcessGroup {
        /// The launch recipe, `null` when it could not be read.
        launch: Option<LaunchBinding>,
    },
    /// An already running server.
    AttachedServer {
        /// Its pid (memory source), when given.
        server_pid: Option<u32>,
    },
}

/// The campaign summary, written last.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// [`SUMMARY_SCHEMA`].
    pub schema: String,
    /// Writer.
    pub tool: Tool,
    /// UTC.
    pub created_at: String,
    /// Campaign id.
    pub campaign_id: String,
    /// Prompt-set id (profiles append `-<profile>`).
    pub prompt_set_id: String,
    /// Engine name.
    pub engine: String,
    /// `qualification_gate` or `evidence`.
    pub reference_role: String,
    /// The reference campaign directory, when paired.
    pub reference_dir: Option<String>,
    /// `hashes` or `full`.
    pub output_evidence: String,
    /// Fail-fast or not.
    pub execution_policy: ExecutionPolicy,
    /// Memory source.
    pub memory_sampler: SamplerIdentity,
    /// Server ownership.
    pub server_owner: ServerOwner,
    /// Profiles in order.
    pub profiles: Vec<ProfileLine>,
    /// Passed iff every profile completed with a passed receipt.
    pub verdict: Verdict,
    /// Self-hash.
    pub summary_sha256: String,
}

/// File name of a profile's receipt: `<profile>.<engine>.json`.
pub fn receipt_name(profile: Profile, engine: &str) -> String {
    format!("{}.{engine}.json", profile.name())
}

/// File name of the summary: `campaign.<engine>.json`.
pub fn summary_name(engine: &str) -> String {
    format!("campaign.{engine}.json")
}

/// Canonical hash of a serializable record with `hash_key` removed.
pub fn self_hash<T: Serialize>(record: &T, hash_key: &str) -> String {
    let v = serde_json::to_value(record).expect("records serialize");
    document_hash(&Value::from_serde(&v), hash_key)
}

/// Pretty JSON with sorted keys and a trailing newline.
pub fn to_file_bytes<T: Serialize>(record: &T) -> Vec<u8> {
    // serde_json::Value objects are BTreeMaps (no preserve_order): keys come out sorted.
    let v = serde_json::to_value(record).expect("records serialize");
    // serde's pretty format, not `qual_json::to_pretty_json`: this document's bytes (field
    // order, raw UTF-8, serde's float spelling) are its format; the Python-compatible writer
    // would change them.
    let mut b = serde_json::to_vec_pretty(&v).expect("records serialize");
    b.push(b'\n');
    b
}

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Unreadable or not strict JSON.
    #[error("read {path}: {reason}")]
    Load {
        /// File.
        path: String,
        /// Reason.
        reason: String,
    },
    /// Schema violations.
    #[error("validate {path}: {reason}")]
    Invalid {
        /// File.
        path: String,
        /// Reason.
        reason: String,
    },
}

/// Reads a record strictly: the bytes, the strict document and the typed record.
pub fn read_record<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
) -> Result<(Vec<u8>, Value, T), ReadError> {
    let bytes =
        qual_json::read_file_limited(path, MAX_RECORD_BYTES).map_err(|e| ReadError::Load {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    let (doc, typed) = parse_record(path, &bytes)?;
    Ok((bytes, doc, typed))
}

/// Parses the bytes of a record already read from `path` (which only names it in errors),
/// as [`read_record`] does after reading.
pub fn parse_record<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    bytes: &[u8],
) -> Result<(Value, T), ReadError> {
    let shown = path.display().to_string();
    let doc = qual_json::from_slice(bytes).map_err(|e| ReadError::Load {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    let sv = doc.to_serde().ok_or_else(|| ReadError::Invalid {
        path: shown.clone(),
        reason: "holds a number JSON tools cannot represent".into(),
    })?;
    let typed = serde_json::from_value(sv).map_err(|e| ReadError::Invalid {
        path: shown,
        reason: e.to_string(),
    })?;
    Ok((doc, typed))
}

/// The self-hash recomputed on a parsed document.
pub fn document_hash(doc: &Value, hash_key: &str) -> String {
    qual_json::self_digest(doc, hash_key).unwrap_or_else(|| qual_json::canonical_digest(doc))
}

pub use qual_json::timestamp::now_utc;
