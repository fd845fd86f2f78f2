//! The pretty writer: byte for byte, Python's
//! `json.dumps(v, indent=2, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n"`, the
//! text of every receipt and runner evidence file. (The canonical writer, one line, is
//! [`crate::to_canonical_string`].)
//!
//! Some documents are, by their format, serde's pretty printing of typed structs instead
//! (field order, raw UTF-8, serde's float spelling): the CLI's `--json` reports, campaign and
//! serving evidence, oracle results, scaffolds and the generated workload schema. Those call
//! sites say so in a comment; switching them here would change their bytes.
//!
//! [`to_vec_serde_pretty_flat_scalars`] is serde's pretty printing except that an array whose
//! first element is a number, boolean or null is written on one line without spaces
//! (`[1,2,3]`): the serving evidence, whose per-request timestamp arrays hold millions of
//! numbers, each of which serde's pretty printer puts on its own indented line (a third of
//! the file's bytes and of the time spent writing it was indentation). serde_json offers no
//! such layout; it is the `Formatter` below.

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

/// serde's pretty JSON of `v` (indent 2, field order, raw UTF-8) with arrays of scalars on one
/// line; no trailing newline.
pub fn to_vec_serde_pretty_flat_scalars<T: serde::Serialize + ?Sized>(
    v: &T,
) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(4096);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, FlatScalars::default());
    v.serialize(&mut ser)?;
    Ok(out)
}

/// How an open array is laid out: undecided until its first element begins.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Undecided,
    OneLine,
    Lines,
}

/// serde_json's `PrettyFormatter` layout, except for arrays of scalars (see the module docs).
#[derive(Default)]
struct FlatScalars {
    depth: usize,
    has_value: bool,
    /// One entry per open container: `Some` for an array, `None` for an object.
    open: Vec<Option<Layout>>,
}

impl FlatScalars {
    fn newline_indent<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"\n")?;
        for _ in 0..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    /// Decides an undecided array's layout at its first element (`scalar`: that element is
    /// a number, boolean or null) and writes what precedes the element.
    fn element<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        scalar: bool,
    ) -> std::io::Result<()> {
        if let Some(Some(layout)) = self.open.last_mut() {
            if *layout == Layout::Undecided {
                *layout = if scalar {
                    Layout::OneLine
                } else {
                    Layout::Lines
                };
                if !scalar {
                    return self.newline_indent(w);
                }
            }
        }
        Ok(())
    }
}

impl FlatScalars {
    /// `[` or `{`: a new container (`frame`: `Some` for an array).
    fn open_container<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        frame: Option<Layout>,
        mark: &[u8],
    ) -> std::io::Result<()> {
        self.element(w, false)?;
        self.open.push(frame);
        self.depth += 1;
        self.has_value = false;
        w.write_all(mark)
    }

    /// `]` or `}`: on a line of its own unless empty or an array on one line.
    fn close_container<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        mark: &[u8],
    ) -> std::io::Result<()> {
        let one_line = self.open.pop().flatten() == Some(Layout::OneLine);
        self.depth -= 1;
        if self.has_value && !one_line {
            self.newline_indent(w)?;
        }
        w.write_all(mark)
    }
}

macro_rules! scalar_writes {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        fn $name<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: $t) -> std::io::Result<()> {
            self.element(w, true)?;
            serde_json::ser::CompactFormatter.$name(w, v)
        }
    )*};
}

impl serde_json::ser::Formatter for FlatScalars {
    scalar_writes!(
        write_bool: bool, write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64,
        write_i128: i128, write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64,
        write_u128: u128, write_f32: f32, write_f64: f64, write_number_str: &str,
    );

    fn write_null<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.element(w, true)?;
        w.write_all(b"null")
    }

    fn begin_string<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.element(w, false)?;
        w.write_all(b"\"")
    }

    fn write_byte_array<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: &[u8],
    ) -> std::io::Result<()> {
        self.element(w, false)?;
        self.begin_array(w)?;
        for (i, b) in value.iter().enumerate() {
            self.begin_array_value(w, i == 0)?;
            self.write_u8(w, *b)?;
            self.end_array_value(w)?;
        }
        self.end_array(w)
    }

    fn write_raw_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        self.element(w, false)?;
        w.write_all(fragment.as_bytes())
    }

    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open_container(w, Some(Layout::Undecided), b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close_container(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        match self.open.last() {
            Some(Some(Layout::OneLine)) => w.write_all(b","),
            Some(Some(Layout::Lines)) => {
                w.write_all(b",")?;
                self.newline_indent(w)
            }
            // The first element: its kind decides (`element`).
            _ => {
                debug_assert!(first);
                Ok(())
            }
        }
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open_container(w, None, b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close_container(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.newline_indent(w)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
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

    #[test]
    fn flat_scalars_is_serde_pretty_with_scalar_arrays_on_one_line() {
        let v = serde_json::json!({
            "a": [1, 2.5, null, true],
            "b": [{"x": [3, 4], "y": "é"}, {"z": []}],
            "c": [],
            "d": {},
            "e": ["s", 1],
            "f": [[1, 2], [3]],
            "g": [5, "t", {"h": 6}],
        });
        let got = String::from_utf8(to_vec_serde_pretty_flat_scalars(&v).unwrap()).unwrap();
        let expected = [
            "{",
            "  \"a\": [1,2.5,null,true],",
            "  \"b\": [",
            "    {",
            "      \"x\": [3,4],",
            "      \"y\": \"é\"",
            "    },",
            "    {",
            "      \"z\": []",
            "    }",
            "  ],",
            "  \"c\": [],",
            "  \"d\": {},",
            "  \"e\": [",
            "    \"s\",",
            "    1",
            "  ],",
            "  \"f\": [",
            "    [1,2],",
            "    [3]",
            "  ],",
            "  \"g\": [5,\"t\",{",
            "      \"h\": 6",
            "    }]",
            "}",
        ]
        .join("\n");
        assert_eq!(got, expected);
        let back: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(back, v);
        // Without arrays of scalars, serde's own pretty bytes.
        let w = serde_json::json!({"k": [{"a": "b"}, "c"], "m": {"n": null}});
        assert_eq!(
            to_vec_serde_pretty_flat_scalars(&w).unwrap(),
            serde_json::to_vec_pretty(&w).unwrap()
        );
    }
}
