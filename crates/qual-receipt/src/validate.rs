//! Receipt v1 validation: the closed record, cross-field rules, platform evidence and the three
//! strict checks (`--require-current-source`, `--require-local-artifacts`,
//! `--require-known-commit`).
//!
//! This module owns the rules of the original implementation's `receipt.py` (version c8d9f585)
//! and applies them to a strictly parsed [`Value`], so that a document the typed model could not
//! even represent (a retyped field, an unknown key) is still reported precisely.
//!
//! Invariants:
//! - validation never stops at the first problem: every violation is collected, in the order
//!   the original reports them, each with the dotted path (`receipt.results[0].status`) of the
//!   value it is about;
//! - a receipt is valid iff [`validate`] returns no violation; the verdict of every file in the
//!   reference corpus matches the original's;
//! - the few places where the original compares with Python `==` (so `1`, `1.0` and `true` are
//!   equal) keep that meaning ([`py_eq`]); everywhere else numbers keep their JSON kind;
//! - strict checks only ever add violations; basic mode touches neither the file system nor git;
//! - basic mode also applies kiln-qual's internal-consistency rules ([`crate::consistency`]),
//!   which the original lacks (a hand-flipped status or a dropped result fails here).

use qual_json::{Int, Number, Object, Value};
use std::cmp::Ordering;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The source-tree digest format every receipt must name.
pub const TREE_HASH_FORMAT: &str = "kiln-source-tree-v1";
/// Longest accepted result `details` text, in characters.
pub const MAX_RESULT_DETAIL_CHARACTERS: usize = 2048;
/// Qualification kinds, sorted.
pub const KINDS: [&str; 7] = [
    "correctness",
    "environment",
    "eval",
    "performance",
    "serving",
    "soak",
    "training",
];
/// Kinds whose passed receipts must identify a model.
pub const MODEL_KINDS: [&str; 5] = ["eval", "performance", "serving", "soak", "training"];
/// Backends, sorted (the workload contract's list).
pub use qual_contract::constants::BACKENDS;
/// Verdicts, sorted.
pub const VERDICTS: [&str; 2] = ["failed", "passed"];
/// Result statuses, sorted.
pub const RESULT_STATUSES: [&str; 3] = ["failed", "passed", "skipped"];
/// Artifact locations, sorted.
pub const ARTIFACT_LOCATIONS: [&str; 2] = ["external", "local_ignored"];
/// Capability statuses, sorted.
pub const CAPABILITY_STATUSES: [&str; 2] = ["available", "unavailable"];

/// Top-level keys (exact).
pub const TOP_LEVEL_KEYS: [&str; 14] = [
    "artifacts",
    "created_at_utc",
    "effective_config",
    "environment",
    "metrics",
    "model",
    "notes",
    "qualification",
    "receipt_id",
    "results",
    "schema_version",
    "source",
    "unsupported",
    "workload",
];
const SOURCE_KEYS: [&str; 4] = [
    "git_commit",
    "git_worktree_clean",
    "tree_hash",
    "tree_hash_format",
];
const QUALIFICATION_KEYS: [&str; 8] = [
    "backend",
    "command",
    "duration_seconds",
    "finished_at_utc",
    "kind",
    "profile",
    "started_at_utc",
    "verdict",
];
const ENVIRONMENT_REQUIRED_KEYS: [&str; 5] = ["compiler", "device", "host_id", "os", "runtime"];
const ENVIRONMENT_KEYS: [&str; 6] = ["compiler", "device", "host_id", "os", "platform", "runtime"];
const OS_KEYS: [&str; 4] = ["architecture", "kernel", "name", "version"];
const PLATFORM_KEYS: [&str; 4] = ["capabilities", "details", "kind", "observations"];
/// WSL2 capability keys (exact).
pub const WSL2_CAPABILITY_KEYS: [&str; 16] = [
    "cgroup_memory_delegation",
    "cuda_driver_bridge",
    "cuda_runtime",
    "cuda_toolkit",
    "driver_identity",
    "filesystem_semantics",
    "gpu_temperature",
    "host_temperature",
    "memory_accounting",
    "network_containment",
    "nvml",
    "process_containment",
    "systemd_system",
    "systemd_user_transient",
    "windows_identity",
    "wsl_identity",
];
const WSL2_OBSERVATION_KEYS: [&str; 2] = ["gpu_temperature", "host_temperatures"];
/// macOS capability keys (exact).
pub const MACOS_CAPABILITY_KEYS: [&str; 12] = [
    "apple_hardware_identity",
    "filesystem_semantics",
    "gpu_temperature",
    "host_temperature",
    "memory_pressure",
    "metal_compiler",
    "metal_runtime_identity",
    "network_containment",
    "process_containment",
    "thermal_pressure",
    "toolchain_provenance",
    "unified_memory_accounting",
];
const MACOS_OBSERVATION_KEYS: [&str; 8] = [
    "filesystem",
    "gpu_temperature",
    "hardware_identity",
    "host_temperature",
    "memory_pressure",
    "metal_runtime",
    "thermal_pressure",
    "unified_memory",
];
const MACOS_HARDWARE_KEYS: [&str; 7] = [
    "chip_type",
    "cpu_brand",
    "gpu_core_count",
    "kernel_build",
    "machine_model",
    "machine_name",
    "physical_memory_bytes",
];
const MACOS_METAL_RUNTIME_KEYS: [&str; 5] = [
    "current_allocated_bytes",
    "has_unified_memory",
    "max_buffer_length_bytes",
    "name",
    "recommended_max_working_set_bytes",
];
const MACOS_FILESYSTEM_KEYS: [&str; 10] = [
    "atomic_replace",
    "case_sensitive",
    "directory_fsync",
    "fstype",
    "full_file_sync",
    "hardlink",
    "mount_point",
    "root",
    "source",
    "symlink",
];
const MACOS_UNIFIED_MEMORY_KEYS: [&str; 4] = [
    "swap_encrypted",
    "swap_total_bytes",
    "swap_used_bytes",
    "total_bytes",
];
const MACOS_MEMORY_PRESSURE_KEYS: [&str; 11] = [
    "free_percent",
    "page_size_bytes",
    "pageins",
    "pageouts",
    "pages_active",
    "pages_free",
    "pages_inactive",
    "pages_occupied_by_compressor",
    "pages_wired_down",
    "swapins",
    "swapouts",
];
const MACOS_THERMAL_PRESSURE_KEYS: [&str; 3] =
    ["cpu_power_status", "performance_warning", "thermal_warning"];
