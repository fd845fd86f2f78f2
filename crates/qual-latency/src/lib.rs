//! qual-latency: Kiln's legacy backend latency fixture pipeline, re-implemented.
//!
//! A legacy latency artifact answers one narrow question: did a named microbenchmark, on its
//! named hardware and source, satisfy its own reviewed threshold? This crate owns every rule of
//! that pipeline and nothing else:
//!
//! - [`manifest`]: the fixture manifest (`schema_version` 1) and its non-strict and strict
//!   (`--require-covered`) validation;
//! - [`digest`]: `fixture_spec_sha256`, the digest that binds a fixture's identity;
//! - [`metric`]: the `KILN_LATENCY_METRIC <metric> <value> <unit>` line grammar;
//! - [`artifact`]: the closed result artifact (schema version 3): building, writing and
//!   validating it against its fixture, source, commit and raw log;
//! - [`run`]: running a fixture command (argv only, own process group, bounded) into a raw log;
//! - [`import`]: importing a CI artifact bundle (directory or zip);
//! - [`lock`]: locking reviewed thresholds with explicit headroom;
//! - [`plan`]: the manual-workflow dispatch plan, with an optional runner query.
//!
//! Messages are the original implementation's texts (lowercase, Python-style quoting), so
//! verdicts and reasons line up with artifacts and manifests produced by the original.
//! Every function takes the repository root explicitly ([`git::Repo`]); nothing here reads the
//! current directory except [`git::Repo::discover`].

#![forbid(unsafe_code)]

pub mod artifact;
pub mod digest;
pub mod git;
pub mod import;
pub mod jsonout;
pub mod lock;
pub mod manifest;
pub mod metric;
pub mod msg;
pub mod paths;
pub mod plan;
pub mod run;
pub mod timestamp;

/// Why a legacy latency operation refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LegacyError {
    /// A refusal; the message is the original implementation's text (validations that
    /// collect every problem return them as data instead, e.g.
    /// [`manifest::CheckOutcome::Failed`]).
    #[error("{0}")]
    Refused(String),
}

impl LegacyError {
    /// Shorthand for [`LegacyError::Refused`].
    pub fn refused(msg: impl Into<String>) -> LegacyError {
        LegacyError::Refused(msg.into())
    }
}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, LegacyError>;

/// Backends a fixture may name.
pub const VALID_BACKENDS: [&str; 4] = ["cuda", "rocm", "metal", "vulkan"];

/// SHA-256 of bytes as 64 lowercase hex digits (the legacy pipeline's digests carry no prefix).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// SHA-256 of a regular file's bytes, streamed (a FIFO or device is refused, never read).
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    let h = qual_json::sha256_file(path, None)?;
    Ok(h.sha256["sha256:".len()..].to_string())
}

/// Whether a string is 64 lowercase hex digits (`CHECKSUM_RE`).
pub fn is_checksum(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether a string is 40 lowercase hex digits (`GIT_COMMIT_RE`).
pub fn is_git_commit(s: &str) -> bool {
    qual_git::is_commit_id(s)
}
