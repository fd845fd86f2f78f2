//! The strict JSON reader.
//!
//! Written by hand because no maintained crate offers all of: duplicate-key rejection at any
//! depth, lexical number kinds (`1` vs `1.0`), arbitrary-precision integers with a digit cap,
//! the original's exact-float rule, and errors that carry a JSON pointer *and* a byte offset.
//! `serde_json` silently keeps the last duplicate key and folds `1.0` into the same `Number`
//! space, which would make the verdicts differ from the original implementation.
//!
//! Grammar: RFC 8259 (the same as Python's `json` module in its strict mode), plus recognition
//! of the `NaN`/`Infinity`/`-Infinity` tokens solely to reject them with a precise reason.

use crate::value::{Int, Number, Object, Value};
use std::collections::HashSet;
use std::fmt;

/// Limits applied while reading. The defaults suit contract files.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest accepted input, in bytes.
    pub max_bytes: usize,
    /// Deepest accepted nesting of arrays and objects.
    pub max_depth: usize,
    /// Most digits an integer literal may have (sign excluded).
    pub max_int_digits: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bytes: 64 * 1024 * 1024,
            max_depth: 256,
            max_int_digits: 4096,
        }
    }
}

/// Why a document was refused. The snake_case names of the number reasons match the original
/// implementation's `reason` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Input larger than [`Limits::max_bytes`].
    TooLarge,
    /// Nesting deeper than [`Limits::max_depth`].
    TooDeep,
    /// Input starts with a UTF-8 byte order mark.
    Bom,
    /// Input is not valid UTF-8.
    InvalidUtf8,
    /// Grammar error.
    Syntax,
    /// Data after the top-level value.
    TrailingData,
    /// A duplicate object key.
    DuplicateKey,
    /// `NaN`, `Infinity` or `-Infinity`.
    NonFiniteConstant,
    /// A number token that is not a valid JSON number.
    InvalidNumber,
    /// A float literal that overflows to infinity.
    FloatOverflow,
    /// A non-zero float literal whose nearest double is zero.
    FloatUnderflow,
    /// A float literal whose value differs from its nearest double's shortest representation.
    InexactFloat,
    /// An integer literal with more than the allowed digits.
    IntegerTooLong,
    /// A string that contains an unpaired UTF-16 surrogate escape.
    LoneSurrogate,
}

impl Reason {
    /// Stable snake_case name, used in `--json` reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::TooLarge => "too_large",
            Reason::TooDeep => "too_deep",
            Reason::Bom => "bom",
            Reason::InvalidUtf8 => "invalid_utf8",
            Reason::Syntax => "syntax",
            Reason::TrailingData => "trailing_data",
            Reason::DuplicateKey => "duplicate_key",
            Reason::NonFiniteConstant => "non_finite_constant",
            Reason::InvalidNumber => "invalid_number",
            Reason::FloatOverflow => "float_overflow",
            Reason::FloatUnderflow => "float_underflow",
            Reason::InexactFloat => "inexact_float",
            Reason::IntegerTooLong => "integer_too_long",
            Reason::LoneSurrogate => "lone_surrogate",
        }
    }
}

/// A refusal of the strict reader: what, where (JSON pointer of the enclosing value and byte
/// offset), and a lowercase message that reads after "failed to parse JSON: ".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at {} byte {offset})", if pointer.is_empty() { "/" } else { pointer.as_str() })]
pub struct ParseError {
    /// The kind of refusal.
    pub reason: Reason,
    /// Human message, e.g. `duplicate JSON object key: name`.
    pub message: String,
    /// JSON pointer of the value being read when the error occurred (`""` is the root).
    pub pointer: String,
    /// Byte offset into the input.
    pub offset: usize,
}

enum Seg {
    Key(String),
    Index(usize),
}

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
    limits: Limits,
    path: Vec<Seg>,
    /// Items of the arrays being read, innermost last; each array takes its items off the top
    /// in one exactly sized allocation when it closes (no growth reallocations per array).
    items: Vec<Value>,
    /// Entries of the objects being read, the same way.
    entries: Vec<(String, Value)>,
}

