//! The `qualification-case-result-v1` document a command writes to
//! `$KILN_QUALIFICATION_CASE_RESULT`: bounded loading and closed validation.
//!
//! Loading: the path must be a regular, non-symlink file (`lstat`), opened `O_NOFOLLOW`, with
//! the same (device, inode) through the descriptor; at most `limit + 1` bytes are read, and a
//! larger file is refused without being parsed; the bytes must be strict JSON.
//!
//! Validation reports every violation: exactly the keys `schema_version` (1), `case_id` (the
//! case's id), `status` (`passed|failed|skipped`), `duration_seconds` (finite, >= 0),
//! `effective_config` (a config object: keys `^[a-z][a-z0-9_-]*$`, values null, string,
//! bool, finite number or nested config object), `metrics` (closed metric objects, names
//! unique and ascending, the set equal to `declared_metrics`), `tolerances` (closed, naming
//! reported metrics, finite and >= 0, unique and ascending), `details` (null or at most 2048
//! characters).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use qual_json::{Number, Value};
use qual_receipt::model::{Metric, ResultStatus};

use crate::details::DETAILS_LIMIT;

/// Why a command result could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadFailure {
    /// No file at the path.
    Missing,
    /// Larger than the bound; not parsed.
    TooLarge {
        /// The bound in bytes.
        limit: u64,
    },
    /// Any other problem (symlink, not a file, unreadable, not strict JSON).
    Invalid(String),
}

impl LoadFailure {
    /// The one-line reason used in details.
    pub fn message(&self) -> String {
        match self {
            LoadFailure::Missing => "command did not create its case result".into(),
            LoadFailure::TooLarge { limit } => {
                format!("command case result exceeds {limit} byte limit")
            }
            LoadFailure::Invalid(r) => format!("cannot load command case result: {r}"),
        }
    }
}

/// A validated command result.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandResult {
    /// Reported status.
    pub status: ResultStatus,
    /// Reported duration (replaced by the runner's measurement).
    pub duration_seconds: f64,
    /// Reported effective config.
    pub effective_config: Value,
    /// Reported metrics.
    pub metrics: Vec<Metric>,
    /// Reported tolerances (kept only in the normalized case result).
    pub tolerances: Value,
    /// Reported details.
    pub details: Option<String>,
}

/// Size of the file at `path` without following a symlink, if it exists.
pub fn size_nofollow(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|m| m.len())
}

/// Loads a command result with the bounds in the module docs.
pub fn load(path: &Path, limit: u64) -> Result<Value, LoadFailure> {
    parse(&read_bounded(path, limit)?)
}

/// Parses bytes [`read_bounded`] returned as strict JSON.
pub fn parse(bytes: &[u8]) -> Result<Value, LoadFailure> {
    qual_json::from_slice(bytes).map_err(|e| LoadFailure::Invalid(e.to_string()))
}

/// Reads the bytes of a command result with the bounds in the module docs, unparsed.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, LoadFailure> {
    let lst = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(LoadFailure::Missing),
        Err(e) => return Err(LoadFailure::Invalid(e.to_string())),
    };
    if !lst.file_type().is_file() {
        return Err(LoadFailure::Invalid(
            "command case result must be a regular, non-symlink file".into(),
        ));
    }
    if lst.len() > limit {
        return Err(LoadFailure::TooLarge { limit });
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| LoadFailure::Invalid(e.to_string()))?;
    let m = f
        .metadata()
        .map_err(|e| LoadFailure::Invalid(e.to_string()))?;
    if (m.dev(), m.ino()) != (lst.dev(), lst.ino()) {
        return Err(LoadFailure::Invalid(
            "command case result changed while being opened".into(),
        ));
    }
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| LoadFailure::Invalid(e.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(LoadFailure::TooLarge { limit });
    }
    Ok(bytes)
}

fn is_config_key(k: &str) -> bool {
    let b = k.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

fn is_metric_name(k: &str) -> bool {
    let b = k.as_bytes();
    (1..=128).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b[1..].iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'.' | b'-')
        })
}

fn is_case_id(k: &str) -> bool {
    let b = k.as_bytes();
    (3..=128).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b[1..].iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'.' | b'-')
        })
}

