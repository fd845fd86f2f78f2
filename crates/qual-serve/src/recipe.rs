//! The owned-server launch recipe (`kiln-qual.serve-launch.v1`).
//!
//! Owns the strict reading of a recipe file: a closed JSON object (read with `qual-json`, so
//! duplicate keys, non-finite numbers and BOMs are refused) whose every violation is
//! reported with its JSON pointer. Shape:
//!
//! | key | rule |
//! | --- | --- |
//! | `schema` | `"kiln-qual.serve-launch.v1"` |
//! | `id` | `^[a-z0-9][a-z0-9._-]{2,127}$`; the default case id |
//! | `command` | 1..=256 non-empty strings without NUL; never a shell; element 0 is absolute or contains `/` (relative to `working_directory`) |
//! | `working_directory` | non-empty; relative to the recipe's directory |
//! | `environment` | optional object of `^[A-Z_][A-Z0-9_]*$` → string; the server's **whole** environment (nothing inherited) |
//! | `port` | 1..=65535; the server must listen on 127.0.0.1 at this port |
//! | `log_directory` | non-empty; relative to the recipe's directory |
//! | `log_limit_bytes` | optional, 1..=1073741824 (default 8 MiB) per stream |
//! | `readiness_poll_interval_ms` | integer 1..=60000 |
//! | `startup_timeout_seconds`, `shutdown_timeout_seconds` | finite numbers > 0, ≤ 172800 |
//! | `acceptable_exit_codes` | 1..=16 unique, ascending integers in -255..=255 (a death by signal `s` is exit code `-s`) |
//! | `device_report` | optional `{"pattern", "description"}`: a regular expression (1..=512 bytes) that some line of the server's logs must match once it is ready — the server's own statement of the device it serves on (llama.cpp: `using device Vulkan0 (`); `description` (1..=256 bytes) names that device for the refusal. A server whose logs do not say so is refused before any request (ggml falls back to the CPU silently) |
//!
//! `${model_path}` may appear in `command` elements after the first and in `environment`
//! values, either as the whole value or as a `${model_path}/…` prefix; `kiln-qual serve
//! --model-path DIR` substitutes the absolute directory (a workload passes the runner's
//! fingerprinted `${model_path}` there). A recipe that uses it needs the flag, and the flag
//! is refused for a recipe that does not use it. Any other `${` is a violation.
//!
//! Kiln's own schema (`kiln.serving-benchmark-server-launch.v1`) is read by
//! [`crate::kiln_launch`], which maps it onto the same [`LaunchRecipe`].
//!
//! Invariant: a [`LaunchRecipe`] only exists when the file had no violation at all.

use qual_json::{Number, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The one placeholder a recipe may use.
pub const MODEL_PATH: &str = "${model_path}";

fn placeholder_ok(s: &str) -> bool {
    match s.find("${") {
        None => true,
        Some(0) => {
            (s == MODEL_PATH || s.starts_with("${model_path}/"))
                && !s[MODEL_PATH.len()..].contains("${")
        }
        Some(_) => false,
    }
}

/// The schema identifier of a launch recipe.
pub const SCHEMA: &str = "kiln-qual.serve-launch.v1";

/// The schema identifier of Kiln's launch recipe, the other schema a [`LaunchRecipe`] is read
/// from (re-exported as `kiln_launch::SCHEMA`, whose module reads that schema).
pub const KILN_SCHEMA: &str = "kiln.serving-benchmark-server-launch.v1";
/// The per-stream log bound when a recipe sets none.
pub const DEFAULT_LOG_LIMIT: u64 = 8 * 1024 * 1024;
const KEYS: [&str; 13] = [
    "schema",
    "id",
    "command",
    "working_directory",
    "environment",
    "port",
    "log_directory",
    "log_limit_bytes",
    "readiness_poll_interval_ms",
    "startup_timeout_seconds",
    "shutdown_timeout_seconds",
    "acceptable_exit_codes",
    "device_report",
];

/// A validated launch recipe with its paths resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRecipe {
    /// Recipe id.
    pub id: String,
    /// The server argv (element 0 resolved against the working directory when relative).
    pub command: Vec<String>,
    /// Resolved working directory.
    pub working_directory: PathBuf,
    /// The complete server environment.
    pub environment: BTreeMap<String, String>,
    /// Loopback port.
    pub port: u16,
    /// Loopback address the server is reached at (127.0.0.1 unless a Kiln-schema recipe's
    /// base URL names `[::1]`).
    pub host: IpAddr,
    /// The schema the recipe was read from ([`SCHEMA`] or [`KILN_SCHEMA`]).
    pub schema: &'static str,
    /// Resolved log directory.
    pub log_directory: PathBuf,
    /// Per-stream log bound.
    pub log_limit_bytes: u64,
    /// Readiness poll interval.
    pub readiness_poll_interval: Duration,
    /// Startup deadline.
    pub startup_timeout: Duration,
    /// Grace between SIGTERM and SIGKILL.
    pub shutdown_timeout: Duration,
    /// Exit codes that count as a clean stop.
    pub acceptable_exit_codes: Vec<i64>,
    /// What the server's logs must say about its device, when declared.
    pub device_report: Option<DeviceReport>,
    /// `sha256:` of the file bytes.
    pub file_sha256: String,
    /// Canonical-JSON digest of the document.
    pub canonical_sha256: String,
    /// The document as read (for the evidence).
    pub document: Value,
}

