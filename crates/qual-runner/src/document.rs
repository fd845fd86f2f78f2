//! Typed evidence documents to [`qual_json::Value`]: a `serde` serializer whose output is the
//! value model the pretty and canonical writers take.
//!
//! The runner's documents (`environment.json`, `run-config.json`, `case-result.json`, the
//! containment evidence) are `#[derive(Serialize)]` types; [`to_value`] turns one into a
//! [`Value`] without a detour through `serde_json`, so that nothing is lost on the way:
//! - an integer stays an integer and a float stays a float (`1` is `1`, `1.0` is `1.0`); a
//!   non-finite float becomes `null` and `-0.0` becomes `0.0`, exactly as `Value::from(f64)`;
//! - `None` is `null`; a field that is absent in some documents is an `Option` with
//!   `skip_serializing_if`, so absence and `null` stay distinct;
//! - a [`Value`] already held by a document (a model fingerprint, a workload's variables, a
//!   command's metrics) is embedded as it is, arbitrary-precision integers included, through
//!   [`raw`] or [`Raw`];
//! - struct fields and map entries become object members in order (the writers sort keys).
//!
//! What it must never do: change a value's kind or drop a member. A map key that is not a
//! string or an integer is an error, never a silently different document.

use std::fmt;

use qual_json::{Int, Number, Object, Value};
use serde::ser::{self, Impossible, Serialize};

/// The name of the newtype through which [`raw`] hands an integer too large for `i64`/`u64`
/// to [`to_value`] as its decimal text.
const BIG_INT: &str = "$qual_runner::document::BigInt";

/// Why a document could not become a value.
#[derive(Debug, thiserror::Error)]
#[error("cannot build runner document: {0}")]
pub struct DocumentError(String);

impl ser::Error for DocumentError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DocumentError(msg.to_string())
    }
}

/// The value of a serializable document.
pub fn to_value<T: Serialize + ?Sized>(doc: &T) -> Result<Value, DocumentError> {
    doc.serialize(ValueSerializer)
}

/// Embeds a held [`Value`] unchanged (for `#[serde(serialize_with = "raw")]`).
pub fn raw<S: ser::Serializer>(v: &Value, s: S) -> Result<S::Ok, S::Error> {
    use ser::{SerializeMap, SerializeSeq};
    match v {
        Value::Null => s.serialize_unit(),
        Value::Bool(b) => s.serialize_bool(*b),
        Value::Number(Number::Int(i)) => match (i.as_i64(), i.as_u64()) {
            (Some(x), _) => s.serialize_i64(x),
            (None, Some(x)) => s.serialize_u64(x),
            (None, None) => s.serialize_newtype_struct(BIG_INT, &i.to_string()),
        },
        Value::Number(Number::Float(f)) => s.serialize_f64(*f),
        Value::String(t) => s.serialize_str(t),
        Value::Array(items) => {
            let mut seq = s.serialize_seq(Some(items.len()))?;
            for item in items {
                seq.serialize_element(&Raw(item))?;
            }
            seq.end()
        }
        Value::Object(o) => {
            let mut map = s.serialize_map(Some(o.len()))?;
            for (k, item) in o.iter() {
                map.serialize_entry(k, &Raw(item))?;
            }
            map.end()
        }
    }
}

/// A borrowed [`Value`] embedded unchanged in a document.
#[derive(Clone, Copy, Debug)]
pub struct Raw<'a>(pub &'a Value);

impl Serialize for Raw<'_> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        raw(self.0, s)
    }
}

/// The serializer behind [`to_value`].
struct ValueSerializer;

/// An array being built.
struct SeqBuilder {
    items: Vec<Value>,
    /// `Some(variant)` for a tuple variant (`{variant: [...]}`).
    variant: Option<&'static str>,
}

/// An object being built.
struct MapBuilder {
    object: Object,
    next_key: Option<String>,
    /// `Some(variant)` for a struct variant (`{variant: {...}}`).
    variant: Option<&'static str>,
}

fn tagged(variant: Option<&'static str>, v: Value) -> Value {
    match variant {
        None => v,
        Some(name) => {
            let mut o = Object::new();
            o.insert(name, v);
            Value::Object(o)
        }
    }
}

impl ser::Serializer for ValueSerializer {
    type Ok = Value;
    type Error = DocumentError;
    type SerializeSeq = SeqBuilder;
    type SerializeTuple = SeqBuilder;
    type SerializeTupleStruct = SeqBuilder;
    type SerializeTupleVariant = SeqBuilder;
    type SerializeMap = MapBuilder;
    type SerializeStruct = MapBuilder;
    type SerializeStructVariant = MapBuilder;