/// Checks a config object, appending violations at `at`.
pub fn check_config(v: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(o) = v.as_object() else {
        errors.push(format!("{at} must be a config object"));
        return;
    };
    for (k, child) in o.iter() {
        let p = format!("{at}.{k}");
        if !is_config_key(k) {
            errors.push(format!("{p}: config key must match ^[a-z][a-z0-9_-]*$"));
        }
        match child {
            Value::Null | Value::String(_) | Value::Bool(_) => {}
            Value::Number(n) => {
                if !n.as_f64().is_some_and(f64::is_finite) {
                    errors.push(format!("{p} must be a finite number"));
                }
            }
            Value::Object(_) => check_config(child, &p, errors),
            Value::Array(_) => errors.push(format!("{p}: config values cannot be arrays")),
        }
    }
}

fn finite_number(v: Option<&Value>) -> Option<Number> {
    match v {
        Some(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => Some(n.clone()),
        _ => None,
    }
}

/// The case-result protocol's phrasing: missing keys in declared order, then unknown ones.
const PHRASING: qual_json::Phrasing = qual_json::Phrasing {
    missing: "is missing keys: {}",
    unknown: "has unknown keys: {}",
    list: qual_json::KeyList::Plain,
    unknown_first: false,
};

/// The closed-object check of `qual_json::ClosedKeys`, in the protocol's phrasing.
fn check_keys(o: &qual_json::Object, keys: &[&str], at: &str, errors: &mut Vec<String>) {
    let diff = qual_json::ClosedKeys::new(keys)
        .missing_order(qual_json::Order::Declared)
        .check(o);
    errors.extend(
        diff.messages(&PHRASING)
            .into_iter()
            .map(|m| format!("{at} {m}")),
    );
}

/// The keys of a command result, exactly.
const RESULT_KEYS: [&str; 8] = [
    "schema_version",
    "case_id",
    "status",
    "duration_seconds",
    "effective_config",
    "metrics",
    "tolerances",
    "details",
];

/// Validates a command result against the case id and declared metrics (set
/// `check_declared` to false to skip the declared-metric equality, e.g. when re-validating a
/// normalized record). Returns every violation, in the order of the steps: keys and header,
/// metrics, tolerances, details.
pub fn validate(
    v: &Value,
    case_id: &str,
    declared: &[String],
    check_declared: bool,
) -> Result<CommandResult, Vec<String>> {
    let mut errors = Vec::new();
    let Some(o) = v.as_object() else {
        return Err(vec!["case result must be a JSON object".into()]);
    };
    check_keys(o, &RESULT_KEYS, "case result", &mut errors);
    let (status, duration) = check_header(o, case_id, &mut errors);
    let config = o.get("effective_config").cloned().unwrap_or(Value::Null);
    check_config(&config, "case result effective_config", &mut errors);
    let metrics = match o.get("metrics") {
        Some(Value::Array(items)) => {
            let metrics = check_metrics(items, &mut errors);
            if check_declared {
                check_declared_metrics(&metrics, declared, &mut errors);
            }
            metrics
        }
        _ => {
            errors.push("case result metrics must be an array".into());
            Vec::new()
        }
    };
    let tolerances = o.get("tolerances").cloned().unwrap_or(Value::Null);
    check_tolerances(&tolerances, &metrics, &mut errors);
    let details = check_details(o.get("details"), &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(CommandResult {
        status: status.expect("checked"),
        duration_seconds: duration.expect("checked"),
        effective_config: config,
        metrics,
        tolerances,
        details,
    })
}

/// `schema_version`, `case_id`, `status` and `duration_seconds`; returns the status and the
/// duration when they are valid.
fn check_header(
    o: &qual_json::Object,
    case_id: &str,
    errors: &mut Vec<String>,
) -> (Option<ResultStatus>, Option<f64>) {
    if !matches!(o.get("schema_version"), Some(Value::Number(Number::Int(i))) if i.as_i64() == Some(1))
    {
        errors.push("case result schema_version must be 1".into());
    }
    match o.get("case_id").and_then(Value::as_str) {
        Some(id) if id == case_id && is_case_id(id) => {}
        Some(id) => errors.push(format!(
            "case result case_id {} does not match case {}",
            qual_json::show::quote(id),
            qual_json::show::quote(case_id)
        )),
        None => errors.push("case result case_id must be a string".into()),
    }
    let status = o
        .get("status")
        .and_then(Value::as_str)
        .and_then(ResultStatus::parse);
    if status.is_none() {
        errors.push("case result status must be passed, failed or skipped".into());
    }
    let duration = finite_number(o.get("duration_seconds"))
        .and_then(|n| n.as_f64())
        .filter(|d| *d >= 0.0);
    if duration.is_none() {
        errors.push("case result duration_seconds must be a finite number >= 0".into());
    }
    (status, duration)
}

/// Every metric object; returns the valid ones. Names must be unique and ascending.
fn check_metrics(items: &[Value], errors: &mut Vec<String>) -> Vec<Metric> {
    let mut metrics = Vec::new();
    for (i, m) in items.iter().enumerate() {
        let at = format!("case result metrics[{i}]");
        let Some(mo) = m.as_object() else {
            errors.push(format!("{at} must be an object"));
            continue;
        };
        if let Some(metric) = check_metric(mo, &at, errors) {
            metrics.push(metric);
        }
    }
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    if names.windows(2).any(|w| w[0] >= w[1]) {
        errors.push("case result metrics must be unique and in ascending name order".into());
    }
    metrics
}

/// One closed metric object at `at`.
fn check_metric(mo: &qual_json::Object, at: &str, errors: &mut Vec<String>) -> Option<Metric> {
    check_keys(
        mo,
        &["name", "value", "unit", "aggregation", "lower_is_better"],
        at,
        errors,
    );
    let name = mo
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| is_metric_name(n));
    let value = finite_number(mo.get("value"));
    let unit = mo
        .get("unit")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let agg = mo
        .get("aggregation")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let lib = mo.get("lower_is_better").and_then(Value::as_bool);
    if name.is_none() {
        errors.push(format!("{at}.name must match ^[a-z][a-z0-9_.-]{{0,127}}$"));
    }
    if value.is_none() {
        errors.push(format!("{at}.value must be a finite number"));
    }
    if unit.is_none() || agg.is_none() {
        errors.push(format!(
            "{at}.unit and aggregation must be non-empty strings"
        ));
    }
    if lib.is_none() {
        errors.push(format!("{at}.lower_is_better must be a boolean"));
    }
    Some(Metric {
        name: name?.into(),
        value: value?,
        unit: unit?.into(),
        aggregation: agg?.into(),
        lower_is_better: lib?,
    })
}

/// The reported metric names must be exactly the declared ones.
fn check_declared_metrics(metrics: &[Metric], declared: &[String], errors: &mut Vec<String>) {
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    let missing: Vec<&str> = declared
        .iter()
        .map(String::as_str)
        .filter(|d| !names.contains(d))
        .collect();
    let mut undeclared: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !declared.iter().any(|d| d == n))
        .collect();
    undeclared.sort();
    if missing.is_empty() && undeclared.is_empty() {
        return;
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing declared metrics: {}", missing.join(", ")));
    }
    if !undeclared.is_empty() {
        parts.push(format!("undeclared metrics: {}", undeclared.join(", ")));
    }
    errors.push(format!(
        "case result metric contract mismatch: {}",
        parts.join("; ")
    ));
}

