//! Semantic validation of workload v1 documents.
//!
//! The validator walks the strict-parsed [`Value`] (not typed structs) so that it can report
//! **every** violation of a malformed document, exactly like the original implementation:
//! a non-object where an object is expected is reported once and then treated as `{}`, and
//! checking continues. Each [`Violation`] carries a JSON pointer and the original message text
//! (whose prefix is the original's dotted context, e.g. `workload.variants[0].cases[1].id`).
//!
//! Evaluation order follows the original (`workload.py`, §17 of the contract notes). Known
//! leniencies of the original are reproduced on purpose and listed in `docs/compatibility.md`:
//! `schema_version` and `max_parallel_cases` accept `1.0` and `true` (Python `!= 1`), and
//! integer `allowed_values` are ordered by their decimal text.

use crate::constants::*;
use crate::pattern;
use qual_json::{show::quote as repr, to_canonical_string, Number, Object, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::LazyLock;

/// One contract violation.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// JSON pointer of the offending value (`""` is the document root).
    pub pointer: String,
    /// The message, starting with the original's dotted context.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[derive(Clone)]
struct Ctx {
    text: String,
    ptr: String,
}

impl Ctx {
    fn root(text: &str) -> Ctx {
        Ctx {
            text: text.to_owned(),
            ptr: String::new(),
        }
    }
    // Built for every field visited, so by hand: one allocation per string, and the
    // JSON-pointer escaping (`~` → `~0`, `/` → `~1`) without intermediate strings.
    fn f(&self, name: &str) -> Ctx {
        let mut text = String::with_capacity(self.text.len() + 1 + name.len());
        text.push_str(&self.text);
        text.push('.');
        text.push_str(name);
        let mut ptr = String::with_capacity(self.ptr.len() + 1 + name.len());
        ptr.push_str(&self.ptr);
        ptr.push('/');
        for ch in name.chars() {
            match ch {
                '~' => ptr.push_str("~0"),
                '/' => ptr.push_str("~1"),
                c => ptr.push(c),
            }
        }
        Ctx { text, ptr }
    }
    fn i(&self, idx: usize) -> Ctx {
        Ctx {
            text: format!("{}[{}]", self.text, idx),
            ptr: format!("{}/{}", self.ptr, idx),
        }
    }
}

struct Report {
    errors: Vec<Violation>,
}

impl Report {
    fn at(&mut self, ctx: &Ctx, tail: impl fmt::Display) {
        self.errors.push(Violation {
            pointer: ctx.ptr.clone(),
            message: format!("{} {}", ctx.text, tail),
        });
    }
    fn raw(&mut self, ptr: &str, message: String) {
        self.errors.push(Violation {
            pointer: ptr.to_owned(),
            message,
        });
    }
}

/// The original's ordering rule for sorted lists: each item is compared with the previous
/// valid one only; an equal neighbour is a duplicate, a smaller one an ordering error.
struct Ascending<T> {
    prev: Option<T>,
    duplicate: bool,
    descending: bool,
}

impl<T: PartialOrd> Ascending<T> {
    fn new() -> Self {
        Ascending {
            prev: None,
            duplicate: false,
            descending: false,
        }
    }

    fn push(&mut self, item: T) {
        if let Some(p) = &self.prev {
            if *p == item {
                self.duplicate = true;
            } else if *p > item {
                self.descending = true;
            }
        }
        self.prev = Some(item);
    }

    fn report(&self, r: &mut Report, ctx: &Ctx) {
        if self.duplicate {
            r.at(ctx, "contains duplicates");
        }
        if self.descending {
            r.at(ctx, "must use ascending order");
        }
    }
}

static EMPTY: LazyLock<Object> = LazyLock::new(Object::new);

fn object<'a>(r: &mut Report, v: Option<&'a Value>, ctx: &Ctx) -> &'a Object {
    match v {
        Some(Value::Object(o)) => o,
        _ => {
            r.at(ctx, "must be an object");
            &EMPTY
        }
    }
}

fn closed(r: &mut Report, o: &Object, ctx: &Ctx, keys: &[&str]) {
    if std::ptr::eq(o, &*EMPTY) {
        // A non-object was already reported; the original treats it as `{}` silently.
        return;
    }
    let mut missing: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| !o.contains_key(k))
        .collect();
    missing.sort();
    if !missing.is_empty() {
        r.at(ctx, format!("missing keys: {}", missing.join(", ")));
    }
    let mut unknown: Vec<&str> = o
        .keys()
        .map(String::as_str)
        .filter(|k| !keys.contains(k))
        .collect();
    unknown.sort();
    if !unknown.is_empty() {
        r.at(ctx, format!("has unknown keys: {}", unknown.join(", ")));
    }
}

fn nonempty_str<'a>(r: &mut Report, o: &'a Object, key: &str, ctx: &Ctx) -> Option<&'a str> {
    match o.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        _ => {
            r.at(&ctx.f(key), "must be a non-empty string");
            None
        }
    }
}

fn boolean(r: &mut Report, o: &Object, key: &str, ctx: &Ctx) -> Option<bool> {
    match o.get(key) {
        Some(Value::Bool(b)) => Some(*b),
        _ => {
            r.at(&ctx.f(key), "must be a boolean");
            None
        }
    }
}

fn one_of<'a>(
    r: &mut Report,
    o: &'a Object,
    key: &str,
    ctx: &Ctx,
    allowed: &[&str],
) -> Option<&'a str> {
    match o.get(key) {
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Some(s),
        _ => {
            r.at(
                &ctx.f(key),
                format!("must be one of {}", qual_json::show::list(allowed)),
            );
            None
        }
    }
}

/// A positive integer (bools and floats rejected) with a cap.
fn positive_int(r: &mut Report, o: &Object, key: &str, ctx: &Ctx, cap: u64) -> Option<u64> {
    match o.get(key).and_then(Value::as_int) {
        Some(i) if !i.is_negative() && i.digits() != "0" => match i.as_u64() {
            Some(v) if v <= cap => Some(v),
            _ => {
                r.at(&ctx.f(key), format!("must be at most {cap}"));
                None
            }
        },
        _ => {
            r.at(&ctx.f(key), "must be a positive integer");
            None
        }
    }
}

/// Python `v == 1` (also true for `1.0` and `true`).
fn py_equals_one(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Number(Number::Int(i))) => i.to_string() == "1",
        Some(Value::Number(Number::Float(f))) => *f == 1.0,
        Some(Value::Bool(true)) => true,
        _ => false,
    }
}

