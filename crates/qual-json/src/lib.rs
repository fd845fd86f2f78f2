//! Strict JSON for kiln-qual evidence files.
//!
//! This crate owns three things, and nothing else:
//! 1. [`from_slice`]: a strict reader that refuses duplicate keys at any depth, `NaN` and
//!    `Infinity`, integers longer than 4096 digits, floats that overflow, underflow or do not
//!    round-trip exactly, a UTF-8 byte order mark, invalid UTF-8, trailing data, and inputs
//!    beyond explicit depth and size [`Limits`]. Every refusal carries a JSON pointer and a
//!    byte offset ([`ParseError`]).
//! 2. [`to_canonical_string`]: canonical JSON, byte-identical to the original implementation's
//!    `json.dumps(..., ensure_ascii=True, sort_keys=True, separators=(",", ":"))`.
//! 3. `sha256:<hex>` digests of bytes and of canonical values.
//!
//! As the lowest crate every other one depends on, it also owns the three rules for untrusted
//! paths and text: [`file`] (only regular files are opened for reading, never blocking on a
//! FIFO), [`confine`] (writing below a root: no symlink component, never outside it) and
//! [`escape`] (how untrusted text is shown on a terminal), the one spelling of document
//! timestamps ([`timestamp`]) and the one renderer of aligned text tables ([`table`]).
//!
//! Invariant: a [`Value`] that came out of the reader never holds a duplicate key, a
//! non-finite float or `-0.0`, and keeps each number's lexical kind (`1` vs `1.0`).

mod canonical;
pub mod confine;
pub mod escape;
pub mod file;
mod parse;
pub mod show;
pub mod table;
pub mod timestamp;
mod value;

pub use canonical::{
    canonical_digest, is_sha256_digest, python_float_repr, python_str_repr, self_digest,
    sha256_prefixed, to_canonical_string, write_ascii_string,
};
pub use escape::{escape_path, escape_text};
pub use file::{open_regular, read_regular_file, OpenError};
pub use parse::{check_float, from_slice, from_slice_with, from_str, Limits, ParseError, Reason};
pub use value::{Int, Number, Object, Value};

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