/// The tolerances: closed objects naming reported metrics, unique and ascending.
fn check_tolerances(tolerances: &Value, metrics: &[Metric], errors: &mut Vec<String>) {
    let Value::Array(items) = tolerances else {
        errors.push("case result tolerances must be an array".into());
        return;
    };
    let mut seen: Vec<String> = Vec::new();
    for (i, t) in items.iter().enumerate() {
        let at = format!("case result tolerances[{i}]");
        let Some(to) = t.as_object() else {
            errors.push(format!("{at} must be an object"));
            continue;
        };
        check_keys(
            to,
            &["metric", "absolute_tolerance", "relative_tolerance"],
            &at,
            errors,
        );
        match to.get("metric").and_then(Value::as_str) {
            Some(m) if metrics.iter().any(|x| x.name == m) => seen.push(m.into()),
            _ => errors.push(format!("{at}.metric must name a reported metric")),
        }
        for k in ["absolute_tolerance", "relative_tolerance"] {
            let ok = finite_number(to.get(k))
                .and_then(|n| n.as_f64())
                .is_some_and(|f| f >= 0.0);
            if !ok {
                errors.push(format!("{at}.{k} must be a finite number >= 0"));
            }
        }
    }
    if seen.windows(2).any(|w| w[0] >= w[1]) {
        errors.push("case result tolerances must be unique and in ascending metric order".into());
    }
}

