//! JSON text in the original's file layout: `json.dumps(v, indent=2[, sort_keys=True])`.
//!
//! Python's indented form puts each item on its own line, uses `", "`-free separators `","`
//! at line ends and `": "` between key and value, prints empty containers as `[]`/`{}`, and
//! escapes all non-ASCII characters (`ensure_ascii=True`). Floats are Python `repr`, integers
//! their exact digits. Files end with a single `\n` (added by [`to_file_text`]).

use qual_json::{python_float_repr, write_ascii_string, Number, Value};

/// `json.dumps(v, indent=2, sort_keys=sort_keys)`.
pub fn to_pretty(v: &Value, sort_keys: bool) -> String {
    let mut out = String::new();
    write(v, sort_keys, 0, &mut out);
    out
}

/// [`to_pretty`] plus the trailing newline the original writes.
pub fn to_file_text(v: &Value, sort_keys: bool) -> String {
    let mut s = to_pretty(v, sort_keys);
    s.push('\n');
    s
}

fn indent(level: usize, out: &mut String) {
    out.push('\n');
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write(v: &Value, sort: bool, level: usize, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(Number::Int(i)) => out.push_str(&i.to_string()),
        Value::Number(Number::Float(f)) => out.push_str(&python_float_repr(*f)),
        Value::String(s) => write_ascii_string(s, out),
        Value::Array(a) if a.is_empty() => out.push_str("[]"),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(level + 1, out);
                write(item, sort, level + 1, out);
            }
            indent(level, out);
            out.push(']');
        }
        Value::Object(o) if o.is_empty() => out.push_str("{}"),
        Value::Object(o) => {
            let mut entries: Vec<_> = o.iter().collect();
            if sort {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(level + 1, out);
                write_ascii_string(k, out);
                out.push_str(": ");
                write(item, sort, level + 1, out);
            }
            indent(level, out);
            out.push('}');
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests read the shared corpus
mod tests {
    use super::*;

    #[test]
    fn matches_python_indent_2() {
        let v = qual_json::from_str(r#"{"b":[1,2.50,{}],"a":{"é":null,"x":[]}}"#).unwrap();
        assert_eq!(
            to_pretty(&v, true),
            "{\n  \"a\": {\n    \"x\": [],\n    \"\\u00e9\": null\n  },\n  \"b\": [\n    1,\n    2.5,\n    {}\n  ]\n}"
        );
        assert!(to_pretty(&v, false).starts_with("{\n  \"b\""));
    }
}
