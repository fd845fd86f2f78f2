//! The workload v1 contract of kiln-qual (Kiln v1 compatible).
//!
//! - [`validate_workload`] reports every semantic violation of a strict-parsed document, each
//!   with a JSON pointer and the original implementation's message text;
//! - [`load_workload`] reads a file strictly, validates it, and returns the typed [`Workload`]
//!   together with the exact bytes and their `sha256:` digest (a workload's identity is the
//!   digest of its bytes, never of a re-serialisation);
//! - [`variables`] resolves `--var NAME=VALUE` into typed, constrained parameters;
//! - [`model`] holds the typed contract and generates the JSON Schema.

pub mod assertions;
pub mod constants;
pub mod model;
pub mod pattern;
mod validate;
pub mod variables;

pub use constants::placeholder_name;
pub use model::*;
pub use validate::{
    validate_workload, validate_workload_parameters, variant_references, Violation,
};

use std::path::Path;

/// Largest workload file accepted (real ones are below 100 KiB).
pub const MAX_WORKLOAD_BYTES: usize = 8 * 1024 * 1024;

/// Strict-JSON limits for workload files.
pub fn workload_limits() -> qual_json::Limits {
    qual_json::Limits {
        max_bytes: MAX_WORKLOAD_BYTES,
        max_depth: 64,
        max_int_digits: 4096,
    }
}

/// A workload that loaded and validated.
#[derive(Clone, Debug)]
pub struct LoadedWorkload {
    /// The strict-parsed document.
    pub value: qual_json::Value,
    /// The exact file bytes.
    pub bytes: Vec<u8>,
    /// `sha256:` of the bytes.
    pub sha256: String,
    /// The typed contract.
    pub workload: Workload,
}

/// Why a workload could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Unreadable, too large, or not strict JSON.
    #[error("{0}")]
    Load(#[from] qual_json::LoadError),
    /// The root is not an object.
    #[error("{path}: workload must be a JSON object")]
    NotObject {
        /// The path as given.
        path: String,
    },
    /// Semantic violations (all of them).
    #[error("invalid workload:{}", .violations.iter().map(|v| format!("\n  - {}", v.message)).collect::<String>())]
    Invalid {
        /// Every violation.
        violations: Vec<Violation>,
    },
    /// Valid by the contract but holds a value outside what the runner can represent
    /// (e.g. a seed beyond 2^64, or the original's `schema_version: 1.0` leniency).
    #[error("workload is valid but not representable for execution: {0}")]
    Unrepresentable(String),
}

/// Parses bytes strictly and validates them (no typed conversion).
pub fn check_bytes(bytes: &[u8]) -> Result<qual_json::Value, Vec<Violation>> {
    let value = qual_json::from_slice_with(bytes, workload_limits()).map_err(|e| {
        vec![Violation {
            pointer: e.pointer.clone(),
            message: e.to_string(),
        }]
    })?;
    if value.as_object().is_none() {
        return Err(vec![Violation {
            pointer: String::new(),
            message: "workload must be a JSON object".into(),
        }]);
    }
    let violations = validate_workload(&value);
    if violations.is_empty() {
        Ok(value)
    } else {
        Err(violations)
    }
}

/// Loads, validates and types a workload file.
pub fn load_workload(path: &Path) -> Result<LoadedWorkload, LoadError> {
    let (value, bytes) = qual_json::load_file(path, workload_limits())?;
    if value.as_object().is_none() {
        return Err(LoadError::NotObject {
            path: path.display().to_string(),
        });
    }
    let violations = validate_workload(&value);
    if !violations.is_empty() {
        return Err(LoadError::Invalid { violations });
    }
    let workload = typed(&value)?;
    Ok(LoadedWorkload {
        sha256: qual_json::sha256_prefixed(&bytes),
        value,
        bytes,
        workload,
    })
}

/// Converts a validated document into the typed contract.
pub fn typed(value: &qual_json::Value) -> Result<Workload, LoadError> {
    let serde = value.to_serde().ok_or_else(|| {
        LoadError::Unrepresentable("an integer is outside the 64-bit range".into())
    })?;
    serde_json::from_value(serde).map_err(|e| LoadError::Unrepresentable(e.to_string()))
}
