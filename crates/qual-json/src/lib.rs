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
//! It is also the document layer every document kind shares, so that a new kind is a type
//! plus its rules: [`doc`] (the one bounded, regular-file-only read of a document),
//! [`keys`] (the closed-object check and its phrasings), [`violation`] (the one violation
//! type and its collector), [`hash`] (streaming `sha256:` of a file), [`publish`] (exclusive
//! creation: create-new, or temporary file + fsync + hard link) and [`pretty`] (the pretty
//! writer beside the canonical one). Which document a file holds is decided above, in
//! `qual-documents`.
//!
//! As the lowest crate every other one depends on, it also owns the three rules for untrusted
//! paths and text: [`file`] (only regular files are opened for reading, never blocking on a
//! FIFO), [`confine`] (writing below a root: no symlink component, never outside it) and
//! [`escape`] (how untrusted text is shown on a terminal), the one spelling of document
//! timestamps ([`timestamp`]) and the one renderer of aligned text tables ([`table`]).
//!
//! Invariant: a [`Value`] that came out of the reader never holds a duplicate key, a
//! non-finite float or `-0.0`, and keeps each number's lexical kind (`1` vs `1.0`).

#![forbid(unsafe_code)]

mod canonical;
pub mod confine;
pub mod doc;
pub mod escape;
pub mod file;
pub mod hash;
pub mod keys;
mod parse;
pub mod pretty;
pub mod publish;
pub mod show;
pub mod table;
pub mod timestamp;
mod value;
pub mod violation;

pub use canonical::{
    canonical_digest, is_sha256_digest, python_float_repr, python_str_repr, self_digest,
    sha256_prefixed, to_canonical_string, write_ascii_string,
};
pub use doc::{load_file, read_document, read_file_limited, JsonDocument, LoadError};
pub use escape::{escape_path, escape_text};
pub use file::{open_regular, read_regular_file, OpenError};
pub use hash::{sha256_file, sha256_reader, FileHash, HashError, Sha256Stream};
pub use keys::{ClosedKeys, KeyDiff, KeyList, Order, Phrasing};
pub use parse::{check_float, from_slice, from_slice_with, from_str, Limits, ParseError, Reason};
pub use pretty::to_pretty_json;
pub use publish::{publish_exclusive, PublishError, PublishOptions};
pub use value::{Int, Number, Object, Value};
pub use violation::{Violation, Violations};
