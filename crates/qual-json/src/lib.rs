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
//! Invariant: a [`Value`] that came out of the reader never holds a duplicate key, a
//! non-finite float or `-0.0`, and keeps each number's lexical kind (`1` vs `1.0`).

mod canonical;
mod parse;
mod value;

pub use canonical::{
    canonical_digest, is_sha256_digest, python_float_repr, python_str_repr, sha256_prefixed,
    to_canonical_string, write_ascii_string,
};
pub use parse::{check_float, from_slice, from_slice_with, from_str, Limits, ParseError, Reason};
pub use value::{Int, Number, Object, Value};

use std::io::Read;
use std::path::Path;

/// Why a file could not be loaded as strict JSON.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read (missing, a directory, permissions…).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than the limit.
    #[error("cannot load {path}: file is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The path as given.
        path: String,
        /// The byte limit in force.
        limit: usize,
    },
    /// The bytes are not strict JSON.
    #[error("cannot load {path}: {error}")]
    Parse {
        /// The path as given.
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
        path: path.display().to_string(),
        error,
    })?;
    Ok((value, bytes))
}

/// Reads a regular file, refusing directories and files larger than `max_bytes` (checked
/// while reading, so a growing file cannot exhaust memory).
pub fn read_file_limited(path: &Path, max_bytes: usize) -> Result<Vec<u8>, LoadError> {
    let shown = path.display().to_string();
    let io = |source| LoadError::Io {
        path: shown.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(io(std::io::Error::other("is a directory")));
    }
    let mut bytes = Vec::with_capacity((meta.len() as usize).min(max_bytes) + 1);
    file.take(max_bytes as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() > max_bytes {
        return Err(LoadError::TooLarge {
            path: shown,
            limit: max_bytes,
        });
    }
    Ok(bytes)
}