/// A finite number that Python would accept as numeric (int within float range or float).
fn finite_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Validates a workload document and returns every violation (empty means valid).
pub fn validate_workload(doc: &Value) -> Vec<Violation> {
    let mut r = Report { errors: Vec::new() };
    let root = Ctx::root("workload");
    let w = object(&mut r, Some(doc), &root);
    closed(
        &mut r,
        w,
        &root,
        &[
            "comparison_policy",
            "description",
            "determinism",
            "kind",
            "schema_version",
            "variables",
            "variants",
            "workload_id",
        ],
    );
    if !py_equals_one(w.get("schema_version")) {
        r.at(&root.f("schema_version"), "must be 1");
    }
    if let Some(id) = nonempty_str(&mut r, w, "workload_id", &root) {
        if !IDENTIFIER.is_match(id) {
            r.at(&root.f("workload_id"), "has invalid identifier syntax");
        }
    }
    let kind = one_of(&mut r, w, "kind", &root, &KINDS);
    let kind_text: Option<&str> = w.get("kind").and_then(Value::as_str);
    nonempty_str(&mut r, w, "description", &root);

    // determinism
    let dctx = root.f("determinism");
    let d = object(&mut r, w.get("determinism"), &dctx);
    closed(
        &mut r,
        d,
        &dctx,
        &[
            "case_order",
            "max_parallel_cases",
            "network_access",
            "repetitions",
            "seed",
            "seed_delivery",
        ],
    );
    let seed = d.get("seed");
    let seed_ok = matches!(seed, Some(Value::Null))
        || matches!(seed, Some(Value::Number(Number::Int(i))) if !i.is_negative());
    if !seed_ok {
        r.at(&dctx.f("seed"), "must be null or a non-negative integer");
    }
    let delivery = one_of(&mut r, d, "seed_delivery", &dctx, &SEED_DELIVERIES);
    let repetitions = positive_int(&mut r, d, "repetitions", &dctx, MAX_REPETITIONS);
    if d.get("case_order").and_then(Value::as_str) != Some("declared") {
        r.at(&dctx.f("case_order"), "must be 'declared'");
    }
    if !py_equals_one(d.get("max_parallel_cases")) {
        r.at(&dctx.f("max_parallel_cases"), "must be 1");
    }
    if d.get("network_access").and_then(Value::as_str) != Some("forbidden") {
        r.at(&dctx.f("network_access"), "must be 'forbidden'");
    }
    let seed_is_null = matches!(seed, Some(Value::Null) | None);
    let delivery_raw = d.get("seed_delivery").and_then(Value::as_str);
    if kind_text == Some("environment") {
        if !seed_is_null || delivery_raw != Some("not_applicable") {
            r.raw(
                &dctx.ptr,
                "environment workloads require seed=null and seed_delivery=\"not_applicable\""
                    .into(),
            );
        }
    } else {
        let kind_repr = match w.get("kind") {
            Some(Value::String(s)) => repr(s),
            Some(other) => to_canonical_string(other),
            None => "null".into(),
        };
        if seed_is_null {
            r.raw(
                &dctx.f("seed").ptr,
                format!("{kind_repr} workloads require an explicit deterministic seed"),
            );
        }
        if delivery_raw == Some("not_applicable") {
            r.raw(
                &dctx.f("seed_delivery").ptr,
                format!("{kind_repr} workloads cannot use seed_delivery=\"not_applicable\""),
            );
        }
    }
    if delivery_raw == Some("fixed_fixture") && kind_text != Some("correctness") {
        r.raw(
            &dctx.f("seed_delivery").ptr,
            "seed_delivery=\"fixed_fixture\" is limited to correctness workloads".into(),
        );
    }

    // variables
    let vars = validate_variables(&mut r, w.get("variables"), &root);
    let declared: BTreeSet<String> = vars.keys().cloned().collect();

    // variants
    let vctx = root.f("variants");
    let mut variants: Vec<VariantFacts> = Vec::new();
    match w.get("variants") {
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut prev: Option<String> = None;
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let facts =
                    validate_variant(&mut r, item, &vctx.i(i), &declared, &vars, repetitions);
                if let Some(id) = &facts.id {
                    if !seen.insert(id.clone()) {
                        r.raw(
                            &vctx.i(i).f("id").ptr,
                            format!("workload.variants contains duplicate id {}", repr(id)),
                        );
                    } else if prev.as_ref().is_some_and(|p| p > id) {
                        r.raw(
                            &vctx.ptr,
                            "workload.variants must use ascending id order".into(),
                        );
                    }
                    prev = Some(id.clone());
                }
                variants.push(facts);
            }
        }
        _ => r.at(&vctx, "must be a non-empty array"),
    }

    // whole-workload checks
    let referenced: BTreeSet<&String> = variants.iter().flat_map(|v| v.references.iter()).collect();
    let unused: Vec<&str> = vars
        .keys()
        .filter(|n| !referenced.contains(n))
        .map(String::as_str)
        .collect();
    if !unused.is_empty() {
        r.raw(
            &root.f("variables").ptr,
            format!(
                "workload.variables contains unused definitions: {}",
                unused.join(", ")
            ),
        );
    }
    for (i, v) in variants.iter().enumerate() {
        let vid = v.id.clone().unwrap_or_default();
        match delivery {
            Some("argv") if !v.seed_in_argv => r.raw(
                &vctx.i(i).ptr,
                format!(
                    "workload variant {} does not deliver determinism.seed through argv",
                    repr(&vid)
                ),
            ),
            Some("environment") if !v.seed_in_env => r.raw(
                &vctx.i(i).ptr,
                format!(
                    "workload variant {} does not deliver determinism.seed through environment",
                    repr(&vid)
                ),
            ),
            _ => {}
        }
    }
    if let Some(dl @ ("fixed_fixture" | "not_applicable")) = delivery {
        if variants.iter().any(|v| v.seed_in_argv || v.seed_in_env) {
            r.raw(
                &dctx.f("seed_delivery").ptr,
                format!(
                    "seed_delivery=\"{dl}\" cannot reference the reserved ${{seed}} placeholder"
                ),
            );
        }
    }
    let any_model = variants.iter().any(|v| v.uses_model);
    for (i, v) in variants.iter().enumerate() {
        let vid = v.id.clone().unwrap_or_default();
        if kind_text == Some("environment") {
            if v.uses_model {
                r.raw(
                    &vctx.i(i).ptr,
                    format!(
                        "workload variant {} cannot reference ${{model_path}} for an environment workload",
                        repr(&vid)
                    ),
                );
            }
        } else if (kind_text.is_some_and(|k| MODEL_KINDS.contains(&k)) || any_model)
            && !v.uses_model
        {
            r.raw(
                &vctx.i(i).ptr,
                format!(
                    "workload variant {} must consume the runner-owned ${{model_path}} placeholder",
                    repr(&vid)
                ),
            );
        }
    }

    validate_policy(&mut r, w, &root, kind, kind_text, &variants);
    r.errors
}

// ---------------------------------------------------------------------------------------
// variables