/// Parses a complete document with the default [`Limits`].
pub fn from_slice(bytes: &[u8]) -> Result<Value, ParseError> {
    from_slice_with(bytes, Limits::default())
}

/// Parses a complete document with explicit limits.
pub fn from_slice_with(bytes: &[u8], limits: Limits) -> Result<Value, ParseError> {
    let err = |reason, message: String, offset| ParseError {
        reason,
        message,
        pointer: String::new(),
        offset,
    };
    if bytes.len() > limits.max_bytes {
        return Err(err(
            Reason::TooLarge,
            format!(
                "input is {} bytes, larger than the limit of {} bytes",
                bytes.len(),
                limits.max_bytes
            ),
            limits.max_bytes,
        ));
    }
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(err(
            Reason::Bom,
            "unexpected UTF-8 byte order mark: input must be plain UTF-8".into(),
            0,
        ));
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            return Err(err(
                Reason::InvalidUtf8,
                format!(
                    "input is not valid UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
                e.valid_up_to(),
            ))
        }
    };
    let mut p = Parser {
        src: bytes,
        text,
        pos: 0,
        limits,
        path: Vec::new(),
        items: Vec::new(),
        entries: Vec::new(),
    };
    p.skip_ws();
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != p.src.len() {
        return Err(p.error(
            Reason::TrailingData,
            "extra data after the JSON value".into(),
        ));
    }
    Ok(v)
}

/// Parses a UTF-8 string slice.
pub fn from_str(text: &str) -> Result<Value, ParseError> {
    from_slice(text.as_bytes())
}

fn escape_pointer_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