    fn serialize_bool(self, v: bool) -> Result<Value, DocumentError> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, DocumentError> {
        Ok(Value::from(i64::from(v)))
    }
    fn serialize_i16(self, v: i16) -> Result<Value, DocumentError> {
        Ok(Value::from(i64::from(v)))
    }
    fn serialize_i32(self, v: i32) -> Result<Value, DocumentError> {
        Ok(Value::from(i64::from(v)))
    }
    fn serialize_i64(self, v: i64) -> Result<Value, DocumentError> {
        Ok(Value::from(v))
    }
    fn serialize_i128(self, v: i128) -> Result<Value, DocumentError> {
        let i = Int::from_parts(v < 0, &v.unsigned_abs().to_string());
        Ok(Value::Number(Number::Int(i)))
    }
    fn serialize_u8(self, v: u8) -> Result<Value, DocumentError> {
        Ok(Value::from(u64::from(v)))
    }
    fn serialize_u16(self, v: u16) -> Result<Value, DocumentError> {
        Ok(Value::from(u64::from(v)))
    }
    fn serialize_u32(self, v: u32) -> Result<Value, DocumentError> {
        Ok(Value::from(u64::from(v)))
    }
    fn serialize_u64(self, v: u64) -> Result<Value, DocumentError> {
        Ok(Value::from(v))
    }
    fn serialize_u128(self, v: u128) -> Result<Value, DocumentError> {
        Ok(Value::Number(Number::Int(Int::from_parts(
            false,
            &v.to_string(),
        ))))
    }
    fn serialize_f32(self, v: f32) -> Result<Value, DocumentError> {
        Ok(Value::from(f64::from(v)))
    }
    fn serialize_f64(self, v: f64) -> Result<Value, DocumentError> {
        Ok(Value::from(v))
    }
    fn serialize_char(self, v: char) -> Result<Value, DocumentError> {
        Ok(Value::String(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Value, DocumentError> {
        Ok(Value::from(v))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value, DocumentError> {
        Ok(Value::Array(
            v.iter().map(|b| Value::from(u64::from(*b))).collect(),
        ))
    }
    fn serialize_none(self) -> Result<Value, DocumentError> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Value, DocumentError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, DocumentError> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Value, DocumentError> {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Value, DocumentError> {
        Ok(Value::from(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<Value, DocumentError> {
        let inner = v.serialize(ValueSerializer)?;
        if name != BIG_INT {
            return Ok(inner);
        }
        match inner {
            Value::String(text) => {
                let (negative, digits) = match text.strip_prefix('-') {
                    Some(d) => (true, d),
                    None => (false, text.as_str()),
                };
                Ok(Value::Number(Number::Int(Int::from_parts(
                    negative, digits,
                ))))
            }
            _ => Err(DocumentError("integer text is not a string".into())),
        }
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<Value, DocumentError> {
        Ok(tagged(Some(variant), v.serialize(ValueSerializer)?))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqBuilder, DocumentError> {
        Ok(SeqBuilder {
            items: Vec::with_capacity(len.unwrap_or(0)),
            variant: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqBuilder, DocumentError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SeqBuilder, DocumentError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<SeqBuilder, DocumentError> {
        Ok(SeqBuilder {
            items: Vec::with_capacity(len),
            variant: Some(variant),
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<MapBuilder, DocumentError> {
        Ok(MapBuilder {
            object: Object::new(),
            next_key: None,
            variant: None,
        })
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<MapBuilder, DocumentError> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<MapBuilder, DocumentError> {
        Ok(MapBuilder {
            object: Object::new(),
            next_key: None,
            variant: Some(variant),
        })
    }
}

impl SeqBuilder {
    fn push<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), DocumentError> {
        self.items.push(v.serialize(ValueSerializer)?);
        Ok(())
    }
    fn finish(self) -> Result<Value, DocumentError> {
        Ok(tagged(self.variant, Value::Array(self.items)))
    }
}

impl ser::SerializeSeq for SeqBuilder {
    type Ok = Value;
    type Error = DocumentError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), DocumentError> {
        self.push(v)
    }
    fn end(self) -> Result<Value, DocumentError> {
        self.finish()
    }
}

impl ser::SerializeTuple for SeqBuilder {
    type Ok = Value;
    type Error = DocumentError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), DocumentError> {
        self.push(v)
    }
    fn end(self) -> Result<Value, DocumentError> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for SeqBuilder {
    type Ok = Value;
    type Error = DocumentError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), DocumentError> {
        self.push(v)
    }
    fn end(self) -> Result<Value, DocumentError> {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for SeqBuilder {
    type Ok = Value;
    type Error = DocumentError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), DocumentError> {
        self.push(v)
    }
    fn end(self) -> Result<Value, DocumentError> {
        self.finish()
    }
}

impl MapBuilder {
    fn member<T: Serialize + ?Sized>(&mut self, key: &str, v: &T) -> Result<(), DocumentError> {
        self.object.insert(key, v.serialize(ValueSerializer)?);
        Ok(())
    }
    fn finish(self) -> Result<Value, DocumentError> {
        Ok(tagged(self.variant, Value::Object(self.object)))
    }
}

impl ser::SerializeMap for MapBuilder {
    type Ok = Value;
    type Error = DocumentError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), DocumentError> {
        self.next_key = Some(key.serialize(KeySerializer)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), DocumentError> {
        let key = self
            .next_key
            .take()
            .ok_or_else(|| DocumentError("map value without a key".into()))?;
        self.member(&key, v)
    }
    fn end(self) -> Result<Value, DocumentError> {
        self.finish()
    }
}

impl ser::SerializeStruct for MapBuilder {
    type Ok = Value;
    type Error = DocumentError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), DocumentError> {
        self.member(key, v)
    }
    fn end(self) -> Result<Value, DocumentError> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for MapBuilder {
    type Ok = Value;
    type Error = DocumentError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), DocumentError> {
        self.member(key, v)
    }
    fn end(self) -> Result<Value, DocumentError> {
        self.finish()
    }
}

/// Map keys: strings, and integers as their decimal text (as `serde_json` writes them).
struct KeySerializer;

fn key_error() -> DocumentError {
    DocumentError("a map key must be a string or an integer".into())
}

macro_rules! integer_keys {
    ($($method:ident: $t:ty),*) => {
        $(fn $method(self, v: $t) -> Result<String, DocumentError> {
            Ok(v.to_string())
        })*
    };
}

macro_rules! refused_keys {
    ($($method:ident: $t:ty),*) => {
        $(fn $method(self, _v: $t) -> Result<String, DocumentError> {
            Err(key_error())
        })*
    };
}

impl ser::Serializer for KeySerializer {
    type Ok = String;
    type Error = DocumentError;
    type SerializeSeq = Impossible<String, DocumentError>;
    type SerializeTuple = Impossible<String, DocumentError>;
    type SerializeTupleStruct = Impossible<String, DocumentError>;
    type SerializeTupleVariant = Impossible<String, DocumentError>;
    type SerializeMap = Impossible<String, DocumentError>;
    type SerializeStruct = Impossible<String, DocumentError>;
    type SerializeStructVariant = Impossible<String, DocumentError>;

    integer_keys!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128);
    refused_keys!(serialize_bool: bool, serialize_f32: f32, serialize_f64: f64,
        serialize_bytes: &[u8]);

    fn serialize_char(self, v: char) -> Result<String, DocumentError> {
        Ok(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<String, DocumentError> {
        Ok(v.to_owned())
    }
    fn serialize_none(self) -> Result<String, DocumentError> {
        Err(key_error())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _v: &T) -> Result<String, DocumentError> {
        Err(key_error())
    }
    fn serialize_unit(self) -> Result<String, DocumentError> {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, DocumentError> {
        Err(key_error())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String, DocumentError> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        v: &T,
    ) -> Result<String, DocumentError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _v: &T,
    ) -> Result<String, DocumentError> {
        Err(key_error())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, DocumentError> {
        Err(key_error())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, DocumentError> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, DocumentError> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, DocumentError> {
        Err(key_error())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, DocumentError> {
        Err(key_error())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, DocumentError> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, DocumentError> {
        Err(key_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Serialize)]
    struct Doc<'a> {
        int: u64,
        negative: i64,
        float: f64,
        integral_float: f64,
        nan: f64,
        absent: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<&'a str>,
        #[serde(serialize_with = "raw")]
        held: &'a Value,
    }

    #[test]
    fn kinds_and_held_values_are_kept_exactly() {
        let held =
            qual_json::from_slice(br#"{"big":123456789012345678901234567890,"f":1.0,"i":1}"#)
                .expect("parse");
        let doc = Doc {
            int: 1,
            negative: -3,
            float: 0.25,
            integral_float: 1.0,
            nan: f64::NAN,
            absent: None,
            skipped: None,
            held: &held,
        };
        let v = to_value(&doc).expect("value");
        assert_eq!(
            qual_json::to_canonical_string(&v),
            r#"{"absent":null,"float":0.25,"held":{"big":123456789012345678901234567890,"f":1.0,"i":1},"int":1,"integral_float":1.0,"nan":null,"negative":-3}"#
        );
    }
}
