//! Kiln's own launch recipe (`kiln.serving-benchmark-server-launch.v1`), the loopback base URL
//! that goes with it, and [`load_launch`], which reads either recipe schema.
//!
//! Owns three things:
//! 1. [`validate`]: the exact rules of Kiln's closed launch object — `schema`, `id`, `command`,
//!    `working_directory`, `log_directory`, `readiness_poll_interval_ms`,
//!    `startup_timeout_seconds`, `shutdown_timeout_seconds`, `acceptable_exit_codes`, and an
//!    optional `content_sha256` that must equal the canonical digest
//!    ([`qual_json::canonical_digest`], Python's sorted-key compact ASCII `json.dumps`) of the
//!    document without that key. Every violation is reported with its JSON pointer.
//! 2. [`BaseUrl`]: an origin-only loopback URL (scheme `http`, host `127.0.0.1`, `localhost`
//!    or `[::1]`, no user-info, path empty or `/`, no query or fragment, port 1–65535, 80 by
//!    default). Kiln's schema has no port: the server URL is given separately.
//! 3. [`load_launch`]: reads a recipe file (≤ 64 KiB, strict JSON), chooses the schema by its
//!    `schema` member and returns the internal [`LaunchRecipe`]. A Kiln recipe must be a
//!    regular file that is not a symlink and needs a base URL; a `kiln-qual.serve-launch.v1`
//!    recipe is read exactly as [`recipe::validate`] always did and refuses a base URL (it
//!    declares its own port).
//!
//! Mapping of a Kiln recipe: the argv is literal (no `${model_path}`); the server environment
//! is the closed set [`KILN_ENVIRONMENT`] copied from this process when present (Kiln's schema
//! has no environment map); logs are bounded at the default 8 MiB per stream; `localhost` is
//! connected to as `127.0.0.1` (no name resolution). Kiln sets no upper bound on its timeouts
//! or exit codes; a valid recipe with a timeout above 172800 s or an exit code outside the
//! 64-bit range is refused for execution ([`RecipeError::Unrunnable`]), never silently clamped.
//!
//! Invariant: a [`KilnLaunch`] only exists when the document had no violation at all, and a
//! Kiln-schema [`LaunchRecipe`] only exists with a valid [`BaseUrl`].

use crate::recipe::{self, is_identifier, LaunchRecipe, RecipeError};
use qual_json::{Int, LoadError, Number, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema identifier of Kiln's launch recipe.
pub const SCHEMA: &str = recipe::KILN_SCHEMA;

/// The only variables a Kiln-schema server inherits from this process (when set and valid
/// UTF-8); nothing else reaches it.
pub const KILN_ENVIRONMENT: [&str; 6] = ["HOME", "LANG", "LC_ALL", "PATH", "TMPDIR", "TZ"];

/// Recipe files of either schema are at most this large.
pub const MAX_RECIPE_BYTES: usize = 64 * 1024;

/// The largest timeout kiln-qual executes (the same bound as `kiln-qual.serve-launch.v1`).
const MAX_TIMEOUT_SECONDS: f64 = 172_800.0;

const KEYS: [&str; 10] = [
    "schema",
    "id",
    "command",
    "working_directory",
    "log_directory",
    "readiness_poll_interval_ms",
    "startup_timeout_seconds",
    "shutdown_timeout_seconds",
    "acceptable_exit_codes",
    "content_sha256",
];

/// A valid origin-only loopback server URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseUrl {
    /// The address connected to (`localhost` is `127.0.0.1`).
    pub host: IpAddr,
    /// The port (80 when the URL names none).
    pub port: u16,
    /// The URL as given.
    pub text: String,
}

impl std::str::FromStr for BaseUrl {
    type Err = String;