impl Parser<'_> {
    fn pointer(&self) -> String {
        let mut out = String::new();
        for seg in &self.path {
            out.push('/');
            match seg {
                Seg::Key(k) => out.push_str(&escape_pointer_token(k)),
                Seg::Index(i) => out.push_str(&i.to_string()),
            }
        }
        out
    }

    fn error(&self, reason: Reason, message: String) -> ParseError {
        self.error_at(reason, message, self.pos)
    }

    fn error_at(&self, reason: Reason, message: String, offset: usize) -> ParseError {
        let (line, col) = self.line_col(offset);
        ParseError {
            reason,
            message: format!("{message}: line {line} column {col}"),
            pointer: self.pointer(),
            offset,
        }
    }

    fn number_error(&self, reason: Reason, message: String, offset: usize) -> ParseError {
        ParseError {
            reason,
            message,
            pointer: self.pointer(),
            offset,
        }
    }

    fn line_col(&self, offset: usize) -> (usize, usize) {
        let upto = &self.src[..offset.min(self.src.len())];
        let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = offset - upto.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
        (line, col)
    }

    fn skip_ws(&mut self) {
        while let Some(&b) = self.src.get(self.pos) {
            if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        match self.peek() {
            None => Err(self.error(Reason::Syntax, "expected a value".into())),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'N') => self.non_finite("NaN"),
            Some(b'I') => self.non_finite("Infinity"),
            Some(b'-') if self.src[self.pos..].starts_with(b"-Infinity") => {
                self.non_finite("-Infinity")
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error(Reason::Syntax, "expected a value".into())),
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, ParseError> {
        if self.src[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.error(Reason::Syntax, "expected a value".into()))
        }
    }

    fn non_finite(&mut self, word: &str) -> Result<Value, ParseError> {
        if self.src[self.pos..].starts_with(word.as_bytes()) {
            let at = self.pos;
            self.pos += word.len();
            Err(self.number_error(
                Reason::NonFiniteConstant,
                format!("non-finite JSON number is not allowed: {word}"),
                at,
            ))
        } else {
            Err(self.error(Reason::Syntax, "expected a value".into()))
        }
    }

    fn enter(&self, depth: usize) -> Result<(), ParseError> {
        if depth > self.limits.max_depth {
            Err(self.error(
                Reason::TooDeep,
                format!("nesting deeper than {} levels", self.limits.max_depth),
            ))
        } else {
            Ok(())
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.enter(depth)?;
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(Vec::new()));
        }
        let start = self.items.len();
        loop {
            self.path.push(Seg::Index(self.items.len() - start));
            self.skip_ws();
            let v = self.value(depth)?;
            self.path.pop();
            self.items.push(v);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(self.items.drain(start..).collect()));
                }
                _ => {
                    return Err(self.error(Reason::Syntax, "expected ',' or ']' in an array".into()))
                }
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, ParseError> {
        const SMALL_OBJECT: usize = 16;
        self.enter(depth)?;
        self.pos += 1;
        // Duplicate keys: a linear scan while the object is small (almost every object), a
        // hash set once it grows past SMALL_OBJECT keys (no quadratic blow-up on huge ones).
        let mut seen: Option<HashSet<String>> = None;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(Object::new()));
        }
        let start = self.entries.len();
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error(
                    Reason::Syntax,
                    "expected a property name enclosed in double quotes".into(),
                ));
            }
            let key_at = self.pos;
            let key = self.string()?;
            let open = &self.entries[start..];
            let duplicate = match &mut seen {
                Some(set) => !set.insert(key.clone()),
                None if open.iter().any(|(k, _)| *k == key) => true,
                None => {
                    if open.len() >= SMALL_OBJECT {
                        let mut set: HashSet<String> =
                            open.iter().map(|(k, _)| k.clone()).collect();
                        set.insert(key.clone());
                        seen = Some(set);
                    }
                    false
                }
            };
            if duplicate {
                self.path.push(Seg::Key(key.clone()));
                let e = self.number_error(
                    Reason::DuplicateKey,
                    format!("duplicate JSON object key: {key}"),
                    key_at,
                );
                return Err(e);
            }
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error(Reason::Syntax, "expected ':' after a property name".into()));
            }
            self.pos += 1;
            self.skip_ws();
            // The key lives on the path while its value is parsed (for error pointers), then
            // moves into the object: no copy per key.
            self.path.push(Seg::Key(key));
            let v = self.value(depth)?;
            let Some(Seg::Key(key)) = self.path.pop() else {
                unreachable!("the path holds the key pushed above");
            };
            self.entries.push((key, v));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    let entries = self.entries.drain(start..).collect();
                    return Ok(Value::Object(Object::from_unique_entries(entries)));
                }
                _ => {
                    return Err(
                        self.error(Reason::Syntax, "expected ',' or '}' in an object".into())
                    )
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let s = self
            .src
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error(Reason::Syntax, "invalid \\u escape in a string".into()))?;
        let mut v = 0u32;
        for &b in s {
            let d = (b as char).to_digit(16).ok_or_else(|| {
                self.error(Reason::Syntax, "invalid \\u escape in a string".into())
            })?;
            v = v * 16 + d;
        }
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            // Copy a run of plain characters at once.
            let run_start = self.pos;
            while let Some(&b) = self.src.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.peek() {
                None => {
                    return Err(self.error_at(Reason::Syntax, "unterminated string".into(), start))
                }
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let esc = self.peek().ok_or_else(|| {
                        self.error_at(Reason::Syntax, "unterminated string".into(), start)
                    })?;
                    self.pos += 1;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let esc_at = self.pos - 2;
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if self.src[self.pos..].starts_with(b"\\u") {
                                    self.pos += 2;
                                    let lo = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&lo) {
                                        char::from_u32(
                                            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00),
                                        )
                                    } else {
                                        None
                                    }
                                } else {
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            match c {
                                Some(c) => out.push(c),
                                None => {
                                    return Err(self.error_at(
                                        Reason::LoneSurrogate,
                                        "string contains an unpaired UTF-16 surrogate escape"
                                            .into(),
                                        esc_at,
                                    ))
                                }
                            }
                        }
                        _ => {
                            return Err(self.error_at(
                                Reason::Syntax,
                                "invalid escape in a string".into(),
                                self.pos - 2,
                            ))
                        }
                    }
                }
                Some(_) => {
                    return Err(self.error(
                        Reason::Syntax,
                        "invalid control character in a string".into(),
                    ))
                }
            }
        }
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.pos;
        let b = self.src;
        let mut i = self.pos;
        let negative = b.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let int_start = i;
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(b.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => return Err(self.error(Reason::Syntax, "expected a value".into())),
        }
        let int_end = i;
        let mut is_float = false;
        if b.get(i) == Some(&b'.') && matches!(b.get(i + 1), Some(b'0'..=b'9')) {
            is_float = true;
            i += 1;
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if matches!(b.get(j), Some(b'0'..=b'9')) {
                is_float = true;
                while matches!(b.get(j), Some(b'0'..=b'9')) {
                    j += 1;
                }
                i = j;
            }
        }
        self.pos = i;
        let literal = &self.text[start..i];
        if !is_float {
            let digits = &self.text[int_start..int_end];
            if digits.len() > self.limits.max_int_digits {
                return Err(self.number_error(
                    Reason::IntegerTooLong,
                    format!("JSON integer exceeds {} digits", self.limits.max_int_digits),
                    start,
                ));
            }
            return Ok(Value::Number(Number::Int(Int::from_parts(
                negative, digits,
            ))));
        }
        check_float(literal)
            .map(|f| Value::Number(Number::Float(f)))
            .map_err(|(reason, message)| self.number_error(reason, message, start))
    }
}