/// A server's own statement of its device: a line of its logs matching `pattern`.
#[derive(Clone, Debug)]
pub struct DeviceReport {
    /// The compiled pattern.
    pub pattern: regex::Regex,
    /// The device it names, for the refusal.
    pub description: String,
}

impl PartialEq for DeviceReport {
    fn eq(&self, other: &Self) -> bool {
        self.pattern.as_str() == other.pattern.as_str() && self.description == other.description
    }
}

/// `/device_report`: a closed `{pattern, description}` object.
fn device_report_of(x: &Value, v: &mut Vec<String>) -> Option<DeviceReport> {
    let Some(o) = x.as_object() else {
        v.push("/device_report: must be an object with \"pattern\" and \"description\"".into());
        return None;
    };
    let unknown = qual_json::ClosedKeys::with_optional(&[], &["pattern", "description"])
        .unknown_order(qual_json::Order::Declared)
        .unknown(o);
    v.extend(
        unknown
            .into_iter()
            .map(|k| format!("/device_report/{k}: unknown key")),
    );
    let text = |k: &str, max: usize, v: &mut Vec<String>| match o.get(k).and_then(Value::as_str) {
        Some(s) if !s.is_empty() && s.len() <= max => Some(s.to_string()),
        _ => {
            v.push(format!(
                "/device_report/{k}: must be a string of 1..={max} bytes"
            ));
            None
        }
    };
    let pattern = text("pattern", 512, v);
    let description = text("description", 256, v)?;
    let pattern = match regex::RegexBuilder::new(&pattern?)
        .size_limit(1 << 20)
        .build()
    {
        Ok(p) => p,
        Err(e) => {
            v.push(format!(
                "/device_report/pattern: is not a valid regular expression: {}",
                e.to_string().lines().last().unwrap_or("invalid")
            ));
            return None;
        }
    };
    Some(DeviceReport {
        pattern,
        description,
    })
}

/// Why a recipe was refused.
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    /// The file could not be read or is not strict JSON.
    #[error("load launch recipe: {0}")]
    Load(#[from] qual_json::LoadError),
    /// The document violates the schema; every violation, with its pointer.
    #[error("validate launch recipe {path}: {}", violations.join("; "))]
    Invalid {
        /// The file.
        path: String,
        /// `pointer: problem` lines.
        violations: Vec<String>,
    },
    /// A Kiln-schema recipe that is a symlink or not a regular file.
    #[error(
        "launch recipe {path} must be a regular file that is not a symlink ({})",
        KILN_SCHEMA
    )]
    NotRegular {
        /// The file.
        path: String,
    },
    /// `--base-url` is missing for a Kiln-schema recipe or given for a kiln-qual one.
    #[error("{0}")]
    BaseUrl(String),
    /// A valid Kiln-schema recipe that kiln-qual cannot execute.
    #[error("launch recipe {path} is valid but cannot be executed: {reason}")]
    Unrunnable {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// The identifier rule of recipe ids, Kiln launch ids and case ids:
/// `^[a-z0-9][a-z0-9._-]{2,127}$` (the one check of it in this crate).
pub(crate) fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    (3..=128).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'_' || c == b'-'
        })
}