/// What the rest of the validator needs to know about a declared variable.
#[derive(Clone, Debug)]
pub(crate) struct VarFacts {
    pub(crate) ty: Option<String>,
    pub(crate) required: bool,
    pub(crate) constraints: Constraints,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Constraints {
    pub(crate) allowed_keys: Option<Vec<String>>,
    pub(crate) minimum: Option<f64>,
    pub(crate) maximum: Option<f64>,
    pub(crate) pattern: Option<regex::Regex>,
}

fn validate_variables(r: &mut Report, v: Option<&Value>, root: &Ctx) -> BTreeMap<String, VarFacts> {
    let ctx = root.f("variables");
    let mut out = BTreeMap::new();
    let Some(Value::Array(items)) = v else {
        r.at(&ctx, "must be an array");
        return out;
    };
    let mut prev: Option<String> = None;
    for (i, item) in items.iter().enumerate() {
        let c = ctx.i(i);
        let o = object(r, Some(item), &c);
        closed(
            r,
            o,
            &c,
            &[
                "constraints",
                "default",
                "description",
                "name",
                "required",
                "type",
            ],
        );
        let mut name: Option<String> = None;
        if let Some(n) = nonempty_str(r, o, "name", &c) {
            if !VARIABLE_NAME.is_match(n) {
                r.at(&c.f("name"), "has invalid variable syntax");
            } else if RESERVED_PLACEHOLDERS.contains(&n) {
                r.at(
                    &c.f("name"),
                    format!("{} is runner-owned and reserved", repr(n)),
                );
            } else {
                name = Some(n.to_owned());
            }
        }
        nonempty_str(r, o, "description", &c);
        let ty = one_of(r, o, "type", &c, &VARIABLE_TYPES).map(str::to_owned);
        let required = boolean(r, o, "required", &c).unwrap_or(false);
        let default = o.get("default").unwrap_or(&Value::Null);
        if required && !default.is_null() {
            r.at(&c.f("default"), "must be null when required=true");
        }
        let constraints =
            validate_constraints(r, o.get("constraints"), &c.f("constraints"), ty.as_deref());
        if !default.is_null() {
            if let Some(t) = &ty {
                check_value(r, default, t, &constraints, &c.f("default"));
            }
        }
        if let Some(n) = o.get("name").and_then(Value::as_str) {
            if let Some(p) = &prev {
                if p.as_str() == n {
                    r.raw(
                        &c.f("name").ptr,
                        format!("workload.variables contains duplicate name {}", repr(n)),
                    );
                } else if p.as_str() > n {
                    r.raw(
                        &ctx.ptr,
                        "workload.variables must use ascending name order".into(),
                    );
                }
            }
            if !n.is_empty() {
                prev = Some(n.to_owned());
            }
        }
        if let Some(n) = name {
            out.entry(n).or_insert(VarFacts {
                ty,
                required,
                constraints,
            });
        }
    }
    out
}

fn type_matches(v: &Value, ty: &str) -> bool {
    match ty {
        "string" => matches!(v, Value::String(_)),
        "integer" => matches!(v, Value::Number(Number::Int(_))),
        "number" => matches!(v, Value::Number(_)),
        "boolean" => matches!(v, Value::Bool(_)),
        _ => false,
    }
}

/// Python `Decimal(str(v)).normalize()` text, the sort key of `number` allowed values.
fn decimal_normal_text(v: &Value) -> String {
    let text = match v {
        Value::Number(Number::Int(i)) => i.to_string(),
        Value::Number(Number::Float(f)) => qual_json::python_float_repr(*f),
        other => return to_canonical_string(other),
    };
    let (neg, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r.to_owned()),
        None => (false, text.clone()),
    };
    let (mant, exp) = match rest.split_once(['e', 'E']) {
        Some((m, e)) => (m.to_owned(), e.parse::<i64>().unwrap_or(0)),
        None => (rest.clone(), 0),
    };
    let (ip, fp) = mant.split_once('.').unwrap_or((&mant, ""));
    let mut digits = format!("{ip}{fp}");
    let mut e = exp - fp.len() as i64;
    let t = digits.trim_start_matches('0').to_owned();
    digits = t;
    if digits.is_empty() {
        return "0".into();
    }
    while digits.ends_with('0') {
        digits.pop();
        e += 1;
    }
    let adjusted = e + digits.len() as i64 - 1;
    let body = if e <= 0 && adjusted >= -6 {
        let point = digits.len() as i64 + e;
        if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if e == 0 {
            digits.clone()
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        }
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.clone()
        };
        format!(
            "{m}E{}{}",
            if adjusted < 0 { "-" } else { "+" },
            adjusted.abs()
        )
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

fn allowed_key(v: &Value, ty: &str) -> String {
    if ty == "number" {
        decimal_normal_text(v)
    } else {
        format!("{}\u{0}{}", v.python_type_name(), to_canonical_string(v))
    }
}

fn validate_constraints(
    r: &mut Report,
    v: Option<&Value>,
    c: &Ctx,
    ty: Option<&str>,
) -> Constraints {
    let o = object(r, v, c);
    closed(
        r,
        o,
        c,
        &["allowed_values", "maximum", "minimum", "pattern"],
    );
    let mut out = Constraints::default();
    match o.get("allowed_values") {
        Some(Value::Array(items)) => {
            let mut keys = Vec::new();
            let mut all_typed = true;
            for (k, item) in items.iter().enumerate() {
                if let Some(t) = ty {
                    if !type_matches(item, t) {
                        r.at(
                            &c.f("allowed_values").i(k),
                            format!("must have declared type {}", repr(t)),
                        );
                        all_typed = false;
                        continue;
                    }
                    keys.push(allowed_key(item, t));
                }
            }
            let unique: BTreeSet<&String> = keys.iter().collect();
            if unique.len() != keys.len() {
                r.at(&c.f("allowed_values"), "contains duplicates");
            }
            let mut sorted = keys.clone();
            sorted.sort();
            if sorted != keys {
                r.at(&c.f("allowed_values"), "must use canonical sorted order");
            }
            if ty.is_some() && all_typed && !keys.is_empty() {
                out.allowed_keys = Some(keys);
            }
        }
        _ => r.at(&c.f("allowed_values"), "must be an array"),
    }
    let min = o.get("minimum").unwrap_or(&Value::Null);
    let max = o.get("maximum").unwrap_or(&Value::Null);
    let pat = o.get("pattern").unwrap_or(&Value::Null);
    match ty {
        Some("integer" | "number") => {
            for (key, val) in [("minimum", min), ("maximum", max)] {
                if !val.is_null() {
                    match finite_number(val) {
                        Some(f) => {
                            if key == "minimum" {
                                out.minimum = Some(f)
                            } else {
                                out.maximum = Some(f)
                            }
                        }
                        None => r.at(&c.f(key), "must be null or finite numeric"),
                    }
                }
            }
            if let (Some(a), Some(b)) = (out.minimum, out.maximum) {
                if a > b {
                    r.at(&c.f("minimum"), "cannot exceed maximum");
                }
            }
            if !pat.is_null() {
                r.at(&c.f("pattern"), "is only valid for string variables");
            }
        }
        Some("string") => {
            if !min.is_null() || !max.is_null() {
                r.at(
                    &c.f("minimum/maximum"),
                    "are only valid for numeric variables",
                );
            }
            if !pat.is_null() {
                match pat {
                    Value::String(p) if !p.is_empty() => match pattern::compile_full(p) {
                        Ok(re) => out.pattern = Some(re),
                        Err(e) => r.at(&c.f("pattern"), format!("is invalid: {e}")),
                    },
                    _ => r.at(&c.f("pattern"), "must be a non-empty string"),
                }
            }
        }
        Some("boolean") if !min.is_null() || !max.is_null() || !pat.is_null() => {
            r.at(
                c,
                "numeric/pattern fields must be null for boolean variables",
            );
        }
        _ => {}
    }
    out
}

fn check_value(r: &mut Report, v: &Value, ty: &str, cons: &Constraints, c: &Ctx) {
    if !type_matches(v, ty) {
        r.at(c, format!("must have declared type {}", repr(ty)));
        return;
    }
    if let Some(keys) = &cons.allowed_keys {
        if !keys.contains(&allowed_key(v, ty)) {
            r.at(c, "is not one of the declared allowed_values");
        }
    }
    if let Some(f) = finite_number(v) {
        if cons.minimum.is_some_and(|m| f < m) {
            r.at(c, "is less than the declared minimum");
        }
        if cons.maximum.is_some_and(|m| f > m) {
            r.at(c, "is greater than the declared maximum");
        }
    }
    if let (Some(re), Value::String(s)) = (&cons.pattern, v) {
        if !re.is_match(s) {
            r.at(c, "does not match the declared pattern");
        }
    }
}

// ---------------------------------------------------------------------------------------
// variants and cases

#[derive(Clone, Debug, Default)]
struct CaseContract {
    required: Option<bool>,
    metrics: BTreeSet<String>,
    producer: Option<String>,
}

#[derive(Clone, Debug, Default)]
struct VariantFacts {
    id: Option<String>,
    backend: Option<String>,
    config: Option<Value>,
    references: BTreeSet<String>,
    seed_in_argv: bool,
    seed_in_env: bool,
    uses_model: bool,
    /// Case id -> contract (first occurrence wins).
    contracts: BTreeMap<String, CaseContract>,
}

fn validate_variant(
    r: &mut Report,
    item: &Value,
    c: &Ctx,
    declared: &BTreeSet<String>,
    vars: &BTreeMap<String, VarFacts>,
    repetitions: Option<u64>,
) -> VariantFacts {
    let mut facts = VariantFacts::default();
    let o = object(r, Some(item), c);
    closed(
        r,
        o,
        c,
        &[
            "backend",
            "cases",
            "description",
            "device_requirement",
            "effective_config",
            "id",
            "skip_policy",
        ],
    );
    if let Some(id) = nonempty_str(r, o, "id", c) {
        if !IDENTIFIER.is_match(id) {
            r.at(&c.f("id"), "has invalid identifier syntax");
        }
        facts.id = Some(id.to_owned());
    }
    nonempty_str(r, o, "description", c);
    let backend = one_of(r, o, "backend", c, &BACKENDS);
    facts.backend = backend.map(str::to_owned);
    let device = one_of(r, o, "device_requirement", c, &DEVICE_REQUIREMENTS);
    let skip = one_of(r, o, "skip_policy", c, &SKIP_POLICIES);
    if backend.is_some_and(|b| ACCELERATOR_BACKENDS.contains(&b)) && device != Some("required") {
        r.at(
            c,
            "accelerator backend requires device_requirement='required'",
        );
    }
    if device == Some("required") && skip == Some("allow") {
        r.at(c, "required device cannot allow skipped cases");
    }
    let config_ok = validate_config(r, o.get("effective_config"), &c.f("effective_config"));
    if config_ok {
        facts.config = o.get("effective_config").cloned();
    }
    let config_nonempty =
        matches!(o.get("effective_config"), Some(Value::Object(m)) if !m.is_empty());

    let cctx = c.f("cases");
    let mut all_timeouts_valid = true;
    let mut timeout_sum: u64 = 0;
    let mut n_cases: u64 = 0;
    let mut any_required = false;
    let mut all_command = true;
    match o.get("cases") {
        Some(Value::Array(cases)) if !cases.is_empty() => {
            let mut seen = BTreeSet::new();
            for (j, case) in cases.iter().enumerate() {
                n_cases += 1;
                let cf = validate_case(r, case, &cctx.i(j), declared, &mut facts);
                match cf.timeout {
                    Some(t) => timeout_sum += t,
                    None => all_timeouts_valid = false,
                }
                if cf.contract.required == Some(true) {
                    any_required = true;
                }
                if cf.contract.producer.as_deref() != Some("command") {
                    all_command = false;
                }
                if let Some(id) = cf.id {
                    if !seen.insert(id.clone()) {
                        r.at(&cctx, format!("contains duplicate id {}", repr(&id)));
                    } else {
                        facts.contracts.insert(id, cf.contract);
                    }
                }
            }
        }
        _ => {
            r.at(&cctx, "must be a non-empty array");
            all_timeouts_valid = false;
        }
    }
    if !any_required {
        r.at(&cctx, "must contain at least one required case");
    }
    if let Some(reps) = repetitions {
        if all_timeouts_valid && reps.saturating_mul(timeout_sum) > MAX_DECLARED_WALL_SECONDS {
            r.at(
                c,
                format!("declared timeout budget exceeds {MAX_DECLARED_WALL_SECONDS} seconds"),
            );
        }
        if reps.saturating_mul(n_cases) > MAX_CASE_EXECUTIONS {
            r.at(
                c,
                format!("declares more than {MAX_CASE_EXECUTIONS} case executions"),
            );
        }
    }
    if config_nonempty && !all_command {
        r.at(
            c,
            "non-empty effective_config requires command-produced cases",
        );
    }
    let missing: Vec<&str> = vars
        .iter()
        .filter(|(n, v)| v.required && !facts.references.contains(*n))
        .map(|(n, _)| n.as_str())
        .collect();
    if !missing.is_empty() {
        r.at(
            c,
            format!(
                "does not consume required variables: {}",
                missing.join(", ")
            ),
        );
    }
    facts
}

/// Validates an effective_config tree; returns whether it is valid.
fn validate_config(r: &mut Report, v: Option<&Value>, c: &Ctx) -> bool {
    let Some(Value::Object(o)) = v else {
        r.at(c, "must be an object");
        return false;
    };
    let mut ok = true;
    for (k, val) in o.iter() {
        if !CONFIG_KEY.is_match(k) {
            r.at(
                c,
                format!("key {} must be a dot-path-compatible segment", repr(k)),
            );
            ok = false;
            continue;
        }
        match val {
            Value::Object(_) => ok &= validate_config(r, Some(val), &c.f(k)),
            Value::Null | Value::String(_) | Value::Bool(_) => {}
            Value::Number(n) if n.as_f64().is_some() => {}
            _ => {
                r.at(&c.f(k), "must be a finite JSON scalar or nested object");
                ok = false;
            }
        }
    }
    ok
}

struct CaseFacts {
    id: Option<String>,
    timeout: Option<u64>,
    contract: CaseContract,
}

fn scan_placeholder(
    r: &mut Report,
    s: &str,
    c: &Ctx,
    declared: &BTreeSet<String>,
    facts: &mut VariantFacts,
    is_argv: bool,
) {
    if let Some(name) = placeholder_name(s) {
        match name {
            "seed" => {
                if is_argv {
                    facts.seed_in_argv = true
                } else {
                    facts.seed_in_env = true
                }
            }
            "model_path" => facts.uses_model = true,
            "host_id" => {}
            other => {
                if !declared.contains(other) {
                    r.at(c, format!("references undeclared variable {}", repr(other)));
                }
                facts.references.insert(other.to_owned());
            }
        }
    } else if s.contains("${") {
        r.at(
            c,
            "placeholders must occupy the entire argv or environment value",
        );
    }
}

fn validate_case(
    r: &mut Report,
    item: &Value,
    c: &Ctx,
    declared: &BTreeSet<String>,
    facts: &mut VariantFacts,
) -> CaseFacts {
    let o = object(r, Some(item), c);
    closed(
        r,
        o,
        c,
        &[
            "command",
            "description",
            "environment",
            "expected_exit_codes",
            "id",
            "output_assertions",
            "required",
            "result_protocol",
            "timeout_seconds",
            "working_directory",
        ],
    );
    let mut out = CaseFacts {
        id: None,
        timeout: None,
        contract: CaseContract::default(),
    };
    if let Some(id) = nonempty_str(r, o, "id", c) {
        if !IDENTIFIER.is_match(id) {
            r.at(&c.f("id"), "has invalid identifier syntax");
        }
        out.id = Some(id.to_owned());
    }
    nonempty_str(r, o, "description", c);
    out.contract.required = boolean(r, o, "required", c);

    // command
    let cmd_ctx = c.f("command");
    match o.get("command") {
        Some(Value::Array(argv)) if !argv.is_empty() => {
            for (k, a) in argv.iter().enumerate() {
                match a {
                    Value::String(s) if !s.is_empty() => {
                        if k == 0 && placeholder_name(s).is_some() {
                            r.at(&cmd_ctx.i(0), "executable cannot be a variable");
                        } else {
                            scan_placeholder(r, s, &cmd_ctx.i(k), declared, facts, true);
                        }
                    }
                    _ => r.at(&cmd_ctx.i(k), "must be a non-empty string"),
                }
            }
            if let Some(Value::String(exe)) = argv.first() {
                let lower = exe.to_lowercase();
                let base = lower.rsplit('/').next().unwrap_or(&lower);
                if base == "cargo" {
                    r.at(
                        &cmd_ctx,
                        "must route Cargo through scripts/qualification/cargo-test-bounded.sh",
                    );
                }
                if SHELLS.contains(&base)
                    && argv[1..].iter().any(|a| {
                        a.as_str()
                            .is_some_and(|s| SHELL_EVAL_FLAGS.contains(&s.to_lowercase().as_str()))
                    })
                {
                    r.at(&cmd_ctx, "cannot use shell command-string evaluation");
                }
            }
        }
        _ => r.at(&cmd_ctx, "must be a non-empty argv array"),
    }

    // working directory
    if let Some(wd) = nonempty_str(r, o, "working_directory", c) {
        if wd.contains('\\') {
            r.at(
                &c.f("working_directory"),
                "must use repository-relative POSIX syntax",
            );
        } else if wd.starts_with('/') || wd.split('/').any(|p| p == "..") {
            r.at(&c.f("working_directory"), "must stay within the repository");
        } else if let Some(top) = wd
            .split('/')
            .find(|p| !p.is_empty() && *p != ".")
            .filter(|p| PROTECTED_TOP_LEVEL.contains(p))
        {
            r.at(
                &c.f("working_directory"),
                format!("must not be at or below {top}, which is read-only to cases"),
            );
        }
    }

    // environment
    let ectx = c.f("environment");
    match o.get("environment") {
        Some(Value::Object(env)) => {
            for (k, v) in env.iter() {
                if !ENV_KEY.is_match(k) {
                    r.at(&ectx, format!("key {} has invalid syntax", repr(k)));
                }
                match v {
                    Value::String(s) if !s.is_empty() => {
                        scan_placeholder(r, s, &ectx.f(k), declared, facts, false)
                    }
                    _ => r.at(&ectx.f(k), "must be a non-empty string"),
                }
            }
            for owned in RUNNER_OWNED_ENVIRONMENT {
                if env.contains_key(owned) {
                    r.at(&ectx, format!("cannot override runner-owned {owned}"));
                }
            }
        }
        _ => r.at(&ectx, "must be an object"),
    }

    out.timeout = positive_int(r, o, "timeout_seconds", c, MAX_CASE_TIMEOUT_SECONDS);

    // exit codes
    let xctx = c.f("expected_exit_codes");
    match o.get("expected_exit_codes") {
        Some(Value::Array(codes)) if !codes.is_empty() => {
            let mut order = Ascending::new();
            let mut seen = BTreeSet::new();
            for (k, code) in codes.iter().enumerate() {
                match code.as_int().and_then(|i| i.as_u64()).filter(|v| *v <= 255) {
                    Some(v) => {
                        // Non-adjacent repeats count as duplicates too.
                        order.duplicate |= !seen.insert(v);
                        order.push(v);
                    }
                    None => r.at(&xctx.i(k), "must be an integer from 0 through 255"),
                }
            }
            order.report(r, &xctx);
        }
        _ => r.at(&xctx, "must be a non-empty array"),
    }

    // output assertions
    let actx = c.f("output_assertions");
    match o.get("output_assertions") {
        Some(Value::Array(items)) => {
            let mut seen = BTreeSet::new();
            for (k, item) in items.iter().enumerate() {
                let ac = actx.i(k);
                let a = object(r, Some(item), &ac);
                closed(r, a, &ac, &["match", "pattern", "stream"]);
                let stream = one_of(r, a, "stream", &ac, &STREAMS);
                let m = one_of(r, a, "match", &ac, &MATCHES);
                let p = nonempty_str(r, a, "pattern", &ac);
                if let Some(p) = p {
                    if let Err(e) = pattern::validate_assertion(p) {
                        r.at(&ac.f("pattern"), format!("is invalid: {e}"));
                    }
                }
                if let (Some(s), Some(m), Some(p)) = (stream, m, p) {
                    if !seen.insert((s.to_owned(), m.to_owned(), p.to_owned())) {
                        r.at(&actx, "contains a duplicate assertion");
                    }
                }
            }
        }
        _ => r.at(&actx, "must be an array"),
    }

    // result protocol
    let pctx = c.f("result_protocol");
    let p = object(r, o.get("result_protocol"), &pctx);
    closed(
        r,
        p,
        &pctx,
        &[
            "declared_metrics",
            "format",
            "path_environment_variable",
            "producer",
        ],
    );
    if p.get("format").and_then(Value::as_str) != Some(RESULT_FORMAT) {
        r.at(&pctx.f("format"), format!("must be '{RESULT_FORMAT}'"));
    }
    let producer = one_of(r, p, "producer", &pctx, &PRODUCERS);
    out.contract.producer = producer.map(str::to_owned);
    if p.get("path_environment_variable").and_then(Value::as_str) != Some(RESULT_PATH_VARIABLE) {
        r.at(
            &pctx.f("path_environment_variable"),
            format!("must be '{RESULT_PATH_VARIABLE}'"),
        );
    }
    let mctx = pctx.f("declared_metrics");
    let mut metrics: Vec<String> = Vec::new();
    match p.get("declared_metrics") {
        Some(Value::Array(items)) => {
            let mut order = Ascending::new();
            for (k, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) if !s.is_empty() => {
                        if !METRIC_NAME.is_match(s) {
                            r.at(&mctx.i(k), "has invalid metric syntax");
                        }
                        order.push(s.as_str());
                        metrics.push(s.clone());
                    }
                    _ => r.at(&mctx.i(k), "must be a non-empty string"),
                }
            }
            order.report(r, &mctx);
        }
        _ => r.at(&mctx, "must be an array"),
    }
    match producer {
        Some("runner") => {
            let bad = metric_names_where(&metrics, |m| runner_metric(m).is_none());
            if !bad.is_empty() {
                r.at(&pctx, format!("runner cannot produce metrics: {bad}"));
            }
            if !metrics.iter().any(|m| m == "case_pass") {
                r.at(&pctx, "runner must declare the case_pass metric");
            }
        }
        Some("command") => {
            let bad = metric_names_where(&metrics, |m| runner_metric(m).is_some());
            if !bad.is_empty() {
                r.at(
                    &pctx,
                    format!("command cannot declare runner-owned metrics: {bad}"),
                );
            }
        }
        _ => {}
    }
    out.contract.metrics = metrics.into_iter().collect();
    out
}