const HOST_TEMPERATURE_KEYS: [&str; 3] = ["name", "source", "temperature_millicelsius"];
const GPU_TEMPERATURE_KEYS: [&str; 3] = ["device_uuid", "source", "temperature_millicelsius"];
const HOST_TEMPERATURE_SOURCES: [&str; 2] = ["linux_hwmon", "windows_formatted_thermal_zone"];
const DEVICE_REQUIRED_KEYS: [&str; 5] = [
    "architecture",
    "driver",
    "memory_bytes",
    "name",
    "unified_memory",
];
const DEVICE_KEYS: [&str; 11] = [
    "architecture",
    "compute_capability",
    "compute_units",
    "device_uuid",
    "driver",
    "logical_index",
    "memory_available_bytes",
    "memory_bytes",
    "name",
    "pci_bus_id",
    "unified_memory",
];
const MODEL_KEYS: [&str; 6] = [
    "chat_template_hash",
    "config_hash",
    "id",
    "path",
    "tokenizer_hash",
    "weight_files",
];
const WEIGHT_KEYS: [&str; 3] = ["bytes", "path", "sha256"];
const WORKLOAD_KEYS: [&str; 4] = ["id", "parameters", "seed", "sha256"];
const RESULT_KEYS: [&str; 6] = [
    "details",
    "duration_seconds",
    "id",
    "metrics",
    "required",
    "status",
];
const METRIC_KEYS: [&str; 5] = ["aggregation", "lower_is_better", "name", "unit", "value"];
const ARTIFACT_KEYS: [&str; 5] = ["bytes", "kind", "location", "path", "sha256"];

/// One broken rule: the dotted path of the value it is about and what is wrong with it.
///
/// `Display` gives `"<path> <message>"`, which for most rules is exactly the original
/// implementation's error text.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// What is wrong, reading after the path: `must be finite numeric`.
    pub message: String,
    /// Dotted path such as `receipt.results[0].metrics[2].value` (`receipt` is the root).
    pub path: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{} {}", self.path, self.message)
        }
    }
}

/// Computes the current source-tree digest of a repository root (`sha256:<hex>`), or says why
/// it could not. The CLI wires the runner's `qual_probe` implementation in; the validator only
/// compares.
pub type SourceTreeDigestFn<'a> = &'a dyn Fn(&Path) -> Result<String, String>;

/// Which strict checks to run, and against which repository root.
#[derive(Clone, Copy, Default)]
pub struct StrictChecks<'a> {
    /// Repository root that relative artifact paths, the source tree and git refer to.
    pub root: Option<&'a Path>,
    /// Recompute the source-tree digest of `root` and require `source.tree_hash` to equal it.
    /// `Some(f)` enables the check with `f` as the digest function.
    pub current_source: Option<SourceTreeDigestFn<'a>>,
    /// Require every `local_ignored` artifact to exist under `<root>/.qualification` and
    /// re-hash to its recorded digest and size.
    pub local_artifacts: bool,
    /// Require `git cat-file -e <commit>^{commit}` to succeed in `root`.
    pub known_commit: bool,
}

impl fmt::Debug for StrictChecks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StrictChecks")
            .field("root", &self.root)
            .field("current_source", &self.current_source.is_some())
            .field("local_artifacts", &self.local_artifacts)
            .field("known_commit", &self.known_commit)
            .finish()
    }
}

/// Why a receipt file could not be loaded (then it is invalid with this single violation).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Unreadable, too large, or not strict JSON.
    #[error("{0}")]
    Json(#[from] qual_json::LoadError),
    /// Valid JSON, but the top level is not an object.
    #[error("{path}: receipt must be a JSON object")]
    NotAnObject {
        /// The path as given.
        path: String,
    },
}

/// Loads a receipt file strictly (UTF-8 without BOM, no duplicate keys, no `NaN`, exact
/// numbers) and requires a top-level object. Returns the value and the exact bytes.
pub fn load(path: &Path) -> Result<(Value, Vec<u8>), LoadError> {
    let limits = qual_json::Limits {
        max_bytes: 64 * 1024 * 1024,
        ..qual_json::Limits::default()
    };
    let (value, bytes) = qual_json::load_file(path, limits)?;
    if value.as_object().is_none() {
        return Err(LoadError::NotAnObject {
            path: path.display().to_string(),
        });
    }
    Ok((value, bytes))
}

/// The outcome of checking one receipt file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FileOutcome {
    /// Loaded and no rule is broken.
    Valid,
    /// Could not be loaded; the reason reads after "failed to load the receipt: ".
    Unloadable {
        /// The load error text.
        error: String,
    },
    /// Loaded, but breaks the listed rules.
    Invalid {
        /// Every violation, in report order.
        violations: Vec<Violation>,
    },
}

impl FileOutcome {
    /// Whether the file is a valid receipt.
    pub fn is_valid(&self) -> bool {
        matches!(self, FileOutcome::Valid)
    }

    /// Every problem as one line of text (the original's `errors` array).
    pub fn error_lines(&self) -> Vec<String> {
        match self {
            FileOutcome::Valid => Vec::new(),
            FileOutcome::Unloadable { error } => vec![error.clone()],
            FileOutcome::Invalid { violations } => {
                violations.iter().map(ToString::to_string).collect()
            }
        }
    }
}

/// Loads and validates one file.
pub fn check_file(path: &Path, strict: &StrictChecks<'_>) -> FileOutcome {
    match load(path) {
        Err(e) => FileOutcome::Unloadable {
            error: e.to_string(),
        },
        Ok((value, _)) => {
            let violations = validate_strict(&value, strict);
            if violations.is_empty() {
                FileOutcome::Valid
            } else {
                FileOutcome::Invalid { violations }
            }
        }
    }
}

/// Basic validation (no file system, no git): every violation of the closed record, the
/// cross-field rules and the platform evidence rules.
pub fn validate(receipt: &Value) -> Vec<Violation> {
    validate_strict(receipt, &StrictChecks::default())
}

/// Basic validation plus the requested strict checks.
pub fn validate_strict(receipt: &Value, strict: &StrictChecks<'_>) -> Vec<Violation> {
    let mut c = Checker::default();
    c.receipt(receipt, strict);
    c.out
}

static NULL: Value = Value::Null;

/// `obj.get(key)` in Python terms: a missing key and an absent object both read as `null`.
fn get<'a>(o: Option<&'a Object>, key: &str) -> &'a Value {
    o.and_then(|o| o.get(key)).unwrap_or(&NULL)
}

/// The value as a Python `int` (bools are ints in Python), for the few rules that compare
/// integers with `isinstance(x, int)`.
fn py_int(v: &Value) -> Option<Int> {
    match v {
        Value::Bool(b) => Some(Int::from(i64::from(*b))),
        Value::Number(Number::Int(i)) => Some(i.clone()),
        _ => None,
    }
}

/// Exact integer ordering on arbitrary-precision integers.
pub fn cmp_int(a: &Int, b: &Int) -> Ordering {
    match (a.is_negative(), b.is_negative()) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (neg, _) => {
            let mag = a
                .digits()
                .len()
                .cmp(&b.digits().len())
                .then_with(|| a.digits().cmp(b.digits()));
            if neg {
                mag.reverse()
            } else {
                mag
            }
        }
    }
}

