//! The receipt v1 data model as the runner writes it, and receipt naming.
//!
//! [`Receipt::to_value`] produces exactly the closed shape of the original receipts: the 14
//! top-level keys, `source`, `qualification`, `environment` (with the optional `platform` only
//! when one was collected), `model`, `workload`, `effective_config`, `results`, `metrics`,
//! `artifacts`, `unsupported`, `notes`. Numbers keep their lexical kind (a metric value `1`
//! stays an integer, `1.0` a float), because comparisons use canonical JSON text.
//!
//! Naming (spec §5.1): a generated receipt id is
//! `<timestamp>-<backend>-<host_id[:32]>-<workload_id[:24]>-<identity>-v1`, where the
//! timestamp is the run start in UTC as `%Y%m%dT%H%M%S%fZ` lower-cased (microseconds) and
//! the identity is the first 10 hex digits of SHA-256 over `workload_id "\0" variant_id`. The
//! default path is `.qualification/receipts/<backend>/<host_id>/<receipt_id>.json` (the
//! original's was the tracked `qualification/receipts/…`; see docs/compatibility.md).
//! Timestamps inside the receipt are ISO-8601 with millisecond precision and `Z`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use qual_json::{Number, Object, Value};

/// `qualification.verdict`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every required result passed.
    Passed,
    /// At least one required result did not pass.
    Failed,
}

impl Verdict {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
        }
    }
}

/// `results[].status` and a case result's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultStatus {
    /// Passed.
    Passed,
    /// Failed.
    Failed,
    /// Skipped.
    Skipped,
}

impl ResultStatus {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultStatus::Passed => "passed",
            ResultStatus::Failed => "failed",
            ResultStatus::Skipped => "skipped",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<ResultStatus> {
        match s {
            "passed" => Some(ResultStatus::Passed),
            "failed" => Some(ResultStatus::Failed),
            "skipped" => Some(ResultStatus::Skipped),
            _ => None,
        }
    }
}

/// `artifacts[].location`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArtifactLocation {
    /// Under the ignored `.qualification/` directory of the repository.
    LocalIgnored,
    /// Somewhere else (never re-checked).
    External,
}

impl ArtifactLocation {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactLocation::LocalIgnored => "local_ignored",
            ArtifactLocation::External => "external",
        }
    }
}

/// A metric (`{name, value, unit, aggregation, lower_is_better}`).
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// Name.
    pub name: String,
    /// Value (finite; integer or float kept as such).
    pub value: Number,
    /// Unit.
    pub unit: String,
    /// Aggregation.
    pub aggregation: String,
    /// Direction.
    pub lower_is_better: bool,
}

impl Metric {
    /// As a JSON object.
    pub fn to_value(&self) -> Value {
        let mut o = Object::new();
        o.insert("name", Value::from(self.name.as_str()));
        o.insert("value", Value::Number(self.value.clone()));
        o.insert("unit", Value::from(self.unit.as_str()));
        o.insert("aggregation", Value::from(self.aggregation.as_str()));
        o.insert("lower_is_better", Value::Bool(self.lower_is_better));
        Value::Object(o)
    }
}

/// `receipt.source`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// `kiln-source-tree-v1`.
    pub tree_hash_format: String,
    /// `sha256:<hex>`.
    pub tree_hash: String,
    /// 40 lowercase hex.
    pub git_commit: String,
    /// Clean worktree at start and end.
    pub git_worktree_clean: bool,
}

/// `receipt.qualification`.
#[derive(Clone, Debug, PartialEq)]
pub struct Qualification {
    /// Workload kind.
    pub kind: String,
    /// Backend.
    pub backend: String,
    /// Profile (the workload id, at most 128 characters).
    pub profile: String,
    /// Verdict.
    pub verdict: Verdict,
    /// Start (ISO-8601, ms, `Z`).
    pub started_at_utc: String,
    /// Finish (start + duration).
    pub finished_at_utc: String,
    /// Monotonic elapsed seconds.
    pub duration_seconds: f64,
    /// The invocation.
    pub command: Vec<String>,
}