fn is_env_key(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_uppercase() || b[0] == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

fn int_in(v: &Value, lo: i64, hi: i64) -> Option<i64> {
    match v {
        Value::Number(Number::Int(i)) => i.as_i64().filter(|x| (lo..=hi).contains(x)),
        _ => None,
    }
}

fn positive_seconds(v: &Value) -> Option<Duration> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0 && *x <= 172_800.0)
            .map(Duration::from_secs_f64),
        _ => None,
    }
}

/// Reads and validates a recipe file.
pub fn load(path: &Path) -> Result<LaunchRecipe, RecipeError> {
    let limits = qual_json::Limits {
        max_bytes: 64 * 1024,
        ..Default::default()
    };
    let (doc, bytes) = qual_json::load_file(path, limits)?;
    let base = recipe_base(path);
    validate(&doc, &base, qual_json::sha256_prefixed(&bytes)).map_err(|violations| {
        RecipeError::Invalid {
            path: path.display().to_string(),
            violations,
        }
    })
}

/// The directory relative recipe paths resolve against: the recipe file's directory.
pub fn recipe_base(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `/command`: 1 to 256 strings, element 0 a path (resolved against the working directory
/// when relative), `${model_path}` only where allowed.
fn command_of(x: &Value, working_directory: &Path, v: &mut Vec<String>) -> Vec<String> {
    let mut command = Vec::new();
    match x.as_array() {
        Some(a) if (1..=256).contains(&a.len()) => {
            for (i, e) in a.iter().enumerate() {
                match e.as_str() {
                    Some(s) if !s.is_empty() && !s.contains('\0') => {
                        if !placeholder_ok(s) || (i == 0 && s.contains("${")) {
                            v.push(format!("/command/{i}: the only placeholder is ${{model_path}} (the whole value or a ${{model_path}}/ prefix), never in element 0"));
                        }
                        command.push(s.to_string())
                    }
                    _ => v.push(format!(
                        "/command/{i}: must be a non-empty string without NUL"
                    )),
                }
            }
            if let Some(first) = command.first() {
                if !first.starts_with('/') && !first.contains('/') {
                    v.push("/command/0: must be an absolute path or contain '/' (no PATH lookup, no shell)".into());
                } else if !first.starts_with('/') {
                    command[0] = working_directory.join(first).display().to_string();
                }
            }
        }
        _ => v.push("/command: must be an array of 1 to 256 strings".into()),
    }
    command
}

/// `/environment`: an object of strings under environment-variable names.
fn environment_of(x: &Value, v: &mut Vec<String>) -> BTreeMap<String, String> {
    let mut environment = BTreeMap::new();
    match x.as_object() {
        Some(o) => {
            for (k, val) in o.iter() {
                if !is_env_key(k) {
                    v.push(format!(
                        "/environment/{k}: key must match ^[A-Z_][A-Z0-9_]*$"
                    ));
                }
                match val.as_str() {
                    Some(s) if !s.contains('\0') => {
                        if !placeholder_ok(s) {
                            v.push(format!("/environment/{k}: the only placeholder is ${{model_path}} (the whole value or a ${{model_path}}/ prefix)"));
                        }
                        environment.insert(k.clone(), s.to_string());
                    }
                    _ => v.push(format!("/environment/{k}: must be a string without NUL")),
                }
            }
        }
        None => v.push("/environment: must be an object of strings".into()),
    }
    environment
}

/// `/acceptable_exit_codes`: 1 to 16 unique ascending integers in -255..=255.
fn exit_codes_of(x: &Value, v: &mut Vec<String>) -> Vec<i64> {
    let mut codes = Vec::new();
    match x.as_array() {
        Some(a) if (1..=16).contains(&a.len()) => {
            for (i, e) in a.iter().enumerate() {
                match int_in(e, -255, 255) {
                    Some(c) => codes.push(c),
                    None => v.push(format!(
                        "/acceptable_exit_codes/{i}: must be an integer in -255..=255"
                    )),
                }
            }
            if codes.windows(2).any(|w| w[0] >= w[1]) {
                v.push("/acceptable_exit_codes: must be unique and ascending".into());
            }
        }
        _ => v.push("/acceptable_exit_codes: must be an array of 1 to 16 integers".into()),
    }
    codes
}

/// Validates a parsed recipe; `base` resolves relative directories.
pub fn validate(
    doc: &Value,
    base: &Path,
    file_sha256: String,
) -> Result<LaunchRecipe, Vec<String>> {
    let mut v: Vec<String> = Vec::new();
    let Some(obj) = doc.as_object() else {
        return Err(vec!["/: must be a JSON object".into()]);
    };
    let unknown = qual_json::ClosedKeys::with_optional(&[], &KEYS)
        .unknown_order(qual_json::Order::Declared)
        .unknown(obj);
    v.extend(unknown.into_iter().map(|k| format!("/{k}: unknown key")));
    let req = |k: &str, v: &mut Vec<String>| -> Option<&Value> {
        let x = obj.get(k);
        if x.is_none() {
            v.push(format!("/{k}: required key is missing"));
        }
        x
    };
    if let Some(s) = req("schema", &mut v) {
        if s.as_str() != Some(SCHEMA) {
            v.push(format!("/schema: must be \"{SCHEMA}\""));
        }
    }
    let mut id = String::new();
    if let Some(x) = req("id", &mut v) {
        match x.as_str() {
            Some(s) if is_identifier(s) => id = s.to_string(),
            _ => v.push("/id: must match ^[a-z0-9][a-z0-9._-]{2,127}$".into()),
        }
    }
    let mut working_directory = PathBuf::new();
    if let Some(x) = req("working_directory", &mut v) {
        match x.as_str() {
            Some(s) if !s.is_empty() && !s.contains('\0') => working_directory = base.join(s),
            _ => v.push("/working_directory: must be a non-empty string without NUL".into()),
        }
    }
    let mut log_directory = PathBuf::new();
    if let Some(x) = req("log_directory", &mut v) {
        match x.as_str() {
            Some(s) if !s.is_empty() && !s.contains('\0') => log_directory = base.join(s),
            _ => v.push("/log_directory: must be a non-empty string without NUL".into()),
        }
    }
    let mut command = Vec::new();
    if let Some(x) = req("command", &mut v) {
        command = command_of(x, &working_directory, &mut v);
    }
    let mut environment = BTreeMap::new();
    if let Some(x) = obj.get("environment") {
        environment = environment_of(x, &mut v);
    }
    let mut port = 0u16;
    if let Some(x) = req("port", &mut v) {
        match int_in(x, 1, 65535) {
            Some(p) => port = p as u16,
            None => v.push("/port: must be an integer in 1..=65535".into()),
        }
    }
    let mut log_limit_bytes = DEFAULT_LOG_LIMIT;
    if let Some(x) = obj.get("log_limit_bytes") {
        match int_in(x, 1, 1 << 30) {
            Some(n) => log_limit_bytes = n as u64,
            None => v.push("/log_limit_bytes: must be an integer in 1..=1073741824".into()),
        }
    }
    let mut poll = Duration::from_millis(50);
    if let Some(x) = req("readiness_poll_interval_ms", &mut v) {
        match int_in(x, 1, 60_000) {
            Some(n) => poll = Duration::from_millis(n as u64),
            None => v.push("/readiness_poll_interval_ms: must be an integer in 1..=60000".into()),
        }
    }
    let mut startup = Duration::ZERO;
    if let Some(x) = req("startup_timeout_seconds", &mut v) {
        match positive_seconds(x) {
            Some(d) => startup = d,
            None => v.push("/startup_timeout_seconds: must be a number in (0, 172800]".into()),
        }
    }
    let mut shutdown = Duration::ZERO;
    if let Some(x) = req("shutdown_timeout_seconds", &mut v) {
        match positive_seconds(x) {
            Some(d) => shutdown = d,
            None => v.push("/shutdown_timeout_seconds: must be a number in (0, 172800]".into()),
        }
    }
    let mut codes = Vec::new();
    if let Some(x) = req("acceptable_exit_codes", &mut v) {
        codes = exit_codes_of(x, &mut v);
    }
    let device_report = obj
        .get("device_report")
        .and_then(|x| device_report_of(x, &mut v));
    if !v.is_empty() {
        return Err(v);
    }
    Ok(LaunchRecipe {
        id,
        command,
        working_directory,
        environment,
        port,
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        schema: SCHEMA,
        log_directory,
        log_limit_bytes,
        readiness_poll_interval: poll,
        startup_timeout: startup,
        shutdown_timeout: shutdown,
        acceptable_exit_codes: codes,
        device_report,
        file_sha256,
        canonical_sha256: qual_json::canonical_digest(doc),
        document: doc.clone(),
    })
}

impl LaunchRecipe {
    /// `http://<host>:<port>` of the server.
    pub fn base_url(&self) -> String {
        match self.host {
            IpAddr::V4(a) => format!("http://{a}:{}", self.port),
            IpAddr::V6(a) => format!("http://[{a}]:{}", self.port),
        }
    }

    /// Whether a command element or environment value uses `${model_path}`.
    pub fn uses_model_path(&self) -> bool {
        self.command.iter().any(|c| c.starts_with(MODEL_PATH))
            || self.environment.values().any(|v| v.starts_with(MODEL_PATH))
    }

    /// The recipe with `${model_path}` replaced by `model` (which must be absolute). Refuses a
    /// recipe that uses the placeholder without a model path, and a model path the recipe
    /// does not use (no flag is ever silently ignored).
    pub fn with_model_path(&self, model: Option<&Path>) -> Result<LaunchRecipe, String> {
        if self.schema == KILN_SCHEMA {
            // Kiln's argv is literal: it has no placeholder to substitute.
            return match model {
                None => Ok(self.clone()),
                Some(_) => Err(format!(
                    "--model-path was given but a {} recipe has no ${{model_path}} placeholder (its argv is literal)",
                    KILN_SCHEMA
                )),
            };
        }
        match (self.uses_model_path(), model) {
            (false, None) => Ok(self.clone()),
            (true, None) => Err("the launch recipe uses ${model_path}: pass --model-path".into()),
            (false, Some(_)) => Err(
                "--model-path was given but the launch recipe does not use ${model_path}".into(),
            ),
            (true, Some(m)) => {
                if !m.is_absolute() {
                    return Err(format!("model path {} must be absolute", m.display()));
                }
                let m = m.display().to_string();
                let sub = |s: &String| match s.strip_prefix(MODEL_PATH) {
                    Some(rest) => format!("{m}{rest}"),
                    None => s.clone(),
                };
                let mut r = self.clone();
                r.command = self.command.iter().map(sub).collect();
                r.environment = self
                    .environment
                    .iter()
                    .map(|(k, v)| (k.clone(), sub(v)))
                    .collect();
                Ok(r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<LaunchRecipe, Vec<String>> {
        let doc = qual_json::from_str(text).unwrap();
        validate(&doc, Path::new("/base"), "sha256:x".into())
    }

    const GOOD: &str = r#"{"schema":"kiln-qual.serve-launch.v1","id":"mock-c1","command":["./bin/server","--port","8080"],
        "working_directory":"work","environment":{"HOME":"/tmp"},"port":8080,"log_directory":"logs",
        "readiness_poll_interval_ms":20,"startup_timeout_seconds":5,"shutdown_timeout_seconds":2.5,"acceptable_exit_codes":[0]}"#;

    #[test]
    fn good_recipe_resolves_paths() {
        let r = check(GOOD).unwrap();
        assert_eq!(r.command[0], "/base/work/./bin/server");
        assert_eq!(r.working_directory, PathBuf::from("/base/work"));
        assert_eq!(r.log_directory, PathBuf::from("/base/logs"));
        assert_eq!(r.shutdown_timeout, Duration::from_millis(2500));
        assert_eq!(r.log_limit_bytes, DEFAULT_LOG_LIMIT);
    }

    #[test]
    fn a_device_report_is_a_closed_object_with_a_valid_pattern() {
        let with = |dr: &str| {
            GOOD.replace(
                r#""acceptable_exit_codes":[0]"#,
                &format!(r#""acceptable_exit_codes":[0],"device_report":{dr}"#),
            )
        };
        let r = check(&with(
            r#"{"pattern":"using device Vulkan0 \\(","description":"Vulkan0"}"#,
        ))
        .unwrap();
        let dr = r.device_report.unwrap();
        assert!(dr
            .pattern
            .is_match("I llama_prepare_model_devices: using device Vulkan0 (llvmpipe)"));
        assert_eq!(dr.description, "Vulkan0");
        assert!(check(GOOD).unwrap().device_report.is_none());
        for (bad, pointer) in [
            (r#""x""#, "/device_report:"),
            (
                r#"{"pattern":"(","description":"d"}"#,
                "/device_report/pattern:",
            ),
            (
                r#"{"pattern":"","description":"d"}"#,
                "/device_report/pattern:",
            ),
            (r#"{"pattern":"a"}"#, "/device_report/description:"),
            (
                r#"{"pattern":"a","description":"d","extra":1}"#,
                "/device_report/extra:",
            ),
        ] {
            let v = check(&with(bad)).unwrap_err();
            assert!(v.iter().any(|m| m.starts_with(pointer)), "{bad}: {v:?}");
        }
    }

    #[test]
    fn model_path_placeholder_is_substituted_and_never_ignored() {
        let text = GOOD.replace(r#""--port","8080""#, r#""--model","${model_path}/m.gguf""#);
        let r = check(&text).unwrap();
        assert!(r.uses_model_path());
        let s = r.with_model_path(Some(Path::new("/models/tiny"))).unwrap();
        assert_eq!(s.command[2], "/models/tiny/m.gguf");
        assert!(r.with_model_path(None).is_err());
        assert!(r.with_model_path(Some(Path::new("rel"))).is_err());
        let plain = check(GOOD).unwrap();
        assert!(plain.with_model_path(Some(Path::new("/m"))).is_err());
        assert_eq!(plain.with_model_path(None).unwrap(), plain);
        for bad in [
            r#""x${model_path}""#,
            r#""${other}""#,
            r#""${model_path}${model_path}""#,
        ] {
            let t = GOOD.replace(r#""8080"]"#, &format!("{bad}]"));
            assert!(check(&t).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn every_violation_is_reported_with_its_pointer() {
        let bad = r#"{"schema":"x","id":"A","command":["sh","-c"],"working_directory":"",
            "environment":{"lower":"1"},"port":0,"log_directory":"l","readiness_poll_interval_ms":0,
            "startup_timeout_seconds":0,"shutdown_timeout_seconds":-1,"acceptable_exit_codes":[1,0],"extra":1}"#;
        let v = check(bad).unwrap_err();
        for p in [
            "/extra",
            "/schema",
            "/id",
            "/command/0",
            "/working_directory",
            "/environment/lower",
            "/port",
            "/readiness_poll_interval_ms",
            "/startup_timeout_seconds",
            "/shutdown_timeout_seconds",
            "/acceptable_exit_codes",
        ] {
            assert!(
                v.iter().any(|m| m.starts_with(&format!("{p}:"))),
                "missing {p} in {v:?}"
            );
        }
        let v = check("{}").unwrap_err();
        assert_eq!(
            v.iter()
                .filter(|m| m.ends_with("required key is missing"))
                .count(),
            10
        );
    }
}