fn int_sign(i: &Int) -> Ordering {
    if i.is_negative() {
        Ordering::Less
    } else if i.digits() == "0" {
        Ordering::Equal
    } else {
        Ordering::Greater
    }
}

/// A non-bool integer literal.
fn strict_int(v: &Value) -> Option<&Int> {
    v.as_int()
}

/// Python `==` between two JSON values: numbers (and bools) compare by numeric value, so
/// `1 == 1.0 == true`; everything else structurally.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    fn num(v: &Value) -> Option<NumKey> {
        match v {
            Value::Bool(b) => Some(NumKey::Int(Int::from(i64::from(*b)))),
            Value::Number(Number::Int(i)) => Some(NumKey::Int(i.clone())),
            Value::Number(Number::Float(f)) => Some(NumKey::Float(*f)),
            _ => None,
        }
    }
    enum NumKey {
        Int(Int),
        Float(f64),
    }
    match (num(a), num(b)) {
        (Some(x), Some(y)) => match (x, y) {
            (NumKey::Int(x), NumKey::Int(y)) => x == y,
            (NumKey::Float(x), NumKey::Float(y)) => x == y,
            (NumKey::Int(i), NumKey::Float(f)) | (NumKey::Float(f), NumKey::Int(i)) => {
                crate::decimal::Decimal::from_int(&i) == crate::decimal::Decimal::from_f64(f)
            }
        },
        (None, None) => match (a, b) {
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
            }
            _ => a == b,
        },
        _ => false,
    }
}

/// `isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)`.
pub fn is_finite_number(v: &Value) -> bool {
    match v {
        Value::Number(Number::Int(i)) => i.as_f64().is_some(),
        Value::Number(Number::Float(f)) => f.is_finite(),
        _ => false,
    }
}

fn is_ascii_class(
    s: &str,
    first: fn(u8) -> bool,
    rest: fn(u8) -> bool,
    min: usize,
    max: usize,
) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && first(b[0])
        && b.len() > min
        && b.len() <= max + 1
        && b[1..].iter().all(|&c| rest(c))
}

fn lower_digit(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}
fn id_rest(c: u8) -> bool {
    lower_digit(c) || matches!(c, b'.' | b'_' | b'-')
}

/// `^[a-z0-9][a-z0-9._-]{2,127}$`
pub fn is_receipt_id(s: &str) -> bool {
    is_ascii_class(s, lower_digit, id_rest, 2, 127)
}
/// `^[a-z0-9][a-z0-9._-]{0,127}$`
pub fn is_result_id(s: &str) -> bool {
    is_ascii_class(s, lower_digit, id_rest, 0, 127)
}
/// `^[a-z][a-z0-9_.-]{0,127}$`
pub fn is_metric_name(s: &str) -> bool {
    is_ascii_class(s, |c| c.is_ascii_lowercase(), id_rest, 0, 127)
}
/// `^[a-z0-9][a-z0-9._-]{1,63}$`
pub fn is_host_id(s: &str) -> bool {
    is_ascii_class(s, lower_digit, id_rest, 1, 63)
}
/// `^[a-z][a-z0-9_-]*$`
pub fn is_config_segment(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|&c| lower_digit(c) || matches!(c, b'_' | b'-'))
}
/// `^[0-9a-f]{40}$`
pub fn is_commit(s: &str) -> bool {
    qual_git::is_commit_id(s)
}

/// Parses a receipt timestamp: ISO-8601 ending in `Z` (Python's `datetime.fromisoformat` after
/// replacing `Z` by `+00:00`). Returns microseconds since the Unix epoch; digits beyond
/// microseconds are truncated like Python does.
pub fn parse_utc_timestamp(text: &str) -> Result<i128, TimestampError> {
    let body = text.strip_suffix('Z').ok_or(TimestampError::NoZ)?;
    parse_naive_iso(body).ok_or(TimestampError::Invalid)
}

/// Why a timestamp was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampError {
    /// Does not end in `Z`.
    NoZ,
    /// Not a valid ISO-8601 date-time.
    Invalid,
}