/// `receipt.environment.os`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsIdentity {
    /// OS name.
    pub name: String,
    /// OS version.
    pub version: String,
    /// Kernel release.
    pub kernel: String,
    /// Machine architecture.
    pub architecture: String,
}

/// `receipt.environment`.
#[derive(Clone, Debug, PartialEq)]
pub struct Environment {
    /// Host id.
    pub host_id: String,
    /// Operating system.
    pub os: OsIdentity,
    /// Device object (the backend probe's shape).
    pub device: Value,
    /// Runtime identity.
    pub runtime: BTreeMap<String, String>,
    /// Compiler identity.
    pub compiler: BTreeMap<String, String>,
    /// Optional platform evidence (`wsl2` / `macos` shapes).
    pub platform: Option<Value>,
}

/// `receipt.workload`.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadBinding {
    /// Workload id.
    pub id: String,
    /// `sha256:` of the exact workload bytes.
    pub sha256: String,
    /// `determinism.seed` (integer or null).
    pub seed: Value,
    /// `{variant_id, <referenced variables>}`.
    pub parameters: Object,
}

/// One `results[]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResultEntry {
    /// Case id.
    pub id: String,
    /// Whether it decides the verdict.
    pub required: bool,
    /// Aggregated status.
    pub status: ResultStatus,
    /// Sum of the repetitions' monotonic durations.
    pub duration_seconds: f64,
    /// Aggregated metrics.
    pub metrics: Vec<Metric>,
    /// Details (at most 2048 characters).
    pub details: Option<String>,
}

/// One `artifacts[]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// Kind (`environment_probes`, `case_stdout`, ...).
    pub kind: String,
    /// Location.
    pub location: ArtifactLocation,
    /// Repository-relative path.
    pub path: String,
    /// `sha256:` of the bytes.
    pub sha256: String,
    /// Length.
    pub bytes: u64,
}

/// A receipt (schema_version 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Receipt {
    /// Receipt id.
    pub receipt_id: String,
    /// Creation time (= finish).
    pub created_at_utc: String,
    /// Source binding.
    pub source: Source,
    /// Qualification summary.
    pub qualification: Qualification,
    /// Environment.
    pub environment: Environment,
    /// Model fingerprint object, or null.
    pub model: Option<Value>,
    /// Workload binding, or null (environment receipts from older tools).
    pub workload: Option<WorkloadBinding>,
    /// Verified effective config (`{}` when not verified).
    pub effective_config: Value,
    /// Per-case results.
    pub results: Vec<CaseResultEntry>,
    /// Top-level metrics (the runner writes none).
    pub metrics: Vec<Metric>,
    /// Artifacts.
    pub artifacts: Vec<Artifact>,
    /// Unsupported capabilities.
    pub unsupported: Vec<String>,
    /// Notes.
    pub notes: Vec<String>,
}

fn string_map(m: &BTreeMap<String, String>) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect(),
    )
}

fn strings(v: &[String]) -> Value {
    Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect())
}

