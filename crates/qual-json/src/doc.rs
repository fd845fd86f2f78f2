//! Reading a document: the one bounded, regular-file-only read of a JSON document.
//!
//! [`read_document`] opens the path through [`crate::file`] (a FIFO or device is refused
//! before any blocking open), reads at most `limits.max_bytes` bytes (checked while reading,
//! so a growing file cannot exhaust memory) and parses them strictly ([`crate::from_slice_with`]).
//! The exact bytes come back with the value: digests are over the bytes.

use crate::{
    escape_path, from_slice_with, read_regular_file, Limits, OpenError, ParseError, Value,
};

/// A document as read: its exact bytes and their strict parse.
#[derive(Clone, Debug)]
pub struct JsonDocument {
    /// The parsed value.
    pub value: Value,
    /// The exact bytes read.
    pub bytes: Vec<u8>,
}

impl JsonDocument {
    /// The document's top-level `schema` string, if it has one.
    pub fn schema(&self) -> Option<&str> {
        self.value.get("schema").and_then(Value::as_str)
    }
}

/// Reads and strictly parses the document at `path` (see the module docs).
pub fn read_document(path: &Path, limits: Limits) -> Result<JsonDocument, LoadError> {
    let (value, bytes) = load_file(path, limits)?;
    Ok(JsonDocument { value, bytes })
}

use std::path::Path;

/// Why a file could not be loaded as strict JSON.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read (missing, not a regular file, permissions…).
    #[error(transparent)]
    Io(#[from] OpenError),
    /// The file is larger than the limit.
    #[error("cannot load {path}: file is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The path as given (control characters escaped).
        path: String,
        /// The byte limit in force.
        limit: usize,
    },
    /// The bytes are not strict JSON.
    #[error("cannot load {path}: {error}")]
    Parse {
        /// The path as given (control characters escaped).
        path: String,
        /// The reader's refusal.
        error: ParseError,
    },
}

/// Reads a file of at most `limits.max_bytes` bytes without reading past the limit, then
/// parses it strictly. Returns the value and the exact bytes (digests are over the bytes).
pub fn load_file(path: &Path, limits: Limits) -> Result<(Value, Vec<u8>), LoadError> {
    let bytes = read_file_limited(path, limits.max_bytes)?;
    let value = from_slice_with(&bytes, limits).map_err(|error| LoadError::Parse {
        path: escape_path(path),
        error,
    })?;
    Ok((value, bytes))
}

/// Reads a regular file (see [`file`]), refusing anything else and files larger than
/// `max_bytes` (checked while reading, so a growing file cannot exhaust memory).
pub fn read_file_limited(path: &Path, max_bytes: usize) -> Result<Vec<u8>, LoadError> {
    read_regular_file(path, max_bytes)?.ok_or_else(|| LoadError::TooLarge {
        path: escape_path(path),
        limit: max_bytes,
    })
}