fn digits_at(b: &[u8], pos: usize, n: usize) -> Option<i64> {
    let s = b.get(pos..pos + n)?;
    if !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn parse_naive_iso(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    // Date: YYYY-MM-DD or YYYYMMDD.
    let year = digits_at(b, 0, 4)?;
    let (month, day, mut pos) = if b.get(4) == Some(&b'-') {
        if b.get(7) != Some(&b'-') {
            return None;
        }
        (digits_at(b, 5, 2)?, digits_at(b, 8, 2)?, 10)
    } else {
        (digits_at(b, 4, 2)?, digits_at(b, 6, 2)?, 8)
    };
    if !(1..=9999).contains(&year) || !(1..=12).contains(&month) {
        return None;
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day < 1 || day > month_days[(month - 1) as usize] {
        return None;
    }
    // Separator: any single non-digit character (Python accepts any).
    let sep = s[pos..].chars().next()?;
    if sep.is_ascii_digit() {
        return None;
    }
    pos += sep.len_utf8();
    let hour = digits_at(b, pos, 2)?;
    pos += 2;
    let mut minute = 0;
    let mut second = 0;
    let mut micros = 0i64;
    let extended = b.get(pos) == Some(&b':');
    if pos < b.len() {
        if extended {
            pos += 1;
        }
        minute = digits_at(b, pos, 2)?;
        pos += 2;
        if pos < b.len() {
            if extended {
                if b.get(pos) != Some(&b':') {
                    return None;
                }
                pos += 1;
            }
            second = digits_at(b, pos, 2)?;
            pos += 2;
            if pos < b.len() {
                if !matches!(b[pos], b'.' | b',') {
                    return None;
                }
                pos += 1;
                let frac = &b[pos..];
                if frac.is_empty() || !frac.iter().all(u8::is_ascii_digit) {
                    return None;
                }
                for i in 0..6 {
                    micros = micros * 10 + frac.get(i).map_or(0, |d| i64::from(d - b'0'));
                }
                pos = b.len();
            }
        }
    }
    if pos != b.len() || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some(i128::from(secs) * 1_000_000 + i128::from(micros))
}

#[derive(Default)]
struct Checker {
    out: Vec<Violation>,
}

impl Checker {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.out.push(Violation {
            path: path.into(),
            message: message.into(),
        });
    }

    /// `_check_exact_keys` / `_check_required_keys`: the object (or `None` when the value is not
    /// an object, after reporting it).
    fn keys<'a>(
        &mut self,
        v: &'a Value,
        required: &[&str],
        allowed: &[&str],
        ctx: &str,
    ) -> Option<&'a Object> {
        let Some(o) = v.as_object() else {
            self.push(ctx, "must be an object");
            return None;
        };
        let mut missing: Vec<&str> = required
            .iter()
            .copied()
            .filter(|k| !o.contains_key(k))
            .collect();
        missing.sort_unstable();
        let mut unknown: Vec<&str> = o
            .keys()
            .map(String::as_str)
            .filter(|k| !allowed.contains(k))
            .collect();
        unknown.sort_unstable();
        if !missing.is_empty() {
            self.push(ctx, format!("missing keys: {}", missing.join(", ")));
        }
        if !unknown.is_empty() {
            self.push(ctx, format!("has unknown keys: {}", unknown.join(", ")));
        }
        Some(o)
    }

    fn exact<'a>(&mut self, v: &'a Value, keys: &[&str], ctx: &str) -> Option<&'a Object> {
        self.keys(v, keys, keys, ctx)
    }

    /// `_check_string`: the string, or `""` after reporting.
    fn string<'a>(&mut self, v: &'a Value, ctx: &str, allow_empty: bool) -> &'a str {
        match v.as_str() {
            Some(s) if allow_empty || !s.is_empty() => s,
            _ => {
                self.push(
                    ctx,
                    if allow_empty {
                        "must be a string"
                    } else {
                        "must be a non-empty string"
                    },
                );
                ""
            }
        }
    }

    fn boolean(&mut self, v: &Value, ctx: &str) -> Option<bool> {
        let b = v.as_bool();
        if b.is_none() {
            self.push(ctx, "must be a boolean");
        }
        b
    }

    fn nonnegative_number(&mut self, v: &Value, ctx: &str) -> Option<f64> {
        let ok = is_finite_number(v)
            && match v {
                Value::Number(Number::Int(i)) => !i.is_negative(),
                Value::Number(Number::Float(f)) => *f >= 0.0,
                _ => false,
            };
        if !ok {
            self.push(ctx, "must be a finite non-negative number");
            return None;
        }
        v.as_f64()
    }

    fn positive_int(&mut self, v: &Value, ctx: &str) -> bool {
        let ok = strict_int(v).is_some_and(|i| int_sign(i) == Ordering::Greater);
        if !ok {
            self.push(ctx, "must be a positive integer");
        }
        ok
    }

    fn nonnegative_int(v: &Value) -> bool {
        strict_int(v).is_some_and(|i| !i.is_negative())
    }

    fn sha256<'a>(&mut self, v: &'a Value, ctx: &str) -> &'a str {
        match v.as_str() {
            Some(s) if qual_json::is_sha256_digest(s) => s,
            _ => {
                self.push(ctx, "must match sha256:<64 lowercase hex characters>");
                ""
            }
        }
    }

    fn timestamp(&mut self, v: &Value, ctx: &str) -> Option<i128> {
        let text = self.string(v, ctx, false);
        if text.is_empty() {
            return None;
        }
        match parse_utc_timestamp(text) {
            Ok(t) => Some(t),
            Err(TimestampError::NoZ) => {
                self.push(ctx, "must be an ISO-8601 UTC timestamp ending in Z");
                None
            }
            Err(TimestampError::Invalid) => {
                self.push(ctx, "must be a valid ISO-8601 UTC timestamp");
                None
            }
        }
    }

    fn string_map(&mut self, v: &Value, ctx: &str) {
        let Some(o) = v.as_object().filter(|o| !o.is_empty()) else {
            self.push(ctx, "must be a non-empty object");
            return;
        };
        for (key, item) in o.iter() {
            if key.is_empty() {
                self.push(ctx, "keys must be non-empty strings");
            }
            self.string(item, &format!("{ctx}.{key}"), false);
        }
    }

    fn one_of(&mut self, v: &Value, allowed: &[&str], ctx: &str) -> bool {
        let ok = v.as_str().is_some_and(|s| allowed.contains(&s));
        if !ok {
            self.push(
                ctx,
                format!("must be one of {}", qual_json::show::list(allowed)),
            );
        }
        ok
    }

    fn temperature(&mut self, v: &Value, ctx: &str, min: i64, max: i64) {
        let ok = strict_int(v)
            .and_then(Int::as_i64)
            .is_some_and(|t| (min..=max).contains(&t));
        if !ok {
            self.push(ctx, format!("must be an integer from {min} through {max}"));
        }
    }

    fn config(&mut self, v: &Value, ctx: &str) {
        let Some(o) = v.as_object() else {
            self.push(ctx, "must be an object");
            return;
        };
        for (key, item) in o.iter() {
            if !is_config_segment(key) {
                self.push(
                    ctx,
                    format!(
                        "key {} must be a dot-path-compatible segment",
                        qual_json::show::quote(key)
                    ),
                );
                continue;
            }
            let item_ctx = format!("{ctx}.{key}");
            match item {
                Value::Object(_) => self.config(item, &item_ctx),
                Value::Null | Value::String(_) | Value::Bool(_) => {}
                _ if is_finite_number(item) => {}
                _ => self.push(item_ctx, "must be a finite JSON scalar or nested object"),
            }
        }
    }

    fn metric(&mut self, v: &Value, ctx: &str) -> String {
        let m = self.exact(v, &METRIC_KEYS, ctx);
        let name = self.string(get(m, "name"), &format!("{ctx}.name"), false);
        if !name.is_empty() && !is_metric_name(name) {
            self.push(format!("{ctx}.name"), "has invalid metric syntax");
        }
        if !is_finite_number(get(m, "value")) {
            self.push(format!("{ctx}.value"), "must be finite numeric");
        }
        self.string(get(m, "unit"), &format!("{ctx}.unit"), false);
        self.string(get(m, "aggregation"), &format!("{ctx}.aggregation"), false);
        self.boolean(get(m, "lower_is_better"), &format!("{ctx}.lower_is_better"));
        name.to_owned()
    }

    fn metrics(&mut self, v: &Value, ctx: &str) {
        let Some(items) = v.as_array() else {
            self.push(ctx, "must be an array");
            return;
        };
        let mut names: Vec<String> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let name = self.metric(item, &format!("{ctx}[{i}]"));
            if names.contains(&name) {
                self.push(
                    ctx,
                    format!(
                        "contains duplicate metric name {}",
                        qual_json::show::quote(&name)
                    ),
                );
            }
            names.push(name);
        }
    }

    fn model(&mut self, v: &Value, ctx: &str) {
        let m = self.exact(v, &MODEL_KEYS, ctx);
        self.string(get(m, "id"), &format!("{ctx}.id"), false);
        self.string(get(m, "path"), &format!("{ctx}.path"), false);
        for key in ["config_hash", "tokenizer_hash"] {
            self.sha256(get(m, key), &format!("{ctx}.{key}"));
        }
        let template = get(m, "chat_template_hash");
        if !template.is_null() {
            self.sha256(template, &format!("{ctx}.chat_template_hash"));
        }
        let Some(weights) = get(m, "weight_files").as_array().filter(|w| !w.is_empty()) else {
            self.push(format!("{ctx}.weight_files"), "must be a non-empty array");
            return;
        };
        let mut paths: Vec<&str> = Vec::new();
        for (i, raw) in weights.iter().enumerate() {
            let wctx = format!("{ctx}.weight_files[{i}]");
            let w = self.exact(raw, &WEIGHT_KEYS, &wctx);
            let path = self.string(get(w, "path"), &format!("{wctx}.path"), false);
            if paths.contains(&path) {
                self.push(
                    format!("{ctx}.weight_files"),
                    format!("contains duplicate path {}", qual_json::show::quote(path)),
                );
            }
            paths.push(path);
            self.sha256(get(w, "sha256"), &format!("{wctx}.sha256"));
            self.positive_int(get(w, "bytes"), &format!("{wctx}.bytes"));
        }
    }

    fn workload(&mut self, v: &Value, ctx: &str) {
        let w = self.exact(v, &WORKLOAD_KEYS, ctx);
        self.string(get(w, "id"), &format!("{ctx}.id"), false);
        self.sha256(get(w, "sha256"), &format!("{ctx}.sha256"));
        let seed = get(w, "seed");
        if !seed.is_null() && !Self::nonnegative_int(seed) {
            self.push(
                format!("{ctx}.seed"),
                "must be null or a non-negative integer",
            );
        }
        if get(w, "parameters").as_object().is_none() {
            self.push(format!("{ctx}.parameters"), "must be an object");
        }
    }

    fn wsl2_observations(
        &mut self,
        v: &Value,
        capabilities: Option<&Object>,
        device: Option<&Object>,
    ) {
        let ctx = "receipt.environment.platform.observations";
        let obs = self.exact(v, &WSL2_OBSERVATION_KEYS, ctx);
        let empty = Vec::new();
        let host = match get(obs, "host_temperatures").as_array() {
            Some(a) => a,
            None => {
                self.push(format!("{ctx}.host_temperatures"), "must be an array");
                &empty
            }
        };
        let mut seen: Vec<(String, String)> = Vec::new();
        for (i, raw) in host.iter().enumerate() {
            let ictx = format!("{ctx}.host_temperatures[{i}]");
            let t = self.exact(raw, &HOST_TEMPERATURE_KEYS, &ictx);
            let source = get(t, "source");
            self.one_of(source, &HOST_TEMPERATURE_SOURCES, &format!("{ictx}.source"));
            let name = self.string(get(t, "name"), &format!("{ictx}.name"), false);
            if !name.is_empty() && name.trim().is_empty() {
                self.push(
                    format!("{ictx}.name"),
                    "must contain a non-whitespace character",
                );
            }
            let source_text = match source {
                Value::String(s) => s.clone(),
                Value::Null => "null".to_owned(),
                other => qual_json::to_canonical_string(other),
            };
            let identity = (source_text, name.to_owned());
            if seen.contains(&identity) {
                self.push(
                    format!("{ctx}.host_temperatures"),
                    format!(
                        "contains duplicate source/name ({}, {})",
                        qual_json::show::quote(&identity.0),
                        qual_json::show::quote(&identity.1)
                    ),
                );
            }
            seen.push(identity);
            self.temperature(
                get(t, "temperature_millicelsius"),
                &format!("{ictx}.temperature_millicelsius"),
                -50_000,
                200_000,
            );
        }

        let gpu = get(obs, "gpu_temperature");
        if !gpu.is_null() {
            let gctx = format!("{ctx}.gpu_temperature");
            let g = self.exact(gpu, &GPU_TEMPERATURE_KEYS, &gctx);
            if get(g, "source").as_str() != Some("nvml") {
                self.push(format!("{gctx}.source"), "must be 'nvml'");
            }
            let uuid = self.string(get(g, "device_uuid"), &format!("{gctx}.device_uuid"), false);
            match get(device, "device_uuid")
                .as_str()
                .filter(|s| !s.is_empty())
            {
                None => self.push(&gctx, "requires a selected device UUID"),
                Some(selected) if uuid != selected => {
                    self.push(
                        format!("{gctx}.device_uuid"),
                        "must match the selected device",
                    );
                }
                Some(_) => {}
            }
            self.temperature(
                get(g, "temperature_millicelsius"),
                &format!("{gctx}.temperature_millicelsius"),
                1_000,
                150_000,
            );
        }

        let pctx = "receipt.environment.platform";
        let available = |k: &str| get(capabilities, k).as_str() == Some("available");
        if available("host_temperature") == host.is_empty() {
            self.push(
                pctx,
                "host_temperature capability and observations disagree",
            );
        }
        let gpu_available = available("gpu_temperature");
        if gpu_available == gpu.is_null() {
            self.push(pctx, "gpu_temperature capability and observations disagree");
        }
        if gpu_available && !available("nvml") {
            self.push(pctx, "gpu_temperature requires NVML");
        }
    }

    fn macos_observations(
        &mut self,
        v: &Value,
        capabilities: Option<&Object>,
        device: Option<&Object>,
    ) {
        let ctx = "receipt.environment.platform.observations";
        let obs = self.exact(v, &MACOS_OBSERVATION_KEYS, ctx);

        let hardware_value = get(obs, "hardware_identity");
        if !hardware_value.is_null() {
            let hctx = format!("{ctx}.hardware_identity");
            let h = self.exact(hardware_value, &MACOS_HARDWARE_KEYS, &hctx);
            for key in [
                "machine_name",
                "machine_model",
                "chip_type",
                "cpu_brand",
                "kernel_build",
            ] {
                self.string(get(h, key), &format!("{hctx}.{key}"), false);
            }
            self.positive_int(get(h, "gpu_core_count"), &format!("{hctx}.gpu_core_count"));
            self.positive_int(
                get(h, "physical_memory_bytes"),
                &format!("{hctx}.physical_memory_bytes"),
            );
            for (key, device_key) in [
                ("chip_type", "name"),
                ("gpu_core_count", "compute_units"),
                ("physical_memory_bytes", "memory_bytes"),
            ] {
                if !py_eq(get(h, key), get(device, device_key)) {
                    self.push(format!("{hctx}.{key}"), "must match the selected device");
                }
            }
        }

        let metal_value = get(obs, "metal_runtime");
        if !metal_value.is_null() {
            let mctx = format!("{ctx}.metal_runtime");
            let m = self.exact(metal_value, &MACOS_METAL_RUNTIME_KEYS, &mctx);
            self.string(get(m, "name"), &format!("{mctx}.name"), false);
            let unified = self.boolean(
                get(m, "has_unified_memory"),
                &format!("{mctx}.has_unified_memory"),
            );
            if unified != Some(true) {
                self.push(format!("{mctx}.has_unified_memory"), "must be true");
            }
            for key in [
                "max_buffer_length_bytes",
                "recommended_max_working_set_bytes",
            ] {
                self.positive_int(get(m, key), &format!("{mctx}.{key}"));
            }
            self.nonnegative_number(
                get(m, "current_allocated_bytes"),
                &format!("{mctx}.current_allocated_bytes"),
            );
            if !py_eq(get(m, "name"), get(device, "name")) {
                self.push(format!("{mctx}.name"), "must match the selected device");
            }
        }

        let fs_value = get(obs, "filesystem");
        if !fs_value.is_null() {
            let fctx = format!("{ctx}.filesystem");
            let f = self.exact(fs_value, &MACOS_FILESYSTEM_KEYS, &fctx);
            for key in ["root", "source", "fstype", "mount_point"] {
                self.string(get(f, key), &format!("{fctx}.{key}"), false);
            }
            for key in [
                "atomic_replace",
                "full_file_sync",
                "directory_fsync",
                "hardlink",
                "symlink",
            ] {
                let path = format!("{fctx}.{key}");
                if self.boolean(get(f, key), &path) != Some(true) {
                    self.push(path, "must be true");
                }
            }
            self.boolean(get(f, "case_sensitive"), &format!("{fctx}.case_sensitive"));
        }

        let unified_value = get(obs, "unified_memory");
        if !unified_value.is_null() {
            let uctx = format!("{ctx}.unified_memory");
            let u = self.exact(unified_value, &MACOS_UNIFIED_MEMORY_KEYS, &uctx);
            self.positive_int(get(u, "total_bytes"), &format!("{uctx}.total_bytes"));
            for key in ["swap_total_bytes", "swap_used_bytes"] {
                if !Self::nonnegative_int(get(u, key)) {
                    self.push(format!("{uctx}.{key}"), "must be a non-negative integer");
                }
            }
            self.boolean(get(u, "swap_encrypted"), &format!("{uctx}.swap_encrypted"));
            if !py_eq(get(u, "total_bytes"), get(device, "memory_bytes")) {
                self.push(
                    format!("{uctx}.total_bytes"),
                    "must match the selected device",
                );
            }
            if let (Some(total), Some(used)) = (
                py_int(get(u, "swap_total_bytes")),
                py_int(get(u, "swap_used_bytes")),
            ) {
                if cmp_int(&used, &total) == Ordering::Greater {
                    self.push(
                        format!("{uctx}.swap_used_bytes"),
                        "exceeds swap_total_bytes",
                    );
                }
            }
        }

        let pressure_value = get(obs, "memory_pressure");
        if !pressure_value.is_null() {
            let pctx = format!("{ctx}.memory_pressure");
            let p = self.exact(pressure_value, &MACOS_MEMORY_PRESSURE_KEYS, &pctx);
            for key in MACOS_MEMORY_PRESSURE_KEYS {
                let v = get(p, key);
                let ok = strict_int(v).is_some_and(|i| {
                    !i.is_negative()
                        && (key != "free_percent" || i.as_i64().is_some_and(|x| x <= 100))
                        && (key != "page_size_bytes" || int_sign(i) == Ordering::Greater)
                });
                if !ok {
                    let bound = if key == "free_percent" {
                        " from 0 through 100"
                    } else {
                        ""
                    };
                    self.push(
                        format!("{pctx}.{key}"),
                        format!("must be an integer{bound}"),
                    );
                }
            }
        }

        let thermal_value = get(obs, "thermal_pressure");
        if !thermal_value.is_null() {
            let tctx = format!("{ctx}.thermal_pressure");
            let t = self.exact(thermal_value, &MACOS_THERMAL_PRESSURE_KEYS, &tctx);
            for key in MACOS_THERMAL_PRESSURE_KEYS {
                self.string(get(t, key), &format!("{tctx}.{key}"), false);
            }
        }

        let pctx = "receipt.environment.platform";
        for (capability, observation) in [
            ("apple_hardware_identity", hardware_value),
            ("metal_runtime_identity", metal_value),
            ("filesystem_semantics", fs_value),
            ("unified_memory_accounting", unified_value),
            ("memory_pressure", pressure_value),
            ("thermal_pressure", thermal_value),
        ] {
            let available = get(capabilities, capability).as_str() == Some("available");
            if available == observation.is_null() {
                self.push(
                    pctx,
                    format!("{capability} capability and observations disagree"),
                );
            }
        }
        for temperature in ["host_temperature", "gpu_temperature"] {
            if !get(obs, temperature).is_null() {
                self.push(format!("{ctx}.{temperature}"), "must be null on macOS");
            }
            if get(capabilities, temperature).as_str() != Some("unavailable") {
                self.push(
                    pctx,
                    format!("{temperature} must be unavailable when its observation is null"),
                );
            }
        }
    }

    fn environment(&mut self, v: &Value) {
        let env = self.keys(
            v,
            &ENVIRONMENT_REQUIRED_KEYS,
            &ENVIRONMENT_KEYS,
            "receipt.environment",
        );
        let host_id = self.string(get(env, "host_id"), "receipt.environment.host_id", false);
        if !host_id.is_empty() && !is_host_id(host_id) {
            self.push("receipt.environment.host_id", "has invalid syntax");
        }
        let os = self.exact(get(env, "os"), &OS_KEYS, "receipt.environment.os");
        for key in ["name", "version", "kernel", "architecture"] {
            self.string(
                get(os, key),
                &format!("receipt.environment.os.{key}"),
                false,
            );
        }
        let dctx = "receipt.environment.device";
        let device = self.keys(
            get(env, "device"),
            &DEVICE_REQUIRED_KEYS,
            &DEVICE_KEYS,
            dctx,
        );
        for key in ["name", "architecture", "driver"] {
            self.string(get(device, key), &format!("{dctx}.{key}"), false);
        }
        let memory_bytes = get(device, "memory_bytes");
        if !memory_bytes.is_null() {
            self.positive_int(memory_bytes, &format!("{dctx}.memory_bytes"));
        }
        self.boolean(
            get(device, "unified_memory"),
            &format!("{dctx}.unified_memory"),
        );
        let logical_index = get(device, "logical_index");
        if !logical_index.is_null() && !Self::nonnegative_int(logical_index) {
            self.push(
                format!("{dctx}.logical_index"),
                "must be a non-negative integer or null",
            );
        }
        for key in ["device_uuid", "pci_bus_id", "compute_capability"] {
            let value = get(device, key);
            if !value.is_null() {
                self.string(value, &format!("{dctx}.{key}"), false);
            }
        }
        let compute_units = get(device, "compute_units");
        if !compute_units.is_null() {
            self.positive_int(compute_units, &format!("{dctx}.compute_units"));
        }
        let available = get(device, "memory_available_bytes");
        if !available.is_null() {
            if !Self::nonnegative_int(available) {
                self.push(
                    format!("{dctx}.memory_available_bytes"),
                    "must be a non-negative integer or null",
                );
            } else if let (Some(a), Some(total)) = (strict_int(available), py_int(memory_bytes)) {
                if cmp_int(a, &total) == Ordering::Greater {
                    self.push(
                        format!("{dctx}.memory_available_bytes"),
                        "exceeds memory_bytes",
                    );
                }
            }
        }
        self.string_map(get(env, "runtime"), "receipt.environment.runtime");
        self.string_map(get(env, "compiler"), "receipt.environment.compiler");
        if let Some(platform_value) = env.and_then(|e| e.get("platform")) {
            let pctx = "receipt.environment.platform";
            let platform = self.exact(platform_value, &PLATFORM_KEYS, pctx);
            let kind = get(platform, "kind").as_str();
            if !matches!(kind, Some("wsl2" | "macos")) {
                self.push(format!("{pctx}.kind"), "must be 'wsl2' or 'macos'");
            }
            let macos = kind == Some("macos");
            let capability_keys: &[&str] = if macos {
                &MACOS_CAPABILITY_KEYS
            } else {
                &WSL2_CAPABILITY_KEYS
            };
            let capabilities = self.exact(
                get(platform, "capabilities"),
                capability_keys,
                &format!("{pctx}.capabilities"),
            );
            if let Some(caps) = capabilities {
                for (key, status) in caps.iter() {
                    if !status
                        .as_str()
                        .is_some_and(|s| CAPABILITY_STATUSES.contains(&s))
                    {
                        self.push(
                            format!("{pctx}.capabilities.{key}"),
                            format!(
                                "must be one of {}",
                                qual_json::show::list(&CAPABILITY_STATUSES)
                            ),
                        );
                    }
                }
            }
            self.string_map(get(platform, "details"), &format!("{pctx}.details"));
            let observations = get(platform, "observations");
            if macos {
                self.macos_observations(observations, capabilities, device);
            } else {
                self.wsl2_observations(observations, capabilities, device);
            }
        }
    }

    fn receipt(&mut self, receipt: &Value, strict: &StrictChecks<'_>) {
        let top = self.exact(receipt, &TOP_LEVEL_KEYS, "receipt");
        if !py_eq(get(top, "schema_version"), &Value::from(1i64)) {
            self.push("receipt.schema_version", "must be 1");
        }
        let receipt_id = self.string(get(top, "receipt_id"), "receipt.receipt_id", false);
        if !receipt_id.is_empty() && !is_receipt_id(receipt_id) {
            self.push("receipt.receipt_id", "has invalid syntax");
        }
        let created_at = self.timestamp(get(top, "created_at_utc"), "receipt.created_at_utc");

        let source = self.exact(get(top, "source"), &SOURCE_KEYS, "receipt.source");
        if get(source, "tree_hash_format").as_str() != Some(TREE_HASH_FORMAT) {
            self.push(
                "receipt.source.tree_hash_format",
                format!("must be {}", qual_json::show::quote(TREE_HASH_FORMAT)),
            );
        }
        let tree_hash = self.sha256(get(source, "tree_hash"), "receipt.source.tree_hash");
        let commit = get(source, "git_commit");
        if !commit.as_str().is_some_and(is_commit) {
            self.push(
                "receipt.source.git_commit",
                "must be a lowercase 40-character commit",
            );
        }
        let clean = self.boolean(
            get(source, "git_worktree_clean"),
            "receipt.source.git_worktree_clean",
        );

        let qctx = "receipt.qualification";
        let q = self.exact(get(top, "qualification"), &QUALIFICATION_KEYS, qctx);
        let kind = get(q, "kind");
        self.one_of(kind, &KINDS, &format!("{qctx}.kind"));
        self.one_of(get(q, "backend"), &BACKENDS, &format!("{qctx}.backend"));
        self.string(get(q, "profile"), &format!("{qctx}.profile"), false);
        let verdict = get(q, "verdict");
        self.one_of(verdict, &VERDICTS, &format!("{qctx}.verdict"));
        let started = self.timestamp(get(q, "started_at_utc"), &format!("{qctx}.started_at_utc"));
        let finished = self.timestamp(
            get(q, "finished_at_utc"),
            &format!("{qctx}.finished_at_utc"),
        );
        let duration = self.nonnegative_number(
            get(q, "duration_seconds"),
            &format!("{qctx}.duration_seconds"),
        );
        match get(q, "command").as_array() {
            Some(argv) if !argv.is_empty() => {
                for (i, item) in argv.iter().enumerate() {
                    self.string(item, &format!("{qctx}.command[{i}]"), false);
                }
            }
            _ => self.push(format!("{qctx}.command"), "must be a non-empty argv array"),
        }
        if let (Some(started), Some(finished)) = (started, finished) {
            let elapsed_us = finished - started;
            if elapsed_us < 0 {
                self.push(format!("{qctx}.finished_at_utc"), "precedes started_at_utc");
            } else if let Some(duration) = duration {
                let elapsed = elapsed_us as f64 / 1_000_000.0;
                if (duration - elapsed).abs() > 1.0 {
                    self.push(
                        format!("{qctx}.duration_seconds"),
                        "differs from timestamps by more than 1 second",
                    );
                }
            }
            if created_at.is_some_and(|c| c < finished) {
                self.push(
                    "receipt.created_at_utc",
                    "precedes qualification completion",
                );
            }
        }

        self.environment(get(top, "environment"));

        let model = get(top, "model");
        let workload = get(top, "workload");
        if !model.is_null() {
            self.model(model, "receipt.model");
        }
        if !workload.is_null() {
            self.workload(workload, "receipt.workload");
        }
        let kind_str = kind.as_str().unwrap_or("");
        let verdict_str = verdict.as_str().unwrap_or("");
        if MODEL_KINDS.contains(&kind_str) && verdict_str == "passed" && model.is_null() {
            self.push(
                "receipt.model",
                format!(
                    "is required for passed qualification kind {}",
                    qual_json::show::quote(kind_str)
                ),
            );
        }
        if KINDS.contains(&kind_str) && kind_str != "environment" && workload.is_null() {
            self.push(
                "receipt.workload",
                format!(
                    "is required for qualification kind {}",
                    qual_json::show::quote(kind_str)
                ),
            );
        }
        self.config(get(top, "effective_config"), "receipt.effective_config");

        let mut required_failures = 0usize;
        match get(top, "results").as_array() {
            Some(results) if !results.is_empty() => {
                let mut ids: Vec<&str> = Vec::with_capacity(results.len());
                for (i, raw) in results.iter().enumerate() {
                    let rctx = format!("receipt.results[{i}]");
                    let r = self.exact(raw, &RESULT_KEYS, &rctx);
                    let id = self.string(get(r, "id"), &format!("{rctx}.id"), false);
                    if !id.is_empty() && !is_result_id(id) {
                        self.push(format!("{rctx}.id"), "has invalid syntax");
                    }
                    if ids.contains(&id) {
                        self.push(
                            "receipt.results",
                            format!("contains duplicate id {}", qual_json::show::quote(id)),
                        );
                    }
                    ids.push(id);
                    let required = self.boolean(get(r, "required"), &format!("{rctx}.required"));
                    let status = get(r, "status");
                    self.one_of(status, &RESULT_STATUSES, &format!("{rctx}.status"));
                    if required == Some(true) && status.as_str() != Some("passed") {
                        required_failures += 1;
                    }
                    self.nonnegative_number(
                        get(r, "duration_seconds"),
                        &format!("{rctx}.duration_seconds"),
                    );
                    self.metrics(get(r, "metrics"), &format!("{rctx}.metrics"));
                    let details = get(r, "details");
                    if !details.is_null() {
                        let text = self.string(details, &format!("{rctx}.details"), true);
                        if text.chars().count() > MAX_RESULT_DETAIL_CHARACTERS {
                            self.push(
                                format!("{rctx}.details"),
                                format!(
                                    "must be at most {MAX_RESULT_DETAIL_CHARACTERS} characters"
                                ),
                            );
                        }
                    }
                }
            }
            _ => self.push("receipt.results", "must be a non-empty array"),
        }

        self.metrics(get(top, "metrics"), "receipt.metrics");

        match get(top, "artifacts").as_array() {
            None => self.push("receipt.artifacts", "must be an array"),
            Some(artifacts) => {
                let mut seen: Vec<(&str, &str)> = Vec::with_capacity(artifacts.len());
                for (i, raw) in artifacts.iter().enumerate() {
                    let actx = format!("receipt.artifacts[{i}]");
                    let a = self.exact(raw, &ARTIFACT_KEYS, &actx);
                    let kind_value = self.string(get(a, "kind"), &format!("{actx}.kind"), false);
                    let location = get(a, "location");
                    self.one_of(location, &ARTIFACT_LOCATIONS, &format!("{actx}.location"));
                    let path_value = self.string(get(a, "path"), &format!("{actx}.path"), false);
                    if seen.contains(&(kind_value, path_value)) {
                        self.push(
                            "receipt.artifacts",
                            format!(
                                "contains duplicate kind/path {}/{}",
                                qual_json::show::quote(kind_value),
                                qual_json::show::quote(path_value)
                            ),
                        );
                    }
                    seen.push((kind_value, path_value));
                    let expected_hash = self.sha256(get(a, "sha256"), &format!("{actx}.sha256"));
                    let bytes = get(a, "bytes");
                    if !Self::nonnegative_int(bytes) {
                        self.push(format!("{actx}.bytes"), "must be a non-negative integer");
                    }
                    if strict.local_artifacts
                        && location.as_str() == Some("local_ignored")
                        && !path_value.is_empty()
                    {
                        self.local_artifact(&actx, path_value, expected_hash, bytes, strict);
                    }
                }
            }
        }

        for key in ["unsupported", "notes"] {
            match get(top, key).as_array() {
                None => self.push(format!("receipt.{key}"), "must be an array"),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        self.string(item, &format!("receipt.{key}[{i}]"), false);
                    }
                }
            }
        }

        match verdict_str {
            "passed" => {
                if clean != Some(true) {
                    self.push(
                        "receipt.qualification.verdict",
                        "passed requires receipt.source.git_worktree_clean=true",
                    );
                }
                if required_failures > 0 {
                    self.push(
                        "receipt.qualification.verdict",
                        "passed cannot coexist with failed or skipped required results",
                    );
                }
            }
            "failed" if required_failures == 0 => self.push(
                "receipt.qualification.verdict",
                "failed requires at least one failed or skipped required result",
            ),
            _ => {}
        }
        self.out.extend(crate::consistency::check(receipt));

        if let Some(digest_fn) = strict.current_source {
            if !tree_hash.is_empty() {
                let root = strict.root.unwrap_or(Path::new("."));
                match digest_fn(root) {
                    Err(e) => self.push(
                        "receipt.source.tree_hash",
                        format!("cannot be checked: failed to compute the current source tree hash: {e}"),
                    ),
                    Ok(current) if current != tree_hash => self.push(
                        "receipt.source.tree_hash",
                        format!("is {tree_hash}, current source tree is {current}"),
                    ),
                    Ok(_) => {}
                }
            }
        }

        if strict.known_commit {
            if let Some(commit) = commit.as_str() {
                let root = strict.root.unwrap_or(Path::new("."));
                if !git_commit_exists(root, commit) {
                    self.push(
                        "receipt.source.git_commit",
                        format!("does not exist locally: {commit}"),
                    );
                }
            }
        }
    }

    fn local_artifact(
        &mut self,
        actx: &str,
        path_value: &str,
        expected_hash: &str,
        bytes: &Value,
        strict: &StrictChecks<'_>,
    ) {
        let root = strict.root.unwrap_or(Path::new("."));
        let mut path = PathBuf::from(path_value);
        if !path.is_absolute() {
            path = root.join(path);
        }
        let ignored_root = root
            .join(".qualification")
            .canonicalize()
            .unwrap_or_else(|_| {
                root.canonicalize()
                    .unwrap_or_else(|_| root.to_path_buf())
                    .join(".qualification")
            });
        let resolved = match path.canonicalize() {
            Ok(p) if p.starts_with(&ignored_root) => p,
            _ => {
                self.push(
                    format!("{actx}.path"),
                    "must exist under .qualification for local validation",
                );
                return;
            }
        };
        match hash_file(&resolved) {
            Err(e) => self.push(
                format!("{actx}.path"),
                format!("cannot be read for local validation: {e}"),
            ),
            Ok((digest, len)) => {
                if !expected_hash.is_empty() && digest != expected_hash {
                    self.push(format!("{actx}.sha256"), "does not match local artifact");
                }
                if let Some(expected) = strict_int(bytes) {
                    if *expected != Int::from(len) {
                        self.push(format!("{actx}.bytes"), "does not match local artifact");
                    }
                }
            }
        }
    }
}

/// Streams a regular file through SHA-256: (`sha256:<hex>`, byte length).
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    use sha2::Digest;
    let mut file = qual_json::open_regular(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((format!("sha256:{}", hex::encode(hasher.finalize())), total))
}

/// Whether `commit` names a commit object of the repository at `root`, asked through the
/// hardened binding (`qual_git`); a malformed commit never exists, and a failed query counts
/// as absent.
pub fn git_commit_exists(root: &Path, commit: &str) -> bool {
    is_commit(commit)
        && qual_git::Repo::new(root)
            .has_commit(commit)
            .unwrap_or(false)
}