impl Receipt {
    /// The receipt as a JSON value in the closed v1 shape.
    pub fn to_value(&self) -> Value {
        let mut source = Object::new();
        source.insert(
            "tree_hash_format",
            Value::from(self.source.tree_hash_format.as_str()),
        );
        source.insert("tree_hash", Value::from(self.source.tree_hash.as_str()));
        source.insert("git_commit", Value::from(self.source.git_commit.as_str()));
        source.insert(
            "git_worktree_clean",
            Value::Bool(self.source.git_worktree_clean),
        );

        let q = &self.qualification;
        let mut qual = Object::new();
        qual.insert("kind", Value::from(q.kind.as_str()));
        qual.insert("backend", Value::from(q.backend.as_str()));
        qual.insert("profile", Value::from(q.profile.as_str()));
        qual.insert("verdict", Value::from(q.verdict.as_str()));
        qual.insert("started_at_utc", Value::from(q.started_at_utc.as_str()));
        qual.insert("finished_at_utc", Value::from(q.finished_at_utc.as_str()));
        qual.insert("duration_seconds", Value::from(q.duration_seconds));
        qual.insert("command", strings(&q.command));

        let e = &self.environment;
        let mut os = Object::new();
        os.insert("name", Value::from(e.os.name.as_str()));
        os.insert("version", Value::from(e.os.version.as_str()));
        os.insert("kernel", Value::from(e.os.kernel.as_str()));
        os.insert("architecture", Value::from(e.os.architecture.as_str()));
        let mut env = Object::new();
        env.insert("host_id", Value::from(e.host_id.as_str()));
        env.insert("os", Value::Object(os));
        env.insert("device", e.device.clone());
        env.insert("runtime", string_map(&e.runtime));
        env.insert("compiler", string_map(&e.compiler));
        if let Some(p) = &e.platform {
            env.insert("platform", p.clone());
        }

        let workload = match &self.workload {
            None => Value::Null,
            Some(w) => {
                let mut o = Object::new();
                o.insert("id", Value::from(w.id.as_str()));
                o.insert("sha256", Value::from(w.sha256.as_str()));
                o.insert("seed", w.seed.clone());
                o.insert("parameters", Value::Object(w.parameters.clone()));
                Value::Object(o)
            }
        };

        let results = self
            .results
            .iter()
            .map(|r| {
                let mut o = Object::new();
                o.insert("id", Value::from(r.id.as_str()));
                o.insert("required", Value::Bool(r.required));
                o.insert("status", Value::from(r.status.as_str()));
                o.insert("duration_seconds", Value::from(r.duration_seconds));
                o.insert(
                    "metrics",
                    Value::Array(r.metrics.iter().map(Metric::to_value).collect()),
                );
                o.insert(
                    "details",
                    r.details.as_deref().map(Value::from).unwrap_or(Value::Null),
                );
                Value::Object(o)
            })
            .collect();
        let artifacts = self
            .artifacts
            .iter()
            .map(|a| {
                let mut o = Object::new();
                o.insert("kind", Value::from(a.kind.as_str()));
                o.insert("location", Value::from(a.location.as_str()));
                o.insert("path", Value::from(a.path.as_str()));
                o.insert("sha256", Value::from(a.sha256.as_str()));
                o.insert("bytes", Value::from(a.bytes));
                Value::Object(o)
            })
            .collect();

        let mut r = Object::new();
        r.insert("schema_version", Value::from(1u64));
        r.insert("receipt_id", Value::from(self.receipt_id.as_str()));
        r.insert("created_at_utc", Value::from(self.created_at_utc.as_str()));
        r.insert("source", Value::Object(source));
        r.insert("qualification", Value::Object(qual));
        r.insert("environment", Value::Object(env));
        r.insert("model", self.model.clone().unwrap_or(Value::Null));
        r.insert("workload", workload);
        r.insert("effective_config", self.effective_config.clone());
        r.insert("results", Value::Array(results));
        r.insert(
            "metrics",
            Value::Array(self.metrics.iter().map(Metric::to_value).collect()),
        );
        r.insert("artifacts", Value::Array(artifacts));
        r.insert("unsupported", strings(&self.unsupported));
        r.insert("notes", strings(&self.notes));
        Value::Object(r)
    }
}