/// `details`: null or a bounded string.
/// The `details` a command's result states even when the result as a whole is invalid (a
/// failed serving case that wrote no metrics says why the server did not start): the string,
/// when it is one within [`DETAILS_LIMIT`] characters, for the runner to keep beside its own
/// failures instead of losing the command's own account.
pub fn reported_details(v: &Value) -> Option<String> {
    match v.as_object()?.get("details")? {
        Value::String(s) if !s.is_empty() && s.chars().count() <= DETAILS_LIMIT => Some(s.clone()),
        _ => None,
    }
}

fn check_details(details: Option<&Value>, errors: &mut Vec<String>) -> Option<String> {
    match details {
        Some(Value::Null) | None => None,
        Some(Value::String(s)) => {
            if s.chars().count() > DETAILS_LIMIT {
                errors.push(format!(
                    "case result details exceed {DETAILS_LIMIT} characters"
                ));
            }
            Some(s.clone())
        }
        Some(_) => {
            errors.push("case result details must be a string or null".into());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(extra: &str) -> String {
        format!(
            r#"{{"case_id":"case-one","details":null,"duration_seconds":0.5,"effective_config":{{"a":{{"b":1}}}},"metrics":[{{"aggregation":"p50","lower_is_better":true,"name":"lat","unit":"ms","value":3}}],"schema_version":1,"status":"passed","tolerances":[{{"absolute_tolerance":0,"metric":"lat","relative_tolerance":0.1}}]{extra}}}"#
        )
    }

    #[test]
    fn a_valid_document_validates() {
        let v = qual_json::from_str(&doc("")).unwrap();
        let r = validate(&v, "case-one", &["lat".into()], true).unwrap();
        assert_eq!(r.status, ResultStatus::Passed);
        assert_eq!(r.metrics[0].name, "lat");
    }

    #[test]
    fn lies_are_reported_all_at_once() {
        let v = qual_json::from_str(&doc(r#","surprise":1"#)).unwrap();
        let e = validate(&v, "case-two", &["other".into()], true).unwrap_err();
        assert!(
            e.iter().any(|x| x.contains("unknown keys: surprise")),
            "{e:?}"
        );
        assert!(e.iter().any(|x| x.contains("does not match case")), "{e:?}");
        assert!(
            e.iter().any(|x| x
                == "case result metric contract mismatch: missing declared metrics: other; undeclared metrics: lat"),
            "{e:?}"
        );
    }

    #[test]
    fn config_arrays_and_bad_keys_are_refused() {
        let mut e = Vec::new();
        let v = qual_json::from_str(r#"{"A":1,"b":[1],"c":{"d":null}}"#).unwrap();
        check_config(&v, "cfg", &mut e);
        assert_eq!(e.len(), 2, "{e:?}");
    }

    #[test]
    fn loading_is_bounded_and_refuses_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        assert_eq!(load(&p, 10), Err(LoadFailure::Missing));
        std::fs::write(&p, vec![b' '; 100]).unwrap();
        assert_eq!(load(&p, 10), Err(LoadFailure::TooLarge { limit: 10 }));
        std::fs::write(&p, b"{").unwrap();
        assert!(matches!(load(&p, 10), Err(LoadFailure::Invalid(_))));
        std::fs::write(d.path().join("t.json"), b"{}").unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(d.path().join("t.json"), &p).unwrap();
        let e = load(&p, 10).unwrap_err().message();
        assert!(e.contains("regular, non-symlink"), "{e}");
        std::fs::write(d.path().join("bom.json"), b"\xef\xbb\xbf{}").unwrap();
        assert!(matches!(
            load(&d.path().join("bom.json"), 100),
            Err(LoadFailure::Invalid(_))
        ));
    }
}
