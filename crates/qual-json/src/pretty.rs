//! The pretty writer: byte for byte, Python's
//! `json.dumps(v, indent=2, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n"`, the
//! text of every receipt and runner evidence file. (The canonical writer, one line, is
//! [`crate::to_canonical_string`].)
//!
//! Some documents are, by their format, serde's pretty printing of typed structs instead
//! (field order, raw UTF-8, serde's float spelling): the CLI's `--json` reports, campaign and
//! serving evidence, oracle results, scaffolds and the generated workload schema. Those call
//! sites say so in a comment; switching them here would change their bytes.

use crate::{python_float_repr, write_ascii_string, Number, Value};

/// Python-compatible pretty JSON (indent 2, sorted keys, ASCII) with a trailing newline.
pub fn to_pretty_json(v: &Value) -> String {
    let mut out = String::new();
    write_pretty(v, 0, &mut out);
    out.push('\n');
    out
}

fn indent(n: usize, out: &mut String) {
    out.push('\n');
    for _ in 0..n {
        out.push_str("  ");
    }
}

fn write_pretty(v: &Value, depth: usize, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(Number::Int(i)) => out.push_str(&i.to_string()),
        Value::Number(Number::Float(f)) => out.push_str(&python_float_repr(*f)),
        Value::String(s) => write_ascii_string(s, out),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(depth + 1, out);
                write_pretty(item, depth + 1, out);
            }
            indent(depth, out);
            out.push(']');
        }
        Value::Object(o) => {
            if o.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut entries: Vec<(&String, &Value)> = o.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(depth + 1, out);
                write_ascii_string(k, out);
                out.push_str(": ");
                write_pretty(val, depth + 1, out);
            }
            indent(depth, out);
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_text_matches_python_json_dumps_indent_2() {
        let v = crate::from_str(
            r#"{"b":[1,2.5,{"z":null,"a":"\u00e9"}],"a":{},"c":[],"d":1e-05,"e":1.0,"f":true}"#,
        )
        .unwrap();
        let expected = "{\n  \"a\": {},\n  \"b\": [\n    1,\n    2.5,\n    {\n      \"a\": \"\\u00e9\",\n      \"z\": null\n    }\n  ],\n  \"c\": [],\n  \"d\": 1e-05,\n  \"e\": 1.0,\n  \"f\": true\n}\n";
        assert_eq!(to_pretty_json(&v), expected);
    }
}
