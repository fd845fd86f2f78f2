//! Canonical JSON text and `sha256:` digests.
//!
//! The canonical form is, byte for byte, what Python produces with
//! `json.dumps(v, ensure_ascii=True, allow_nan=False, sort_keys=True, separators=(",", ":"))`:
//!
//! - object keys sorted by Unicode code point (Rust's `str` ordering on UTF-8 is the same);
//! - no whitespace; `,` between items and `:` between key and value;
//! - strings escaped as `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`; every other character outside
//!   `0x20..=0x7E` as `\uXXXX` with lowercase hex, non-BMP characters as a surrogate pair;
//! - integers as their exact decimal text;
//! - floats as Python's `repr`: the shortest round-trip digits, fixed notation when the decimal
//!   exponent is in `-4..16` (always with a fractional part, e.g. `1.0`), otherwise scientific
//!   with a signed, at least two-digit exponent (`1e-05`, `1.5e+16`).
//!
//! A digest is `sha256:` followed by 64 lowercase hex digits.

use crate::value::{Number, Value};
use sha2::{Digest, Sha256};

/// The canonical JSON text of a value.
pub fn to_canonical_string(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

/// `sha256:<hex>` of the canonical JSON text of a value.
pub fn canonical_digest(v: &Value) -> String {
    sha256_prefixed(to_canonical_string(v).as_bytes())
}

/// The shortest round-trip digits of a finite float in Rust's scientific form (`1.5e-7`),
/// chosen like Python's `repr`: among the shortest strings that round-trip, the one nearest
/// the exact value, ties to even. Rust's `{:e}` finds the shortest length but rounds an exact
/// tie between two candidates of that length up (e.g. the `f32` value 20.9849395751953125
/// widened to `f64`: Rust `...313`, Python `...312`); `{:.N$e}` rounds exactly with ties to
/// even, and the nearest decimal of a length round-trips whenever any of that length does.
pub(crate) fn shortest_sci(f: f64) -> String {
    let sci = format!("{f:e}");
    let digits = sci
        .split_once('e')
        .map_or(0, |(m, _)| m.bytes().filter(u8::is_ascii_digit).count());
    if digits < 2 {
        return sci;
    }
    let nearest = format!("{f:.*e}", digits - 1);
    if nearest.parse::<f64>() == Ok(f) {
        nearest
    } else {
        sci
    }
}

/// The self-hash of a document (Kiln's `receipt_sha256`, `result_sha256`, `content_sha256`…):
/// the canonical digest of the object **without** its member `field`, whether or not that
/// member is present. `None` when `v` is not an object.
pub fn self_digest(v: &Value, field: &str) -> Option<String> {
    let mut o = v.as_object()?.clone();
    o.remove(field);
    Some(canonical_digest(&Value::Object(o)))
}

/// `sha256:<hex>` of raw bytes.
pub fn sha256_prefixed(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Whether a string has the `sha256:<64 lowercase hex>` form.
pub fn is_sha256_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(Number::Int(i)) => out.push_str(&i.to_string()),
        Value::Number(Number::Float(f)) => out.push_str(&python_float_repr(*f)),
        Value::String(s) => write_ascii_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut entries: Vec<_> = o.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_ascii_string(k, out);
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
    }
}

/// Writes a string the way Python's `json.dumps(..., ensure_ascii=True)` does.
pub fn write_ascii_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// Python's `repr(float)` for a finite float.
pub fn python_float_repr(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sci = shortest_sci(f);
    let (mantissa, exp) = sci
        .split_once('e')
        .expect("scientific format has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            out.push_str("0.");
            for _ in 0..(-point) {
                out.push('0');
            }
            out.push_str(&digits);
        } else if point as usize >= digits.len() {
            out.push_str(&digits);
            for _ in 0..(point as usize - digits.len()) {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    }
    out
}

/// Python's `repr(str)`, used to quote values inside messages compatible with the original
/// (`'x'`, or `"it's"` when the text holds a single quote and no double quote).
pub fn python_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn seventeen_digit_ties_round_to_even_like_python() {
        // repr(20.984939575195312) in Python; Rust's `{:e}` gives ...313.
        let v: f64 = "20.984939575195312".parse().unwrap();
        assert_eq!(super::python_float_repr(v), "20.984939575195312");
        assert!(crate::check_float("20.984939575195312").is_ok());
        assert!(crate::check_float("20.984939575195313").is_err());
        // repr(0.7906875610351562): a 16-digit tie.
        let v: f64 = "0.7906875610351562".parse().unwrap();
        assert_eq!(super::python_float_repr(v), "0.7906875610351562");
        assert!(crate::check_float("0.7906875610351562").is_ok());
    }

    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.5e16, "1.5e+16"),
            (123.456, "123.456"),
            (-2.5, "-2.5"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (12345678901234567.0, "1.2345678901234568e+16"),
        ];
        for (f, want) in cases {
            assert_eq!(python_float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn ascii_escaping_matches_python() {
        let mut out = String::new();
        write_ascii_string("a\"b\\c\n\u{7f}é😀\u{1}", &mut out);
        assert_eq!(out, r#""a\"b\\c\n\u007f\u00e9\ud83d\ude00\u0001""#);
    }

    #[test]
    fn canonical_sorts_keys_and_compacts() {
        let v = crate::from_str(r#"{"b": [1, 2.0, true], "a": {"z": null, "y": "x"}}"#).unwrap();
        assert_eq!(
            to_canonical_string(&v),
            r#"{"a":{"y":"x","z":null},"b":[1,2.0,true]}"#
        );
    }

    #[test]
    fn repr_quotes_like_python() {
        assert_eq!(python_str_repr("x"), "'x'");
        assert_eq!(python_str_repr("it's"), "\"it's\"");
    }
}
