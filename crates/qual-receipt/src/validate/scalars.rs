//! Scalar rules with the original's meaning: Python-compatible integers and equality
//! ([`py_eq`]), the identifier syntaxes (receipt, result, metric, host, config segment,
//! commit) and UTC timestamps.

use super::*;

/// The value as a Python `int` (bools are ints in Python), for the few rules that compare
/// integers with `isinstance(x, int)`.
pub(super) fn py_int(v: &Value) -> Option<Int> {
    match v {
        Value::Bool(b) => Some(Int::from(i64::from(*b))),
        Value::Number(Number::Int(i)) => Some(i.clone()),
        _ => None,
    }
}

/// Exact integer ordering on arbitrary-precision integers.
pub fn cmp_int(a: &Int, b: &Int) -> Ordering {
    match (a.is_negative(), b.is_negative()) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (neg, _) => {
            let mag = a
                .digits()
                .len()
                .cmp(&b.digits().len())
                .then_with(|| a.digits().cmp(b.digits()));
            if neg {
                mag.reverse()
            } else {
                mag
            }
        }
    }
}

pub(super) fn int_sign(i: &Int) -> Ordering {
    if i.is_negative() {
        Ordering::Less
    } else if i.digits() == "0" {
        Ordering::Equal
    } else {
        Ordering::Greater
    }
}

/// A non-bool integer literal.
pub(super) fn strict_int(v: &Value) -> Option<&Int> {
    v.as_int()
}

/// Python `==` between two JSON values: numbers (and bools) compare by numeric value, so
/// `1 == 1.0 == true`; everything else structurally.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    fn num(v: &Value) -> Option<NumKey> {
        match v {
            Value::Bool(b) => Some(NumKey::Int(Int::from(i64::from(*b)))),
            Value::Number(Number::Int(i)) => Some(NumKey::Int(i.clone())),
            Value::Number(Number::Float(f)) => Some(NumKey::Float(*f)),
            _ => None,
        }
    }
    enum NumKey {
        Int(Int),
        Float(f64),
    }
    match (num(a), num(b)) {
        (Some(x), Some(y)) => match (x, y) {
            (NumKey::Int(x), NumKey::Int(y)) => x == y,
            (NumKey::Float(x), NumKey::Float(y)) => x == y,
            (NumKey::Int(i), NumKey::Float(f)) | (NumKey::Float(f), NumKey::Int(i)) => {
                crate::decimal::Decimal::from_int(&i) == crate::decimal::Decimal::from_f64(f)
            }
        },
        (None, None) => match (a, b) {
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
            }
            _ => a == b,
        },
        _ => false,
    }
}

/// `isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)`.
pub fn is_finite_number(v: &Value) -> bool {
    match v {
        Value::Number(Number::Int(i)) => i.as_f64().is_some(),
        Value::Number(Number::Float(f)) => f.is_finite(),
        _ => false,
    }
}

pub(super) fn is_ascii_class(
    s: &str,
    first: fn(u8) -> bool,
    rest: fn(u8) -> bool,
    min: usize,
    max: usize,
) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && first(b[0])
        && b.len() > min
        && b.len() <= max + 1
        && b[1..].iter().all(|&c| rest(c))
}

pub(super) fn lower_digit(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}
pub(super) fn id_rest(c: u8) -> bool {
    lower_digit(c) || matches!(c, b'.' | b'_' | b'-')
}

/// `^[a-z0-9][a-z0-9._-]{2,127}$`
pub fn is_receipt_id(s: &str) -> bool {
    is_ascii_class(s, lower_digit, id_rest, 2, 127)
}
/// `^[a-z0-9][a-z0-9._-]{0,127}$`
pub fn is_result_id(s: &str) -> bool {
    is_ascii_class(s, lower_digit, id_rest, 0, 127)
}
/// `^[a-z][a-z0-9_.-]{0,127}$`
pub fn is_metric_name(s: &str) -> bool {
    is_ascii_class(s, |c| c.is_ascii_lowercase(), id_rest, 0, 127)
}
/// `^[a-z0-9][a-z0-9._-]{1,63}$`
pub fn is_host_id(s: &str) -> bool {
    is_ascii_class(s, lower_digit, id_rest, 1, 63)
}
/// `^[a-z][a-z0-9_-]*$`
pub fn is_config_segment(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|&c| lower_digit(c) || matches!(c, b'_' | b'-'))
}
/// `^[0-9a-f]{40}$`
pub fn is_commit(s: &str) -> bool {
    qual_git::is_commit_id(s)
}

/// Parses a receipt timestamp: ISO-8601 ending in `Z` (Python's `datetime.fromisoformat` after
/// replacing `Z` by `+00:00`). Returns microseconds since the Unix epoch; digits beyond
/// microseconds are truncated like Python does.
pub fn parse_utc_timestamp(text: &str) -> Result<i128, TimestampError> {
    let body = text.strip_suffix('Z').ok_or(TimestampError::NoZ)?;
    parse_naive_iso(body).ok_or(TimestampError::Invalid)
}

/// Why a timestamp was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampError {
    /// Does not end in `Z`.
    NoZ,
    /// Not a valid ISO-8601 date-time.
    Invalid,
}

pub(super) fn digits_at(b: &[u8], pos: usize, n: usize) -> Option<i64> {
    let s = b.get(pos..pos + n)?;
    if !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
}

pub(super) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(super) fn parse_naive_iso(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    // Date: YYYY-MM-DD or YYYYMMDD.
    let year = digits_at(b, 0, 4)?;
    let (month, day, mut pos) = if b.get(4) == Some(&b'-') {
        if b.get(7) != Some(&b'-') {
            return None;
        }
        (digits_at(b, 5, 2)?, digits_at(b, 8, 2)?, 10)
    } else {
        (digits_at(b, 4, 2)?, digits_at(b, 6, 2)?, 8)
    };
    if !(1..=9999).contains(&year) || !(1..=12).contains(&month) {
        return None;
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day < 1 || day > month_days[(month - 1) as usize] {
        return None;
    }
    // Separator: any single non-digit character (Python accepts any).
    let sep = s[pos..].chars().next()?;
    if sep.is_ascii_digit() {
        return None;
    }
    pos += sep.len_utf8();
    let hour = digits_at(b, pos, 2)?;
    pos += 2;
    let mut minute = 0;
    let mut second = 0;
    let mut micros = 0i64;
    let extended = b.get(pos) == Some(&b':');
    if pos < b.len() {
        if extended {
            pos += 1;
        }
        minute = digits_at(b, pos, 2)?;
        pos += 2;
        if pos < b.len() {
            if extended {
                if b.get(pos) != Some(&b':') {
                    return None;
                }
                pos += 1;
            }
            second = digits_at(b, pos, 2)?;
            pos += 2;
            if pos < b.len() {
                if !matches!(b[pos], b'.' | b',') {
                    return None;
                }
                pos += 1;
                let frac = &b[pos..];
                if frac.is_empty() || !frac.iter().all(u8::is_ascii_digit) {
                    return None;
                }
                for i in 0..6 {
                    micros = micros * 10 + frac.get(i).map_or(0, |d| i64::from(d - b'0'));
                }
                pos = b.len();
            }
        }
    }
    if pos != b.len() || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some(i128::from(secs) * 1_000_000 + i128::from(micros))
}
