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
//!
//! This module owns the shared plumbing (the dotted/pointer context [`Ctx`], the violation
//! [`Report`], the typed field readers); each rule family lives in its own file, in the order
//! the original evaluates them:
//! - [`workload`]: the top level, `determinism`, and the whole-workload seed/model checks;
//! - [`variables`]: `variables[*]`, their constraints, and a value against a declaration;
//! - [`variant`]: `variants[*]` and their `effective_config`;
//! - [`case`]: `variants[*].cases[*]` (argv, environment, exit codes, assertions, result
//!   protocol);
//! - [`policy`]: `comparison_policy` (variant and backend pairs, mode requirements);
//! - [`rules`]: `comparison_policy.metric_rules[*]` and their per-rule requirements;
//! - [`parameters`]: a receipt's resolved `workload.parameters` against its workload.

mod case;
mod parameters;
mod policy;
mod rules;
mod variables;
mod variant;
mod workload;

pub use parameters::{validate_workload_parameters, variant_references};
pub use workload::validate_workload;

use case::validate_case;
use policy::validate_policy;
use rules::{check_metric_rules, check_rules_against_mode, RuleFacts};
use variables::{check_value, validate_variables, VarFacts};
use variant::{validate_variant, CaseContract, VariantFacts};

use crate::constants::*;
use crate::pattern;
use qual_json::keys::MISSING_UNKNOWN;
use qual_json::{
    show::quote as repr, to_canonical_string, ClosedKeys, Number, Object, Value, Violations,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One contract violation: the document layer's [`qual_json::Violation`], whose `pointer` is a
/// JSON pointer and whose `message` starts with the original's dotted context (so the message
/// alone is the original's error text; print `message`, not the pointer-prefixed `Display`).
pub use qual_json::Violation;
use std::sync::LazyLock;

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

/// The violations found so far, in the original's order.
#[derive(Default)]
struct Report {
    errors: Violations,
}

impl Report {
    /// `<dotted context> <tail>` at the context's pointer.
    fn at(&mut self, ctx: &Ctx, tail: impl fmt::Display) {
        self.errors
            .push(ctx.ptr.clone(), format!("{} {}", ctx.text, tail));
    }
    /// A message of its own (not prefixed by a context) at `ptr`.
    fn raw(&mut self, ptr: &str, message: String) {
        self.errors.push(ptr, message);
    }
    /// Every violation, in order.
    fn finish(self) -> Vec<Violation> {
        self.errors.into_vec()
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
    for message in ClosedKeys::new(keys).check(o).messages(&MISSING_UNKNOWN) {
        r.at(ctx, message);
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
