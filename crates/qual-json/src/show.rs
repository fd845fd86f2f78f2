//! How values are spelled inside messages: in JSON, the language of the documents themselves
//! (`null`, `true`, `"name"`, `["a", "b"]`), never in the original implementation's Python
//! (`None`, `True`, `'name'`, `['a', 'b']`).
//!
//! Strings are quoted as JSON string literals (`"`, `\`, control and non-ASCII characters
//! escaped); lists and objects use `", "` and `": "` separators so a message reads like
//! the document a person would write. Floats keep their shortest round-trip spelling (`1.0`,
//! `1e-05`), which is valid JSON.

use crate::{python_float_repr, write_ascii_string, Number, Value};

/// A string as a JSON string literal: `"name"` (canonical JSON's ASCII escaping, so a
/// message never carries a control or bidirectional character of its own).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_ascii_string(s, &mut out);
    out
}

/// A list of strings as a JSON array: `["a", "b"]`.
pub fn list<S: AsRef<str>>(items: &[S]) -> String {
    let parts: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", parts.join(", "))
}

/// A value as JSON (`null` for an absent one): `null`, `true`, `3`, `1.0`, `"x"`, `[1, 2]`,
/// `{"k": 1}`.
pub fn value(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(Number::Int(i))) => i.to_string(),
        Some(Value::Number(Number::Float(f))) => python_float_repr(*f),
        Some(Value::String(s)) => quote(s),
        Some(Value::Array(a)) => {
            let items: Vec<String> = a.iter().map(|x| value(Some(x))).collect();
            format!("[{}]", items.join(", "))
        }
        Some(Value::Object(o)) => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, x)| format!("{}: {}", quote(k), value(Some(x))))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// A value as plain text: a string as it is, anything else as [`value`].
pub fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        other => value(other),
    }
}

/// An I/O error as a message reads it: the operating system's text in lower case, without
/// Rust's ` (os error N)` suffix (`no such file or directory`, `permission denied`).
pub fn io_error(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => &text[..i],
        _ => text.as_str(),
    };
    let mut chars = text.chars();
    match chars.next() {
        // Only a capitalised first word is lowered ("No such file" → "no such file"; an
        // acronym such as "EROFS" stays).
        Some(c)
            if c.is_ascii_uppercase() && chars.next().is_some_and(|d| d.is_ascii_lowercase()) =>
        {
            format!("{}{}", c.to_ascii_lowercase(), &text[1..])
        }
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelled_as_json() {
        assert_eq!(quote("it's"), "\"it's\"");
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(list(&["b", "a"]), "[\"b\", \"a\"]");
        assert_eq!(value(None), "null");
        assert_eq!(value(Some(&Value::Bool(true))), "true");
        assert_eq!(value(Some(&Value::from(12.0))), "12.0");
        assert_eq!(text(Some(&Value::from("x"))), "x");
        assert_eq!(text(None), "null");
    }

    #[test]
    fn io_errors_read_without_the_os_error_number() {
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(super::io_error(&e), "no such file or directory");
        let e = std::io::Error::from_raw_os_error(13);
        assert_eq!(super::io_error(&e), "permission denied");
        assert_eq!(
            super::io_error(&std::io::Error::other("EROFS here")),
            "EROFS here"
        );
    }
}