    /// Parses an origin-only loopback URL. Scheme and host are compared case-insensitively
    /// (as Python's `urlsplit` lowercases them); a `?` or `#` anywhere, an empty port and a
    /// port 0 are refused.
    fn from_str(text: &str) -> Result<BaseUrl, String> {
        let bad = |why: &str| format!("base url {text:?} {why}");
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| bad("must start with http://"))?;
        if !scheme.eq_ignore_ascii_case("http") {
            return Err(bad("must use the http scheme"));
        }
        if rest.contains('?') || rest.contains('#') {
            return Err(bad("must not have a query or fragment"));
        }
        let (netloc, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if !(path.is_empty() || path == "/") {
            return Err(bad("must have an empty path or \"/\" (origin only)"));
        }
        if netloc.contains('@') {
            return Err(bad("must not carry user info"));
        }
        let (host, port) = if let Some(after) = netloc.strip_prefix('[') {
            let (h, tail) = after
                .split_once(']')
                .ok_or_else(|| bad("has an unterminated [ in its host"))?;
            let port = match tail {
                "" => None,
                t => Some(
                    t.strip_prefix(':')
                        .ok_or_else(|| bad("has text after its host"))?,
                ),
            };
            if h != "::1" {
                return Err(bad(
                    "must name a loopback host: 127.0.0.1, localhost or [::1]",
                ));
            }
            (IpAddr::V6(Ipv6Addr::LOCALHOST), port)
        } else {
            let (h, port) = match netloc.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (netloc, None),
            };
            let host = if h == "127.0.0.1" || h.eq_ignore_ascii_case("localhost") {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                return Err(bad(
                    "must name a loopback host: 127.0.0.1, localhost or [::1]",
                ));
            };
            (host, port)
        };
        let port = match port {
            None => 80,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => return Err(bad("must have a port in 1..=65535")),
            },
        };
        Ok(BaseUrl {
            host,
            port,
            text: text.to_string(),
        })
    }
}

/// A valid Kiln launch recipe (paths resolved against the recipe's directory).
#[derive(Clone, Debug, PartialEq)]
pub struct KilnLaunch {
    /// Recipe id.
    pub id: String,
    /// The argv (element 0 resolved against the working directory when relative).
    pub command: Vec<String>,
    /// Resolved working directory.
    pub working_directory: PathBuf,
    /// Resolved log directory.
    pub log_directory: PathBuf,
    /// Readiness poll interval, ms.
    pub readiness_poll_interval_ms: u64,
    /// Startup deadline, seconds.
    pub startup_timeout: Number,
    /// Shutdown grace, seconds.
    pub shutdown_timeout: Number,
    /// Accepted exit codes, strictly ascending.
    pub acceptable_exit_codes: Vec<Int>,
    /// `sha256:` canonical digest of the document without `content_sha256` (Kiln's identity
    /// of a launch record).
    pub content_sha256: String,
}

fn pointer(key: &str) -> String {
    format!("/{}", qual_json::violation::pointer_token(key))
}

fn int_cmp(a: &Int, b: &Int) -> Ordering {
    let mag = |x: &Int| (x.digits().len(), x.digits().to_string());
    match (a.is_negative(), b.is_negative()) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (false, false) => mag(a).cmp(&mag(b)),
        (true, true) => mag(b).cmp(&mag(a)),
    }
}

fn positive(v: &Value) -> Option<Number> {
    match v {
        Value::Number(n @ Number::Int(i)) if !i.is_negative() && i.digits() != "0" => {
            Some(n.clone())
        }
        Value::Number(n @ Number::Float(f)) if *f > 0.0 => Some(n.clone()),
        _ => None,
    }
}

fn non_empty_string(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.is_empty() && !s.contains('\0'))
}

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The canonical digest of a launch document without its `content_sha256` member.
pub fn content_digest(doc: &Value) -> String {
    match doc {
        Value::Object(o) => {
            let mut o = o.clone();
            o.remove("content_sha256");
            qual_json::canonical_digest(&Value::Object(o))
        }
        other => qual_json::canonical_digest(other),
    }
}

