//! Python-compatible rendering of values inside messages.
//!
//! The original builds messages with f-strings: `{x!r}` (repr) for quoted values, `{x}` (str)
//! for numbers, and `sorted(...)` lists printed as `['a', 'b']`. These helpers reproduce those
//! renderings for the JSON values this crate handles, so reasons match the original's text.

use qual_json::{python_float_repr, python_str_repr, Number, Value};

/// `str(x)` of a JSON value as Python would hold it after `json.loads`.
pub fn py_str(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "None".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => py_repr(Some(other)),
    }
}

/// `repr(x)` of a JSON value as Python would hold it after `json.loads`.
pub fn py_repr(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "None".into(),
        Some(Value::Bool(true)) => "True".into(),
        Some(Value::Bool(false)) => "False".into(),
        Some(Value::Number(Number::Int(i))) => i.to_string(),
        Some(Value::Number(Number::Float(f))) => python_float_repr(*f),
        Some(Value::String(s)) => python_str_repr(s),
        Some(Value::Array(a)) => {
            let items: Vec<String> = a.iter().map(|x| py_repr(Some(x))).collect();
            format!("[{}]", items.join(", "))
        }
        Some(Value::Object(o)) => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, x)| format!("{}: {}", python_str_repr(k), py_repr(Some(x))))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// `str(float)`.
pub fn py_float(f: f64) -> String {
    python_float_repr(f)
}

/// A Python list of strings as printed by `str(list)`: `['a', 'b']`.
pub fn py_list<S: AsRef<str>>(items: &[S]) -> String {
    let parts: Vec<String> = items.iter().map(|s| python_str_repr(s.as_ref())).collect();
    format!("[{}]", parts.join(", "))
}

/// `repr(str)`.
pub fn py_str_repr(s: &str) -> String {
    python_str_repr(s)
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
    fn renders_like_python() {
        assert_eq!(py_list(&["b", "a"]), "['b', 'a']");
        assert_eq!(py_str(None), "None");
        assert_eq!(py_str(Some(&Value::from(12.0))), "12.0");
        assert_eq!(py_repr(Some(&Value::from("x"))), "'x'");
        assert_eq!(py_repr(Some(&Value::from(3i64))), "3");
        assert!(eq_int(Some(&Value::from(3.0)), 3));
        assert!(!eq_int(Some(&Value::from("3")), 3));
    }
}