/// The sorted, unique names matching `pred`, joined by `, ` (empty when none).
fn metric_names_where(metrics: &[String], pred: impl Fn(&str) -> bool) -> String {
    let names: BTreeSet<&str> = metrics
        .iter()
        .map(String::as_str)
        .filter(|m| pred(m))
        .collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

// ---------------------------------------------------------------------------------------
// comparison policy

fn validate_policy(
    r: &mut Report,
    w: &Object,
    root: &Ctx,
    kind: Option<&str>,
    kind_text: Option<&str>,
    variants: &[VariantFacts],
) {
    let pctx = root.f("comparison_policy");
    let nullable = matches!(kind_text, Some("environment" | "soak"));
    let pv = w.get("comparison_policy");
    if matches!(pv, Some(Value::Null) | None) {
        if !nullable {
            r.at(&pctx, "may be null only for environment or soak workloads");
        }
        return;
    }
    if nullable {
        r.at(
            &pctx,
            format!(
                "must be null for {} workloads",
                kind_text.unwrap_or_default()
            ),
        );
    }
    let p = object(r, pv, &pctx);
    closed(
        r,
        p,
        &pctx,
        &["backend_pairs", "metric_rules", "mode", "variant_pairs"],
    );
    let mode = one_of(r, p, "mode", &pctx, &MODES);
    let by_id: BTreeMap<&str, &VariantFacts> = variants
        .iter()
        .filter_map(|v| v.id.as_deref().map(|id| (id, v)))
        .collect();

    // variant pairs
    let vpctx = pctx.f("variant_pairs");
    let mut vp_count = 0usize;
    let mut ab_endpoints: BTreeSet<String> = BTreeSet::new();
    match p.get("variant_pairs") {
        Some(Value::Array(items)) => {
            vp_count = items.len();
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let c = vpctx.i(i);
                let o = object(r, Some(item), &c);
                closed(
                    r,
                    o,
                    &c,
                    &[
                        "allowed_effective_config_differences",
                        "baseline_variant_id",
                        "candidate_variant_id",
                    ],
                );
                let base = nonempty_str(r, o, "baseline_variant_id", &c);
                let cand = nonempty_str(r, o, "candidate_variant_id", &c);
                let diffs = dot_path_list(r, o, "allowed_effective_config_differences", &c);
                let mut ids_ok = true;
                for (key, id) in [
                    ("baseline_variant_id", base),
                    ("candidate_variant_id", cand),
                ] {
                    if let Some(id) = id {
                        if !IDENTIFIER.is_match(id) {
                            r.at(&c.f(key), "has invalid identifier syntax");
                            ids_ok = false;
                        } else if !by_id.contains_key(id) {
                            r.at(&c.f(key), format!("names undeclared variant {}", repr(id)));
                            ids_ok = false;
                        }
                    } else {
                        ids_ok = false;
                    }
                }
                let (Some(b), Some(cd)) = (base, cand) else {
                    continue;
                };
                if b == cd {
                    r.at(&c, "must name two different variants");
                    continue;
                }
                if !seen.insert((b.to_owned(), cd.to_owned())) {
                    r.at(
                        &vpctx,
                        format!("contains duplicate pair ({}, {})", repr(b), repr(cd)),
                    );
                }
                if !ids_ok {
                    continue;
                }
                ab_endpoints.insert(b.to_owned());
                ab_endpoints.insert(cd.to_owned());
                let (vb, vc) = (by_id[b], by_id[cd]);
                if vb.backend != vc.backend {
                    r.at(&c, "A/B variants must use the same backend");
                }
                if vb.references != vc.references {
                    r.at(
                        &c,
                        "A/B variants must reference the same resolved variables",
                    );
                }
                if !same_contracts(vb, vc) {
                    r.at(&c, "A/B variants must declare identical result contracts");
                }
                if let (Some(cb), Some(cc)) = (&vb.config, &vc.config) {
                    let mut computed = Vec::new();
                    leaf_differences(cb, cc, "", &mut computed);
                    if let Some(declared) = &diffs {
                        if declared != &computed {
                            let list: Vec<String> = computed.iter().map(|s| repr(s)).collect();
                            r.at(
                                &c.f("allowed_effective_config_differences"),
                                format!(
                                    "must exactly equal the variant config leaf differences [{}]",
                                    list.join(", ")
                                ),
                            );
                        }
                    }
                    for path in &computed {
                        let a = lookup_path(cb, path);
                        let bb = lookup_path(cc, path);
                        match (a, bb) {
                            (Some(a), Some(bb)) => {
                                if matches!(a, Value::Object(_)) || matches!(bb, Value::Object(_)) {
                                    r.at(
                                        &c,
                                        format!(
                                            "config difference {} must name a scalar leaf",
                                            repr(path)
                                        ),
                                    );
                                } else if a.python_type_name() != bb.python_type_name() {
                                    r.at(
                                        &c,
                                        format!(
                                            "config difference {} must preserve JSON leaf type",
                                            repr(path)
                                        ),
                                    );
                                }
                            }
                            _ => r.at(
                                &c,
                                format!(
                                    "config difference {} must exist in both variants",
                                    repr(path)
                                ),
                            ),
                        }
                    }
                }
            }
        }
        _ => r.at(&vpctx, "must be an array"),
    }

    // backend pairs
    let bpctx = pctx.f("backend_pairs");
    let mut bp_count = 0usize;
    let mut cross_endpoints: BTreeSet<String> = BTreeSet::new();
    match p.get("backend_pairs") {
        Some(Value::Array(items)) => {
            bp_count = items.len();
            let mut prev: Option<((String, String), (String, String))> = None;
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let c = bpctx.i(i);
                let o = object(r, Some(item), &c);
                closed(
                    r,
                    o,
                    &c,
                    &[
                        "allowed_environment_differences",
                        "backend_a",
                        "backend_b",
                        "variant_a_id",
                        "variant_b_id",
                    ],
                );
                let ba = one_of(r, o, "backend_a", &c, &BACKENDS);
                let bb = one_of(r, o, "backend_b", &c, &BACKENDS);
                let va = nonempty_str(r, o, "variant_a_id", &c);
                let vb = nonempty_str(r, o, "variant_b_id", &c);
                dot_path_list(r, o, "allowed_environment_differences", &c);
                let mut ok = true;
                for (key, id, backend, end) in [
                    ("variant_a_id", o.get("variant_a_id"), ba, "a"),
                    ("variant_b_id", o.get("variant_b_id"), bb, "b"),
                ] {
                    let id = id.and_then(Value::as_str);
                    match id {
                        Some(id) if !id.is_empty() && !IDENTIFIER.is_match(id) => {
                            r.at(&c.f(key), "has invalid identifier syntax");
                            ok = false;
                        }
                        Some(id) if by_id.contains_key(id) => {
                            if let Some(b) = backend {
                                if by_id[id].backend.as_deref() != Some(b) {
                                    r.at(
                                        &c,
                                        format!(
                                            "endpoint {end} backend does not match variant {}",
                                            repr(id)
                                        ),
                                    );
                                    ok = false;
                                }
                            }
                        }
                        Some(id) => {
                            r.at(&c.f(key), format!("names undeclared variant {}", repr(id)));
                            ok = false;
                        }
                        None => ok = false,
                    }
                }
                let (Some(ba), Some(bb), Some(va), Some(vb)) = (ba, bb, va, vb) else {
                    continue;
                };
                let ea = (ba.to_owned(), va.to_owned());
                let eb = (bb.to_owned(), vb.to_owned());
                if ea == eb {
                    r.at(&c, "must name two different backend/variant endpoints");
                    continue;
                }
                if ba == bb {
                    r.at(&c, "must name two different backends");
                }
                if ea > eb {
                    r.at(&c, "endpoints must use canonical ascending order");
                }
                let key = (ea.clone(), eb.clone());
                if !seen.insert(key.clone()) {
                    r.at(
                        &bpctx,
                        format!(
                            "contains duplicate pair (({}, {}), ({}, {}))",
                            repr(ba),
                            repr(va),
                            repr(bb),
                            repr(vb)
                        ),
                    );
                } else if prev.as_ref().is_some_and(|p| *p > key) {
                    r.at(&bpctx, "must use canonical ascending order");
                }
                prev = Some(key);
                if !ok {
                    continue;
                }
                cross_endpoints.insert(va.to_owned());
                cross_endpoints.insert(vb.to_owned());
                let (fa, fb) = (by_id[va], by_id[vb]);
                if fa.references != fb.references {
                    r.at(
                        &c,
                        "cross-backend variants must reference the same resolved variables",
                    );
                }
                if !same_contracts(fa, fb) {
                    r.at(
                        &c,
                        "cross-backend variants must declare identical result contracts",
                    );
                }
                let ca = fa.config.as_ref().map(to_canonical_string);
                let cb = fb.config.as_ref().map(to_canonical_string);
                if ca != cb {
                    r.at(
                        &c,
                        "cross-backend variants must declare identical effective_config",
                    );
                }
            }
        }
        _ => r.at(&bpctx, "must be an array"),
    }

    // metric rules
    let rctx = pctx.f("metric_rules");
    let mut rules: Vec<RuleFacts> = Vec::new();
    let mut rule_count = 0usize;
    match p.get("metric_rules") {
        Some(Value::Array(items)) => {
            rule_count = items.len();
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let c = rctx.i(i);
                let rf = validate_rule(r, item, &c);
                if let (Some(s), Some(id), Some(m)) = (&rf.scope, &rf.result_id, &rf.metric) {
                    if !seen.insert((s.clone(), id.clone(), m.clone())) {
                        r.at(
                            &rctx,
                            format!(
                                "contains duplicate metric identity ({}, {}, {})",
                                repr(s),
                                repr(id),
                                repr(m)
                            ),
                        );
                    }
                }
                rules.push(rf);
            }
            if !items.is_empty() && !rules.iter().any(|x| x.required == Some(true)) {
                r.at(&rctx, "must contain at least one required rule");
            }
        }
        _ => r.at(&rctx, "must be an array"),
    }

    // mode checks
    let all_ids: BTreeSet<String> = by_id.keys().map(|s| (*s).to_owned()).collect();
    let comparison_set: BTreeSet<String> = match mode {
        Some("declared_ab_variants") => ab_endpoints,
        Some("cross_backend_correctness") => cross_endpoints,
        _ => all_ids,
    };
    match mode {
        Some(m @ ("same_environment_performance" | "declared_ab_variants")) => {
            if kind != Some("performance") {
                r.at(&pctx.f("mode"), format!("{m} requires kind='performance'"));
            }
            if m == "same_environment_performance" {
                if vp_count > 0 || bp_count > 0 {
                    r.at(
                        &pctx.f("mode"),
                        format!("{m} cannot declare variant or backend pairs"),
                    );
                }
            } else {
                if vp_count == 0 {
                    r.at(&pctx.f("mode"), format!("{m} requires variant_pairs"));
                }
                if bp_count > 0 {
                    r.at(&pctx.f("mode"), format!("{m} cannot declare backend_pairs"));
                }
            }
            if rule_count == 0 {
                r.at(&pctx.f("mode"), format!("{m} requires metric_rules"));
            }
            let has_evidence = rules.iter().any(|rule| {
                rule.required == Some(true)
                    && rule.metric_class.as_deref() == Some("performance")
                    && rule
                        .metric
                        .as_deref()
                        .is_some_and(|m| runner_metric(m).is_none())
                    && rule.result_id_str.is_some()
                    && comparison_set.iter().all(|vid| {
                        by_id.get(vid.as_str()).is_some_and(|v| {
                            v.contracts
                                .get(rule.result_id_str.as_deref().unwrap_or_default())
                                .is_some_and(|c| c.producer.as_deref() == Some("command"))
                        })
                    })
            });
            if !has_evidence {
                r.at(
                    &pctx,
                    "performance comparison requires at least one required command-produced non-runner metric rule",
                );
            }
        }
        Some(m @ "cross_backend_correctness") => {
            if kind != Some("correctness") {
                r.at(&pctx.f("mode"), format!("{m} requires kind='correctness'"));
            }
            if vp_count > 0 {
                r.at(&pctx.f("mode"), format!("{m} cannot declare variant_pairs"));
            }
            if bp_count == 0 {
                r.at(&pctx.f("mode"), format!("{m} requires backend_pairs"));
            }
            if rule_count == 0 {
                r.at(&pctx.f("mode"), format!("{m} requires metric_rules"));
            }
        }
        Some(m @ "self_contained_correctness") => {
            if kind != Some("correctness") {
                r.at(&pctx.f("mode"), format!("{m} requires kind='correctness'"));
            }
            if vp_count > 0 || bp_count > 0 {
                r.at(&pctx.f("mode"), format!("{m} cannot declare receipt pairs"));
            }
            if rule_count > 0 {
                r.at(&pctx.f("mode"), format!("{m} cannot declare metric_rules"));
            }
        }
        _ => {}
    }

    // per-rule checks
    for (i, rule) in rules.iter().enumerate() {
        let c = rctx.i(i);
        if mode == Some("cross_backend_correctness") {
            if rule.scope.as_deref() != Some("result") {
                r.at(
                    &c,
                    "cross-backend correctness metrics must be result-scoped",
                );
            }
            if rule.metric_class.as_deref() == Some("performance") {
                r.at(&c, "cross-backend comparison forbids performance metrics");
            }
            if rule.required != Some(true) {
                r.at(&c, "cross-backend correctness metrics must be required");
            }
            if rule.operator.as_deref() != Some("equal") {
                r.at(
                    &c,
                    "cross-backend correctness metrics must use operator='equal'",
                );
            }
        } else if rule.metric_class.as_deref() != Some("performance") {
            r.at(
                &c,
                "performance comparison requires metric_class='performance'",
            );
        }
        if rule.scope.as_deref() == Some("result") {
            if let Some(rid) = &rule.result_id_str {
                for vid in &comparison_set {
                    let Some(v) = by_id.get(vid.as_str()) else {
                        continue;
                    };
                    match v.contracts.get(rid) {
                        None => r.at(
                            &c.f("result_id"),
                            format!("{} is not declared by variant {}", repr(rid), repr(vid)),
                        ),
                        Some(cc) => {
                            if cc.required != Some(true) {
                                r.at(
                                    &c.f("result_id"),
                                    format!(
                                        "{} is not required by variant {}",
                                        repr(rid),
                                        repr(vid)
                                    ),
                                );
                            }
                            if let Some(m) = &rule.metric {
                                if !cc.metrics.contains(m) {
                                    r.at(
                                        &c.f("metric"),
                                        format!(
                                            "{} is not declared by result {} in variant {}",
                                            repr(m),
                                            repr(rid),
                                            repr(vid)
                                        ),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Per case id: (required, declared metrics, producer).
type ContractKey = BTreeMap<String, (Option<bool>, BTreeSet<String>, Option<String>)>;

fn same_contracts(a: &VariantFacts, b: &VariantFacts) -> bool {
    let key = |v: &VariantFacts| -> ContractKey {
        v.contracts
            .iter()
            .map(|(k, c)| {
                (
                    k.clone(),
                    (c.required, c.metrics.clone(), c.producer.clone()),
                )
            })
            .collect()
    };
    key(a) == key(b)
}

/// Validates a non-empty, unique, ascending list of dot-paths; returns it when fully valid.
fn dot_path_list(r: &mut Report, o: &Object, key: &str, c: &Ctx) -> Option<Vec<String>> {
    let lc = c.f(key);
    let Some(Value::Array(items)) = o
        .get(key)
        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
    else {
        r.at(&lc, "must be a non-empty array");
        return None;
    };
    let mut out = Vec::new();
    let mut ok = true;
    let mut order = Ascending::new();
    for (k, item) in items.iter().enumerate() {
        match item {
            Value::String(s) if !s.is_empty() => {
                if !is_dot_path(s) {
                    r.at(&lc.i(k), "has invalid dot-path syntax");
                    ok = false;
                }
                order.push(s.as_str());
                out.push(s.clone());
            }
            _ => {
                r.at(&lc.i(k), "must be a non-empty string");
                ok = false;
            }
        }
    }
    order.report(r, &lc);
    ok.then_some(out)
}

/// The original's leaf-difference walk (per-level sorted keys, `<root>` at top level).
pub(crate) fn leaf_differences(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    let same = a.python_type_name() == b.python_type_name()
        && to_canonical_string(a) == to_canonical_string(b);
    if same {
        return;
    }
    let here = if path.is_empty() {
        "<root>".to_owned()
    } else {
        path.to_owned()
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let kx: BTreeSet<&String> = x.keys().collect();
            let ky: BTreeSet<&String> = y.keys().collect();
            if kx != ky {
                out.push(here);
                return;
            }
            for k in kx {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaf_differences(x.get(k).unwrap(), y.get(k).unwrap(), &child, out);
            }
        }
        _ => out.push(here),
    }
}

fn lookup_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    if path == "<root>" {
        return None;
    }
    let mut cur = v;
    for seg in path.split('.') {
        cur = cur.get(seg)?;
    }
    Some(cur)
}

struct RuleFacts {
    scope: Option<String>,
    result_id: Option<String>,
    result_id_str: Option<String>,
    metric: Option<String>,
    metric_class: Option<String>,
    operator: Option<String>,
    required: Option<bool>,
}

fn validate_rule(r: &mut Report, item: &Value, c: &Ctx) -> RuleFacts {
    let o = object(r, Some(item), c);
    closed(
        r,
        o,
        c,
        &[
            "absolute_tolerance",
            "aggregation",
            "lower_is_better",
            "metric",
            "metric_class",
            "operator",
            "relative_tolerance",
            "required",
            "result_id",
            "scope",
            "unit",
        ],
    );
    let scope = one_of(r, o, "scope", c, &SCOPES).map(str::to_owned);
    let result_id_str = o
        .get("result_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut result_id = None;
    match &result_id_str {
        Some(s) if IDENTIFIER.is_match(s) => result_id = Some(s.clone()),
        _ => r.at(
            &c.f("result_id"),
            "must be a valid identifier for result scope",
        ),
    }
    let mut metric = None;
    if let Some(m) = nonempty_str(r, o, "metric", c) {
        if METRIC_NAME.is_match(m) {
            metric = Some(m.to_owned());
        } else {
            r.at(&c.f("metric"), "has invalid metric syntax");
        }
    }
    let metric_class = one_of(r, o, "metric_class", c, &METRIC_CLASSES).map(str::to_owned);
    let unit = nonempty_str(r, o, "unit", c);
    let aggregation = nonempty_str(r, o, "aggregation", c);
    let lower = boolean(r, o, "lower_is_better", c);
    let operator = one_of(r, o, "operator", c, &OPERATORS).map(str::to_owned);
    match (operator.as_deref(), lower) {
        (Some("not_greater"), Some(false)) => r.raw(
            &c.f("operator").ptr,
            format!(
                "{}.operator='not_greater' requires lower_is_better=true",
                c.text
            ),
        ),
        (Some("not_less"), Some(true)) => r.raw(
            &c.f("operator").ptr,
            format!(
                "{}.operator='not_less' requires lower_is_better=false",
                c.text
            ),
        ),
        _ => {}
    }
    if let Some(rm) = metric.as_deref().and_then(runner_metric) {
        if unit != Some(rm.unit)
            || aggregation != Some(rm.aggregation)
            || lower != Some(rm.lower_is_better)
        {
            r.at(
                c,
                format!(
                    "runner metric {} must use canonical definition {{\"unit\": {}, \"aggregation\": {}, \"lower_is_better\": {}}}",
                    repr(rm.name),
                    repr(rm.unit),
                    repr(rm.aggregation),
                    rm.lower_is_better
                ),
            );
        }
    }
    for key in ["absolute_tolerance", "relative_tolerance"] {
        let ok = o.get(key).and_then(finite_number).is_some_and(|f| f >= 0.0);
        if !ok {
            r.at(&c.f(key), "must be a finite non-negative number");
        }
    }
    let required = boolean(r, o, "required", c);
    RuleFacts {
        scope,
        result_id,
        result_id_str: result_id_str.filter(|_| true),
        metric,
        metric_class,
        operator,
        required,
    }
}

/// Validates a resolved parameter set (receipt `workload.parameters`) against a workload.
/// The workload itself should be valid; only the parameter rules are reported.
pub fn validate_workload_parameters(workload: &Value, parameters: &Value) -> Vec<Violation> {
    let mut r = Report { errors: Vec::new() };
    let pctx = Ctx::root("workload.parameters");
    let Some(params) = parameters.as_object() else {
        r.at(&pctx, "must be an object");
        return r.errors;
    };
    let vid = params.get("variant_id").and_then(Value::as_str);
    let variant = workload
        .get("variants")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("id").and_then(Value::as_str) == vid && vid.is_some())
        });
    let Some(variant) = variant else {
        r.at(&pctx.f("variant_id"), "must name a declared variant");
        return r.errors;
    };
    let refs = variant_references(variant);
    let mut expected: BTreeSet<String> = refs.clone();
    expected.insert("variant_id".into());
    let present: BTreeSet<String> = params.keys().cloned().collect();
    let missing: Vec<&str> = expected.difference(&present).map(String::as_str).collect();
    if !missing.is_empty() {
        r.at(
            &pctx,
            format!("missing resolved keys: {}", missing.join(", ")),
        );
    }
    let extra: Vec<&str> = present.difference(&expected).map(String::as_str).collect();
    if !extra.is_empty() {
        r.at(&pctx, format!("has undeclared keys: {}", extra.join(", ")));
    }
    let mut scratch = Report { errors: Vec::new() };
    let vars = validate_variables(
        &mut scratch,
        workload.get("variables"),
        &Ctx::root("workload"),
    );
    for name in &refs {
        let Some(value) = params.get(name) else {
            continue;
        };
        let c = pctx.f(name);
        let Some(var) = vars.get(name) else {
            r.at(&c, "has no variable declaration");
            continue;
        };
        let ty = var.ty.as_deref().unwrap_or("string");
        if ty == "number" && !matches!(value, Value::Number(Number::Float(_))) {
            r.at(&c, "must use canonical JSON float representation");
            continue;
        }
        check_value(&mut r, value, ty, &var.constraints, &c);
    }
    r.errors
}

/// Non-reserved placeholder names referenced by a variant's case commands and environments.
pub fn variant_references(variant: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let cases = variant.get("cases").and_then(Value::as_array);
    for case in cases.into_iter().flatten() {
        let argv = case
            .get("command")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let env = case
            .get("environment")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|o| o.iter().map(|(_, v)| v));
        for v in argv.chain(env) {
            if let Some(name) = v.as_str().and_then(placeholder_name) {
                if !RESERVED_PLACEHOLDERS.contains(&name) {
                    out.insert(name.to_owned());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_keys_match_python() {
        let k = |t: &str| decimal_normal_text(&qual_json::from_str(t).unwrap());
        assert_eq!(k("10"), "1E+1");
        assert_eq!(k("0"), "0");
        assert_eq!(k("0.5"), "0.5");
        assert_eq!(k("1.0"), "1");
        assert_eq!(k("12"), "12");
        assert_eq!(k("120"), "1.2E+2");
        assert_eq!(k("0.0000001"), "1E-7");
        assert_eq!(k("-2.5"), "-2.5");
    }

    #[test]
    fn leaf_differences_walk() {
        let a = qual_json::from_str(r#"{"s":{"a":1,"b":2.0},"t":"x"}"#).unwrap();
        let b = qual_json::from_str(r#"{"s":{"a":2,"b":2.0},"t":"y"}"#).unwrap();
        let mut out = Vec::new();
        leaf_differences(&a, &b, "", &mut out);
        assert_eq!(out, vec!["s.a", "t"]);
    }
}