/// `/command`: 1 to 256 literal strings, element 0 an executable file (resolved against the
/// working directory when relative).
fn command_of(x: &Value, working_directory: Option<&Path>, v: &mut Vec<String>) -> Vec<String> {
    let mut command = Vec::new();
    match x.as_array() {
        Some(a) if (1..=256).contains(&a.len()) => {
            let mut all_ok = true;
            for (i, e) in a.iter().enumerate() {
                match non_empty_string(e) {
                    Some(s) => command.push(s.to_string()),
                    None => {
                        all_ok = false;
                        v.push(format!(
                            "/command/{i}: must be a non-empty string without NUL"
                        ))
                    }
                }
            }
            if let (true, Some(first)) = (all_ok, command.first().cloned()) {
                if !first.contains('/') {
                    v.push("/command/0: must be an absolute path or contain '/' (no PATH lookup, no shell)".into());
                } else if let Some(exe) = if first.starts_with('/') {
                    Some(PathBuf::from(&first))
                } else {
                    working_directory.map(|wd| wd.join(&first))
                } {
                    if !is_executable_file(&exe) {
                        v.push(format!(
                            "/command/0: {} is not an executable file",
                            exe.display()
                        ));
                    }
                    command[0] = exe.display().to_string();
                }
            }
        }
        _ => v.push("/command: must be an array of 1 to 256 strings".into()),
    }
    command
}

/// `/acceptable_exit_codes`: 1 to 16 unique ascending integers.
fn exit_codes_of(x: &Value, v: &mut Vec<String>) -> Vec<Int> {
    let mut codes: Vec<Int> = Vec::new();
    match x.as_array() {
        Some(a) if (1..=16).contains(&a.len()) => {
            for (i, e) in a.iter().enumerate() {
                match e.as_int() {
                    Some(c) => codes.push(c.clone()),
                    None => v.push(format!("/acceptable_exit_codes/{i}: must be an integer")),
                }
            }
            if codes.len() == a.len()
                && codes
                    .windows(2)
                    .any(|w| int_cmp(&w[0], &w[1]) != Ordering::Less)
            {
                v.push("/acceptable_exit_codes: must be unique and sorted ascending".into());
            }
        }
        _ => v.push("/acceptable_exit_codes: must be an array of 1 to 16 integers".into()),
    }
    codes
}

/// Validates a parsed Kiln launch document; `base` resolves relative directories. Checks that
/// `command[0]` resolves to an executable regular file. Returns every violation.
pub fn validate(doc: &Value, base: &Path) -> Result<KilnLaunch, Vec<String>> {
    let mut v: Vec<String> = Vec::new();
    let Some(obj) = doc.as_object() else {
        return Err(vec!["/: must be a JSON object".into()]);
    };
    let unknown = qual_json::ClosedKeys::with_optional(&[], &KEYS)
        .unknown_order(qual_json::Order::Declared)
        .unknown(obj);
    v.extend(
        unknown
            .into_iter()
            .map(|k| format!("{}: unknown key", pointer(k))),
    );
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
    let mut working_directory = None;
    if let Some(x) = req("working_directory", &mut v) {
        match non_empty_string(x) {
            Some(s) => working_directory = Some(base.join(s)),
            None => v.push("/working_directory: must be a non-empty string without NUL".into()),
        }
    }
    let mut log_directory = PathBuf::new();
    if let Some(x) = req("log_directory", &mut v) {
        match non_empty_string(x) {
            Some(s) => log_directory = base.join(s),
            None => v.push("/log_directory: must be a non-empty string without NUL".into()),
        }
    }
    let mut command = Vec::new();
    if let Some(x) = req("command", &mut v) {
        command = command_of(x, working_directory.as_deref(), &mut v);
    }
    let mut poll = 0u64;
    if let Some(x) = req("readiness_poll_interval_ms", &mut v) {
        match x.as_int().and_then(Int::as_i64) {
            Some(n) if (1..=60_000).contains(&n) => poll = n as u64,
            _ => v.push("/readiness_poll_interval_ms: must be an integer in 1..=60000".into()),
        }
    }
    let mut timeouts = [None, None];
    for (slot, key) in ["startup_timeout_seconds", "shutdown_timeout_seconds"]
        .iter()
        .enumerate()
    {
        if let Some(x) = req(key, &mut v) {
            match positive(x) {
                Some(n) => timeouts[slot] = Some(n),
                None => v.push(format!("/{key}: must be a number > 0")),
            }
        }
    }
    let mut codes: Vec<Int> = Vec::new();
    if let Some(x) = req("acceptable_exit_codes", &mut v) {
        codes = exit_codes_of(x, &mut v);
    }
    let content_sha256 = content_digest(doc);
    if let Some(x) = obj.get("content_sha256") {
        match x.as_str() {
            Some(s) if s == content_sha256 => {}
            Some(_) => v.push(format!(
                "/content_sha256: does not match the canonical sha256 of the other fields ({content_sha256})"
            )),
            None => v.push("/content_sha256: must be a string".into()),
        }
    }
    if !v.is_empty() {
        return Err(v);
    }
    let [Some(startup_timeout), Some(shutdown_timeout)] = timeouts else {
        unreachable!("both timeouts were checked");
    };
    Ok(KilnLaunch {
        id,
        command,
        working_directory: working_directory.expect("checked"),
        log_directory,
        readiness_poll_interval_ms: poll,
        startup_timeout,
        shutdown_timeout,
        acceptable_exit_codes: codes,
        content_sha256,
    })
}