/// Applies the original's float rules to a float literal (one with a fraction or exponent)
/// and returns the value (`-0.0` folded to `0.0`).
pub fn check_float(literal: &str) -> Result<f64, (Reason, String)> {
    let v: f64 = literal.parse().map_err(|_| {
        (
            Reason::InvalidNumber,
            format!("invalid JSON number: {literal}"),
        )
    })?;
    if v.is_infinite() {
        return Err((
            Reason::FloatOverflow,
            format!("JSON number overflows finite float range: {literal}"),
        ));
    }
    let lit = decimal_parts(literal).ok_or_else(|| {
        (
            Reason::InvalidNumber,
            format!("invalid JSON number: {literal}"),
        )
    })?;
    if v == 0.0 {
        if lit.digits.is_empty() {
            return Ok(0.0);
        }
        return Err((
            Reason::FloatUnderflow,
            format!("JSON number underflows finite float range: {literal}"),
        ));
    }
    let shortest = crate::canonical::shortest_sci(v);
    let rep = decimal_parts(&shortest).expect("rust float formatting is a decimal");
    if rep != lit {
        return Err((
            Reason::InexactFloat,
            format!("JSON number is not exactly representable: {literal}"),
        ));
    }
    Ok(v)
}

/// A decimal value normalised as sign, significant digits (no leading or trailing zeros) and
/// the power of ten of the last digit. Zero has empty digits and no sign.
#[derive(PartialEq, Eq, Debug)]
struct Decimal {
    negative: bool,
    digits: String,
    exp: i64,
}

fn decimal_parts(text: &str) -> Option<Decimal> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(p) => (&rest[..p], rest[p + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(p) => (&mantissa[..p], &mantissa[p + 1..]),
        None => (mantissa, ""),
    };
    let mut digits: String = format!("{int_part}{frac_part}");
    let mut exp = exp - frac_part.len() as i64;
    let trimmed_trailing = digits.trim_end_matches('0');
    exp += (digits.len() - trimmed_trailing.len()) as i64;
    digits.truncate(trimmed_trailing.len());
    let digits = digits.trim_start_matches('0').to_owned();
    if digits.is_empty() {
        return Some(Decimal {
            negative: false,
            digits,
            exp: 0,
        });
    }
    Some(Decimal {
        negative,
        digits,
        exp,
    })
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