/// Whether `s` is a valid receipt id (`^[a-z0-9][a-z0-9._-]{2,127}$`).
pub fn is_valid_receipt_id(s: &str) -> bool {
    let b = s.as_bytes();
    (3..=128).contains(&b.len())
        && matches!(b[0], b'a'..=b'z' | b'0'..=b'9')
        && b[1..]
            .iter()
            .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

/// Whether `s` is a valid host id (`^[a-z0-9][a-z0-9._-]{1,63}$`).
pub fn is_valid_host_id(s: &str) -> bool {
    let b = s.as_bytes();
    (2..=64).contains(&b.len())
        && matches!(b[0], b'a'..=b'z' | b'0'..=b'9')
        && b[1..]
            .iter()
            .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

fn prefix_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// First 10 hex digits of SHA-256 over `workload_id "\0" variant_id`.
pub fn receipt_identity(workload_id: &str, variant_id: &str) -> String {
    let mut h = qual_json::Sha256Stream::new();
    h.update(workload_id);
    h.update([0u8]);
    h.update(variant_id);
    h.finish_hex()[..10].to_string()
}

/// The generated receipt id (spec §5.1).
pub fn generate_receipt_id(
    started: SystemTime,
    backend: &str,
    host_id: &str,
    workload_id: &str,
    variant_id: &str,
) -> String {
    format!(
        "{}-{}-{}-{}-{}-v1",
        id_timestamp(started),
        backend,
        prefix_chars(host_id, 32),
        prefix_chars(workload_id, 24),
        receipt_identity(workload_id, variant_id)
    )
}

/// The default receipt path relative to the repository root: an exploratory receipt, below
/// the ignored `.qualification/receipts/` (so the next run still sees a clean worktree);
/// reviewed evidence is moved to, or written with `--output` into, the tracked
/// `qualification/receipts/` on purpose.
pub fn default_receipt_path(backend: &str, host_id: &str, receipt_id: &str) -> String {
    format!(".qualification/receipts/{backend}/{host_id}/{receipt_id}.json")
}

/// `(year, month, day, hour, minute, second, microsecond)` of a time in UTC (times before
/// the epoch read as the epoch, like the rest of the receipt clock handling).
fn utc_parts(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let u = time::OffsetDateTime::from_unix_timestamp(d.as_secs() as i64)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    (
        i64::from(u.year()),
        u32::from(u8::from(u.month())),
        u32::from(u.day()),
        u32::from(u.hour()),
        u32::from(u.minute()),
        u32::from(u.second()),
        d.subsec_micros(),
    )
}

/// `2026-07-28T22:25:35.119Z` (milliseconds truncated, as Python's `isoformat(timespec="milliseconds")`).
pub fn format_utc_millis(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, us) = utc_parts(t);
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
        us / 1000
    )
}

/// `20260728t222535119053z` (microseconds, lower-cased).
pub fn id_timestamp(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, us) = utc_parts(t);
    format!("{y:04}{mo:02}{d:02}t{h:02}{mi:02}{s:02}{us:06}z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_matches_the_recorded_example() {
        assert_eq!(
            receipt_identity("serving-metal-endurance-v1", "metal-endurance"),
            "267c4e3d84"
        );
    }

    #[test]
    fn generated_id_truncates_and_formats_like_the_original() {
        // 2026-07-29T12:53:21.404525Z
        let t = UNIX_EPOCH + Duration::from_micros(1_785_329_601_404_525);
        assert_eq!(id_timestamp(t), "20260729t125321404525z");
        assert_eq!(format_utc_millis(t), "2026-07-29T12:53:21.404Z");
        let id = generate_receipt_id(
            t,
            "metal",
            "macbook-air-m1",
            "serving-metal-endurance-v1",
            "metal-endurance",
        );
        assert_eq!(
            id,
            "20260729t125321404525z-metal-macbook-air-m1-serving-metal-endurance--267c4e3d84-v1"
        );
        assert!(is_valid_receipt_id(&id));
        assert_eq!(
            default_receipt_path("cpu", "h1", "x-v1"),
            ".qualification/receipts/cpu/h1/x-v1.json"
        );
    }

    #[test]
    fn id_syntax_checks() {
        assert!(is_valid_host_id("strix-halo"));
        assert!(!is_valid_host_id("a"));
        assert!(!is_valid_host_id("Strix"));
        assert!(!is_valid_host_id("-ab"));
        assert!(!is_valid_host_id(&"a".repeat(65)));
        assert!(is_valid_receipt_id("abc"));
        assert!(!is_valid_receipt_id("ab"));
    }

    #[test]
    fn epoch_and_leap_day_dates() {
        assert_eq!(format_utc_millis(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(format_utc_millis(leap), "2000-02-29T00:00:00.000Z");
    }
}