/// The server environment of a Kiln-schema recipe: [`KILN_ENVIRONMENT`] from this process.
pub fn host_environment() -> BTreeMap<String, String> {
    KILN_ENVIRONMENT
        .iter()
        .filter_map(|k| {
            let v = std::env::var_os(k)?;
            Some((k.to_string(), v.into_string().ok()?))
        })
        .collect()
}

fn executable_seconds(key: &str, n: &Number) -> Result<Duration, String> {
    n.as_f64()
        .filter(|s| *s <= MAX_TIMEOUT_SECONDS)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!(
                "{key} {} is above the {MAX_TIMEOUT_SECONDS} seconds kiln-qual executes",
                qual_json::to_canonical_string(&Value::Number(n.clone()))
            )
        })
}

impl KilnLaunch {
    /// The internal recipe for this launch at `url` with `environment`. Refuses (never
    /// clamps) timeouts and exit codes kiln-qual cannot execute.
    pub fn to_recipe(
        &self,
        url: &BaseUrl,
        environment: BTreeMap<String, String>,
        file_sha256: String,
        document: Value,
    ) -> Result<LaunchRecipe, String> {
        let startup = executable_seconds("startup_timeout_seconds", &self.startup_timeout)?;
        let shutdown = executable_seconds("shutdown_timeout_seconds", &self.shutdown_timeout)?;
        let codes = self
            .acceptable_exit_codes
            .iter()
            .map(|c| {
                c.as_i64()
                    .ok_or_else(|| format!("acceptable exit code {c} is outside the 64-bit range"))
            })
            .collect::<Result<Vec<i64>, String>>()?;
        Ok(LaunchRecipe {
            id: self.id.clone(),
            command: self.command.clone(),
            working_directory: self.working_directory.clone(),
            environment,
            port: url.port,
            host: url.host,
            schema: SCHEMA,
            log_directory: self.log_directory.clone(),
            log_limit_bytes: recipe::DEFAULT_LOG_LIMIT,
            readiness_poll_interval: Duration::from_millis(self.readiness_poll_interval_ms),
            startup_timeout: startup,
            shutdown_timeout: shutdown,
            acceptable_exit_codes: codes,
            device_report: None,
            file_sha256,
            canonical_sha256: self.content_sha256.clone(),
            document,
        })
    }
}

/// Reads at most [`MAX_RECIPE_BYTES`] of a regular file (`qual_json::open_regular`: never a
/// FIFO or device); also says whether the path itself is a regular file that is not a symlink
/// (its `lstat` names the very file that was opened, so nothing can be swapped in between). A
/// symlink is still followed and read, because `kiln-qual.serve-launch.v1` recipes have
/// always accepted one.
fn read_recipe_file(path: &Path) -> Result<(Vec<u8>, bool), LoadError> {
    use std::os::unix::fs::MetadataExt;
    let file = qual_json::open_regular(path)?;
    let opened = file.metadata().ok();
    let plain = match (std::fs::symlink_metadata(path).ok(), opened) {
        (Some(l), Some(o)) => l.file_type().is_file() && (l.dev(), l.ino()) == (o.dev(), o.ino()),
        _ => false,
    };
    let bytes = qual_json::file::read_opened(file, path, MAX_RECIPE_BYTES)?.ok_or_else(|| {
        LoadError::TooLarge {
            path: qual_json::escape_path(path),
            limit: MAX_RECIPE_BYTES,
        }
    })?;
    Ok((bytes, plain))
}

