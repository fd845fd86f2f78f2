//! The JSON value model returned by the strict reader.
//!
//! Invariants:
//! - numbers keep their lexical kind: `1` is [`Number::Int`], `1.0` is [`Number::Float`];
//! - integers are arbitrary precision (kept as canonical decimal text, at most 4096 digits);
//! - floats are always finite and `-0.0` is stored as `+0.0`;
//! - objects keep the document's key order and never hold a duplicate key.

use std::fmt;

/// A JSON integer of arbitrary precision, kept as its canonical decimal text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Int {
    negative: bool,
    /// Decimal digits without sign and without leading zeros (`"0"` for zero).
    digits: String,
}

impl Int {
    /// Builds an integer from a sign and decimal digits (leading zeros are stripped).
    pub fn from_parts(negative: bool, digits: &str) -> Int {
        let trimmed = digits.trim_start_matches('0');
        if trimmed.is_empty() {
            Int {
                negative: false,
                digits: "0".to_owned(),
            }
        } else {
            Int {
                negative,
                digits: trimmed.to_owned(),
            }
        }
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The decimal digits, without sign.
    pub fn digits(&self) -> &str {
        &self.digits
    }

    /// The value as `i64`, when it fits.
    pub fn as_i64(&self) -> Option<i64> {
        self.to_string().parse().ok()
    }

    /// The value as `u64`, when it fits.
    pub fn as_u64(&self) -> Option<u64> {
        if self.negative {
            return None;
        }
        self.digits.parse().ok()
    }

    /// The value as `i128`, when it fits.
    pub fn as_i128(&self) -> Option<i128> {
        self.to_string().parse().ok()
    }

    /// The nearest finite `f64`, or `None` when the integer is outside the float range
    /// (Python's `float(int)` raises `OverflowError` there).
    pub fn as_f64(&self) -> Option<f64> {
        let v: f64 = self.to_string().parse().ok()?;
        v.is_finite().then_some(v)
    }
}

impl fmt::Display for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negative {
            f.write_str("-")?;
        }
        f.write_str(&self.digits)
    }
}

impl fmt::Debug for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<i64> for Int {
    fn from(v: i64) -> Int {
        Int::from_parts(v < 0, &v.unsigned_abs().to_string())
    }
}

impl From<u64> for Int {
    fn from(v: u64) -> Int {
        Int::from_parts(false, &v.to_string())
    }
}

/// A JSON number with its lexical kind preserved.
#[derive(Clone, PartialEq, Debug)]
pub enum Number {
    /// A literal without fraction or exponent.
    Int(Int),
    /// A literal with a fraction or exponent; always finite, never `-0.0`.
    Float(f64),
}

impl Number {
    /// The value as `f64` (integers outside the float range give `None`).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Number::Int(i) => i.as_f64(),
            Number::Float(f) => Some(*f),
        }
    }
}

/// A parsed JSON value.
#[derive(Clone, PartialEq, Debug)]
pub enum Value {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number, integer or float.
    Number(Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, in document key order, without duplicate keys.
    Object(Object),
}

/// A JSON object in document key order.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct Object {
    entries: Vec<(String, Value)>,
}

impl Object {
    /// An empty object.
    pub fn new() -> Object {
        Object::default()
    }

    /// Looks up a key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether the key is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Inserts or replaces a key (replacing keeps the original position).
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.entries.push((key, value));
        }
    }

    /// Removes a key, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let pos = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(pos).1)
    }

    /// Entries in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Keys in document order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the object has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// An object from entries already known to hold no duplicate key (the parser's).
    pub(crate) fn from_unique_entries(entries: Vec<(String, Value)>) -> Object {
        Object { entries }
    }
}

impl FromIterator<(String, Value)> for Object {
    fn from_iter<T: IntoIterator<Item = (String, Value)>>(iter: T) -> Object {
        let mut o = Object::new();
        for (k, v) in iter {
            o.insert(k, v);
        }
        o
    }
}

impl Value {
    /// The value at JSON pointer `pointer` (`/a/0/b`; tokens unescaped as RFC 6901 says), or
    /// `Null` where nothing is there.
    pub fn at_pointer(&self, pointer: &str) -> &Value {
        static NULL: Value = Value::Null;
        let mut cur = self;
        for raw in pointer.split('/').skip(1) {
            let t = raw.replace("~1", "/").replace("~0", "~");
            cur = match cur {
                Value::Object(o) => o.get(&t).unwrap_or(&NULL),
                Value::Array(a) => t
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| a.get(i))
                    .unwrap_or(&NULL),
                _ => &NULL,
            };
        }
        cur
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is an integer literal (never a float or a bool).
    pub fn as_int(&self) -> Option<&Int> {
        match self {
            Value::Number(Number::Int(i)) => Some(i),
            _ => None,
        }
    }

    /// A finite number as `f64` (integer or float; never a bool).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Object member lookup (`None` for non-objects).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|o| o.get(key))
    }

    /// The Python type name of the value (`NoneType`, `bool`, `int`, `float`, `str`, `list`,
    /// `dict`), used where the original compares `(type, canonical JSON)` pairs.
    pub fn python_type_name(&self) -> &'static str {
        match self {
            Value::Null => "NoneType",
            Value::Bool(_) => "bool",
            Value::Number(Number::Int(_)) => "int",
            Value::Number(Number::Float(_)) => "float",
            Value::String(_) => "str",
            Value::Array(_) => "list",
            Value::Object(_) => "dict",
        }
    }

    /// Converts to a `serde_json::Value`. Integers that fit neither `i64` nor `u64` become
    /// `None` (the caller decides how to report that).
    pub fn to_serde(&self) -> Option<serde_json::Value> {
        Some(match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(Number::Int(i)) => {
                if let Some(v) = i.as_i64() {
                    serde_json::Value::from(v)
                } else {
                    serde_json::Value::from(i.as_u64()?)
                }
            }
            Value::Number(Number::Float(f)) => {
                serde_json::Value::Number(serde_json::Number::from_f64(*f)?)
            }
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Array(a) => {
                serde_json::Value::Array(a.iter().map(Value::to_serde).collect::<Option<_>>()?)
            }
            Value::Object(o) => {
                let mut m = serde_json::Map::new();
                for (k, v) in o.iter() {
                    m.insert(k.clone(), v.to_serde()?);
                }
                serde_json::Value::Object(m)
            }
        })
    }

    /// Converts from a `serde_json::Value` (floats that are integral stay floats when serde
    /// says they are floats; non-finite values cannot occur in `serde_json`).
    pub fn from_serde(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Number(Number::Int(Int::from(i)))
                } else if let Some(u) = n.as_u64() {
                    Value::Number(Number::Int(Int::from(u)))
                } else {
                    let f = n.as_f64().unwrap_or(0.0);
                    Value::Number(Number::Float(if f == 0.0 { 0.0 } else { f }))
                }
            }
            serde_json::Value::String(s) => Value::String(s.clone()),
            serde_json::Value::Array(a) => Value::Array(a.iter().map(Value::from_serde).collect()),
            serde_json::Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), Value::from_serde(v)))
                    .collect(),
            ),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Number(Number::Int(Int::from(v)))
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Number(Number::Int(Int::from(v)))
    }
}

impl From<f64> for Value {
    /// Non-finite floats become `null`; `-0.0` becomes `0.0`.
    fn from(v: f64) -> Value {
        if !v.is_finite() {
            Value::Null
        } else {
            Value::Number(Number::Float(if v == 0.0 { 0.0 } else { v }))
        }
    }
}
