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
//!
//! The rules live by family: `keys` (the closed key sets and enumerations), `scalars`
//! (Python-compatible numbers, identifiers and timestamps), `record` (the receipt's own
//! fields: source, qualification, model, workload, results, artifacts, verdict), `platform`
//! (the environment and the WSL2 and macOS platform evidence) and `strict` (the checks that
//! read the file system or git). This file owns the violation type, loading, the entry points
//! and the `Checker`'s typed field readers.

mod keys;
mod platform;
mod record;
mod scalars;
mod strict;

pub use keys::*;
pub use scalars::*;
pub use strict::{git_commit_exists, hash_file};

use qual_json::keys::MISSING_UNKNOWN;
use qual_json::{ClosedKeys, Int, Number, Object, Value, Violations};
use std::cmp::Ordering;
use std::fmt;
use std::path::{Path, PathBuf};

pub use qual_json::violation::{serialize_dotted, Dotted};
/// One broken rule: the document layer's [`qual_json::Violation`], whose `pointer` holds the
/// dotted path of the value it is about (`receipt.results[0].metrics[2].value`; `receipt` is
/// the root) and whose `message` reads after it (`must be finite numeric`).
///
/// Shown through [`Dotted`] (`"<path> <message>"`, which for most rules is exactly the original
/// implementation's error text) and serialized through [`serialize_dotted`]
/// (`{"message": …, "path": …}`), never through the pointer form.
pub use qual_json::Violation;

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
    /// The publication gate: `Some(upstream)` requires the receipt's commit to be reachable
    /// from `upstream` (a branch or remote-tracking ref of `root`, e.g. `origin/main`) and
    /// the run to have been made from a clean worktree.
    pub publication: Option<&'a str>,
}

impl fmt::Debug for StrictChecks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StrictChecks")
            .field("root", &self.root)
            .field("current_source", &self.current_source.is_some())
            .field("local_artifacts", &self.local_artifacts)
            .field("known_commit", &self.known_commit)
            .field("publication", &self.publication)
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
        #[serde(serialize_with = "serialize_dotted")]
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
                violations.iter().map(|v| Dotted(v).to_string()).collect()
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
    c.out.into_vec()
}

static NULL: Value = Value::Null;

/// `obj.get(key)` in Python terms: a missing key and an absent object both read as `null`.
fn get<'a>(o: Option<&'a Object>, key: &str) -> &'a Value {
    o.and_then(|o| o.get(key)).unwrap_or(&NULL)
}

#[derive(Default)]
struct Checker {
    out: Violations,
}

impl Checker {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.out.push(path, message);
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
        let diff = ClosedKeys::with_optional(required, allowed).check(o);
        self.out.keys(ctx, &diff, &MISSING_UNKNOWN);
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
}