/// Reads a launch recipe of either schema, chosen by its `schema` member: Kiln's
/// `kiln.serving-benchmark-server-launch.v1` (needs `base_url`) or
/// `kiln-qual.serve-launch.v1` (refuses `base_url`; any other schema value is reported by
/// that validator).
pub fn load_launch(path: &Path, base_url: Option<&BaseUrl>) -> Result<LaunchRecipe, RecipeError> {
    let limits = qual_json::Limits {
        max_bytes: MAX_RECIPE_BYTES,
        ..Default::default()
    };
    let (bytes, plain) = read_recipe_file(path)?;
    let doc = qual_json::from_slice_with(&bytes, limits).map_err(|error| LoadError::Parse {
        path: path.display().to_string(),
        error,
    })?;
    let base = recipe::recipe_base(path);
    let file_sha256 = qual_json::sha256_prefixed(&bytes);
    let shown = path.display().to_string();
    let invalid = |violations| RecipeError::Invalid {
        path: shown.clone(),
        violations,
    };
    if doc.get("schema").and_then(Value::as_str) != Some(SCHEMA) {
        let r = recipe::validate(&doc, &base, file_sha256).map_err(invalid)?;
        if let Some(u) = base_url {
            return Err(RecipeError::BaseUrl(format!(
                "--base-url {} was given but {shown} is a {} recipe, which declares its own port ({}); --base-url is only for {SCHEMA} recipes",
                u.text,
                recipe::SCHEMA,
                r.port
            )));
        }
        return Ok(r);
    }
    if !plain {
        return Err(RecipeError::NotRegular { path: shown });
    }
    let launch = validate(&doc, &base).map_err(invalid)?;
    let Some(url) = base_url else {
        return Err(RecipeError::BaseUrl(format!(
            "{shown} is a {SCHEMA} recipe, which names no port: pass --base-url http://127.0.0.1:PORT"
        )));
    };
    launch
        .to_recipe(url, host_environment(), file_sha256, doc)
        .map_err(|reason| RecipeError::Unrunnable {
            path: shown.clone(),
            reason,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Result<BaseUrl, String> {
        s.parse()
    }

    /// A valid recipe whose `command[0]` is this test binary's real executable.
    fn good() -> serde_json::Value {
        let exe = std::env::current_exe().unwrap().display().to_string();
        serde_json::json!({
            "schema": SCHEMA,
            "id": "kiln-mock.c1",
            "command": [exe, "--port", "8080"],
            "working_directory": "work",
            "log_directory": "../logs",
            "readiness_poll_interval_ms": 10,
            "startup_timeout_seconds": 2.5,
            "shutdown_timeout_seconds": 5,
            "acceptable_exit_codes": [-15, 0],
        })
    }

    fn check(doc: &serde_json::Value) -> Result<KilnLaunch, Vec<String>> {
        let v = qual_json::from_str(&doc.to_string()).unwrap();
        validate(&v, Path::new("/base"))
    }

    fn has(v: &[String], p: &str) -> bool {
        v.iter().any(|m| m.starts_with(&format!("{p}:")))
    }

    #[test]
    fn a_valid_recipe_maps_onto_the_internal_recipe() {
        let k = check(&good()).unwrap();
        assert_eq!(k.working_directory, PathBuf::from("/base/work"));
        assert_eq!(k.log_directory, PathBuf::from("/base/../logs"));
        let u = url("http://127.0.0.1:18081/").unwrap();
        let env = BTreeMap::from([("PATH".to_string(), "/usr/bin".to_string())]);
        let r = k
            .to_recipe(&u, env.clone(), "sha256:f".into(), Value::Null)
            .unwrap();
        assert_eq!(r.port, 18081);
        assert_eq!(r.host, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(r.schema, SCHEMA);
        assert_eq!(r.environment, env);
        assert_eq!(r.startup_timeout, Duration::from_millis(2500));
        assert_eq!(r.shutdown_timeout, Duration::from_secs(5));
        assert_eq!(r.acceptable_exit_codes, vec![-15, 0]);
        assert_eq!(r.readiness_poll_interval, Duration::from_millis(10));
        assert_eq!(r.canonical_sha256, k.content_sha256);
        assert_eq!(r.log_limit_bytes, recipe::DEFAULT_LOG_LIMIT);
        // The argv is literal: a ${model_path} is not a placeholder here.
        assert!(r.with_model_path(None).is_ok());
        assert!(r.with_model_path(Some(Path::new("/m"))).is_err());
    }

    #[test]
    fn a_relative_executable_resolves_against_the_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("server"), "#!/bin/sh\n").unwrap();
        let mut d = good();
        d["command"] = serde_json::json!(["./bin/server"]);
        d["working_directory"] = serde_json::json!(".");
        let doc = qual_json::from_str(&d.to_string()).unwrap();
        let v = validate(&doc, dir.path()).unwrap_err();
        assert!(v[0].contains("is not an executable file"), "{v:?}");
        std::fs::set_permissions(bin.join("server"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let k = validate(&doc, dir.path()).unwrap();
        assert_eq!(
            k.command[0],
            dir.path().join("././bin/server").display().to_string()
        );
    }

    #[test]
    fn every_violation_is_reported_with_its_pointer() {
        let bad = serde_json::json!({
            "schema": "kiln-qual.serve-launch.v1", "id": "A", "command": ["sh", ""],
            "working_directory": "", "log_directory": 3, "readiness_poll_interval_ms": 60001,
            "startup_timeout_seconds": 0, "shutdown_timeout_seconds": -1.5,
            "acceptable_exit_codes": [1, 1], "port": 8080, "environment": {}, "a/b": 1,
        });
        let v = check(&bad).unwrap_err();
        for p in [
            "/schema",
            "/id",
            "/command/1",
            "/working_directory",
            "/log_directory",
            "/readiness_poll_interval_ms",
            "/startup_timeout_seconds",
            "/shutdown_timeout_seconds",
            "/acceptable_exit_codes",
            "/port",
            "/environment",
            "/a~1b",
        ] {
            assert!(has(&v, p), "missing {p} in {v:?}");
        }
        let v = check(&serde_json::json!({})).unwrap_err();
        assert_eq!(
            v.iter()
                .filter(|m| m.ends_with("required key is missing"))
                .count(),
            9,
            "{v:?}"
        );
        assert_eq!(
            check(&serde_json::json!([])).unwrap_err(),
            vec!["/: must be a JSON object"]
        );
    }

    #[test]
    fn each_violation_class_alone() {
        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            ("command", serde_json::json!([]), "/command"),
            (
                "command",
                serde_json::json!(vec!["/bin/x"; 257]),
                "/command",
            ),
            ("command", serde_json::json!("/bin/true"), "/command"),
            ("command", serde_json::json!(["server"]), "/command/0"),
            (
                "command",
                serde_json::json!(["/no/such/server"]),
                "/command/0",
            ),
            (
                "command",
                serde_json::json!(["/bin/true", "a\u{0}b"]),
                "/command/1",
            ),
            ("command", serde_json::json!(["/bin/true", 3]), "/command/1"),
            ("id", serde_json::json!("ab"), "/id"),
            ("id", serde_json::json!("Upper-case"), "/id"),
            (
                "readiness_poll_interval_ms",
                serde_json::json!(0),
                "/readiness_poll_interval_ms",
            ),
            (
                "readiness_poll_interval_ms",
                serde_json::json!(10.0),
                "/readiness_poll_interval_ms",
            ),
            (
                "readiness_poll_interval_ms",
                serde_json::json!(true),
                "/readiness_poll_interval_ms",
            ),
            (
                "startup_timeout_seconds",
                serde_json::json!("5"),
                "/startup_timeout_seconds",
            ),
            (
                "shutdown_timeout_seconds",
                serde_json::json!(0.0),
                "/shutdown_timeout_seconds",
            ),
            (
                "acceptable_exit_codes",
                serde_json::json!([]),
                "/acceptable_exit_codes",
            ),
            (
                "acceptable_exit_codes",
                serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]),
                "/acceptable_exit_codes",
            ),
            (
                "acceptable_exit_codes",
                serde_json::json!([1, 0]),
                "/acceptable_exit_codes",
            ),
            (
                "acceptable_exit_codes",
                serde_json::json!([0, 0]),
                "/acceptable_exit_codes",
            ),
            (
                "acceptable_exit_codes",
                serde_json::json!([0.0]),
                "/acceptable_exit_codes/0",
            ),
            ("content_sha256", serde_json::json!(7), "/content_sha256"),
            (
                "environment",
                serde_json::json!({"PATH": "/bin"}),
                "/environment",
            ),
            ("port", serde_json::json!(8080), "/port"),
        ];
        for (key, value, p) in cases {
            let mut d = good();
            d[key] = value.clone();
            let v = check(&d).unwrap_err();
            assert!(has(&v, p), "{key}={value}: {v:?}");
            assert_eq!(v.len(), 1, "{key}={value}: {v:?}");
        }
        // Kiln sets no upper bound on timeouts or exit codes.
        let mut d = good();
        d["startup_timeout_seconds"] = serde_json::json!(1e9);
        d["acceptable_exit_codes"] = serde_json::json!([-100000, 0, 300]);
        check(&d).unwrap();
    }

    #[test]
    fn content_sha256_must_equal_the_canonical_digest_of_the_other_fields() {
        let d = good();
        let doc = qual_json::from_str(&d.to_string()).unwrap();
        let digest = content_digest(&doc);
        // Python's json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=True).
        let mut text = String::from("{");
        let mut keys: Vec<_> = d.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            let val = if k == "startup_timeout_seconds" {
                "2.5".to_string()
            } else {
                d[k].to_string()
            };
            text.push_str(&format!("{}:{val}", serde_json::json!(k)));
        }
        text.push('}');
        assert_eq!(digest, qual_json::sha256_prefixed(text.as_bytes()));
        let mut with = d.clone();
        with["content_sha256"] = serde_json::json!(digest);
        assert_eq!(check(&with).unwrap().content_sha256, digest);
        with["id"] = serde_json::json!("kiln-mock.c2");
        let v = check(&with).unwrap_err();
        assert_eq!(v.len(), 1);
        assert!(v[0].starts_with("/content_sha256: does not match"), "{v:?}");
        assert!(v[0].contains(&content_digest(
            &qual_json::from_str(&with.to_string()).unwrap()
        )));
    }

    #[test]
    fn content_digest_matches_python_json_dumps() {
        // Known answer from Python 3: json.loads(TEXT), del content_sha256, then
        // json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=True).
        let text = r#"{"schema":"kiln.serving-benchmark-server-launch.v1","id":"kat-c1","command":["/bin/sh","-c","caf\u00e9 \ud83d\ude00"],"working_directory":".","log_directory":"logs","readiness_poll_interval_ms":250,"startup_timeout_seconds":1200.0,"shutdown_timeout_seconds":1e-05,"acceptable_exit_codes":[-15,0,1],"content_sha256":"ignored"}"#;
        assert_eq!(
            content_digest(&qual_json::from_str(text).unwrap()),
            "sha256:ad0f2a5a58fb722527bd2fc076d0cd6063ba2c5f9531b7980f0963020f36281e"
        );
    }

    #[test]
    fn unrunnable_timeouts_and_codes_are_refused_not_clamped() {
        let u = url("http://localhost:9").unwrap();
        let mut d = good();
        d["shutdown_timeout_seconds"] = serde_json::json!(172_801);
        let k = check(&d).unwrap();
        let e = k
            .to_recipe(&u, BTreeMap::new(), String::new(), Value::Null)
            .unwrap_err();
        assert!(e.contains("shutdown_timeout_seconds"), "{e}");
        let doc = qual_json::from_str(
            &good()
                .to_string()
                .replace("[-15,0]", "[0,99999999999999999999]"),
        )
        .unwrap();
        let k = validate(&doc, Path::new("/base")).unwrap();
        let e = k
            .to_recipe(&u, BTreeMap::new(), String::new(), Value::Null)
            .unwrap_err();
        assert!(e.contains("64-bit"), "{e}");
    }

    #[test]
    fn base_urls_follow_the_loopback_origin_rules() {
        for (s, host, port) in [
            (
                "http://127.0.0.1:8000",
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                8000,
            ),
            (
                "http://127.0.0.1:8000/",
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                8000,
            ),
            ("http://localhost", IpAddr::V4(Ipv4Addr::LOCALHOST), 80),
            (
                "HTTP://LocalHost:65535/",
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                65535,
            ),
            ("http://[::1]:9000", IpAddr::V6(Ipv6Addr::LOCALHOST), 9000),
            ("http://[::1]", IpAddr::V6(Ipv6Addr::LOCALHOST), 80),
        ] {
            let u = url(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!((u.host, u.port), (host, port), "{s}");
        }
        for s in [
            "https://127.0.0.1:8000",
            "127.0.0.1:8000",
            "http://10.0.0.1:8000",
            "http://0.0.0.0:8000",
            "http://example.com",
            "http://127.0.0.2:8000",
            "http://user@127.0.0.1:8000",
            "http://user:pw@localhost",
            "http://127.0.0.1:8000/v1",
            "http://127.0.0.1:8000//",
            "http://127.0.0.1:8000/?x=1",
            "http://127.0.0.1:8000?",
            "http://127.0.0.1:8000#f",
            "http://127.0.0.1:0",
            "http://127.0.0.1:65536",
            "http://127.0.0.1:",
            "http://127.0.0.1:+80",
            "http://::1:8000",
            "http://[::2]:8000",
            "http://[::1",
            "http://[::1]x",
            "http://",
        ] {
            assert!(url(s).is_err(), "{s} accepted");
        }
    }

    #[test]
    fn load_launch_chooses_the_schema_and_checks_the_base_url() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = dir.path().join("kiln.json");
        let mut d = good();
        d["working_directory"] = serde_json::json!(".");
        std::fs::write(&kiln, serde_json::to_string_pretty(&d).unwrap()).unwrap();
        let u = url("http://127.0.0.1:18082").unwrap();
        let r = load_launch(&kiln, Some(&u)).unwrap();
        assert_eq!(r.port, 18082);
        assert_eq!(r.schema, SCHEMA);
        assert!(r
            .environment
            .keys()
            .all(|k| KILN_ENVIRONMENT.contains(&k.as_str())));
        let e = load_launch(&kiln, None).unwrap_err().to_string();
        assert!(e.contains("pass --base-url"), "{e}");
        // A symlink to a valid Kiln recipe is refused.
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&kiln, &link).unwrap();
        let e = load_launch(&link, Some(&u)).unwrap_err().to_string();
        assert!(e.contains("not a symlink"), "{e}");
        // Oversized files are refused before parsing.
        let big = dir.path().join("big.json");
        std::fs::write(&big, vec![b' '; MAX_RECIPE_BYTES + 1]).unwrap();
        assert!(matches!(
            load_launch(&big, Some(&u)),
            Err(RecipeError::Load(LoadError::TooLarge { .. }))
        ));
        // Strict JSON: a duplicate key is refused.
        let dup = dir.path().join("dup.json");
        std::fs::write(&dup, format!("{{\"id\":\"a\",{}", &d.to_string()[1..])).unwrap();
        assert!(matches!(
            load_launch(&dup, Some(&u)),
            Err(RecipeError::Load(LoadError::Parse { .. }))
        ));
        // A kiln-qual recipe (symlinks allowed as before) refuses --base-url.
        let own = dir.path().join("own.json");
        std::fs::write(
            &own,
            r#"{"schema":"kiln-qual.serve-launch.v1","id":"own-c1","command":["/bin/true"],
            "working_directory":".","port":8080,"log_directory":"logs","readiness_poll_interval_ms":20,
            "startup_timeout_seconds":5,"shutdown_timeout_seconds":2,"acceptable_exit_codes":[0]}"#,
        )
        .unwrap();
        let own_link = dir.path().join("own-link.json");
        std::os::unix::fs::symlink(&own, &own_link).unwrap();
        assert_eq!(load_launch(&own_link, None).unwrap().port, 8080);
        assert_eq!(
            load_launch(&own, None).unwrap(),
            recipe::load(&own).unwrap()
        );
        let e = load_launch(&own, Some(&u)).unwrap_err().to_string();
        assert!(e.contains("declares its own port"), "{e}");
    }
}
