//! How values are spelled inside this crate's messages: JSON (`null`, `true`, `"x"`,
//! `["a", "b"]`), through `qual_json::show`, plus the few Python-compatible number rules the
//! original's checks rely on.

use qual_json::{python_float_repr, show, Value};

/// A value as plain text (a string as it is, anything else as JSON; absent is `null`).
pub fn text(v: Option<&Value>) -> String {
    show::text(v)
}

/// A value as JSON (absent is `null`).
pub fn value(v: Option<&Value>) -> String {
    show::value(v)
}

/// A float in its shortest round-trip spelling.
pub fn float(f: f64) -> String {
    python_float_repr(f)
}

/// A list of strings as a JSON array: `["a", "b"]`.
pub fn list<S: AsRef<str>>(items: &[S]) -> String {
    show::list(items)
}

/// How this crate's closed objects phrase missing and unknown keys (both sorted, as JSON
/// arrays): `missing required keys: ["a"]`, `contains unknown keys: ["b"]`.
const KEY_PHRASING: qual_json::Phrasing = qual_json::Phrasing {
    missing: "missing required keys: {}",
    unknown: "contains unknown keys: {}",
    list: qual_json::KeyList::Json,
    unknown_first: false,
};

/// The closed-object findings for `obj` (`required` must be present, nothing outside
/// `allowed` may be), missing keys first.
pub fn key_messages(obj: &qual_json::Object, required: &[&str], allowed: &[&str]) -> Vec<String> {
    qual_json::ClosedKeys::with_optional(required, allowed)
        .check(obj)
        .messages(&KEY_PHRASING)
}

/// A string as a JSON string literal.
pub fn quote(s: &str) -> String {
    show::quote(s)
}

/// Whether a value is a Python number (`int` or `float`, never `bool`).
pub fn is_number(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Number(_)))
}

/// Whether a value is a finite Python number (ints count when they fit a float).
pub fn finite_number(v: Option<&Value>) -> Option<f64> {
    match v {
        Some(Value::Number(n)) => n.as_f64().filter(|f| f.is_finite()),
        _ => None,
    }
}

/// Python `==` between a JSON value and an integer (`3 == 3.0` is true, `True == 1` too).
pub fn eq_int(v: Option<&Value>, want: i64) -> bool {
    match v {
        Some(Value::Number(n)) => n.as_f64() == Some(want as f64),
        Some(Value::Bool(b)) => i64::from(*b) == want,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_as_json() {
        assert_eq!(list(&["b", "a"]), "[\"b\", \"a\"]");
        assert_eq!(text(None), "null");
        assert_eq!(text(Some(&Value::from(12.0))), "12.0");
        assert_eq!(value(Some(&Value::from("x"))), "\"x\"");
        assert_eq!(value(Some(&Value::from(3i64))), "3");
        assert!(eq_int(Some(&Value::from(3.0)), 3));
        assert!(!eq_int(Some(&Value::from("3")), 3));
    }
}
