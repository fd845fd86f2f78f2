//! Signed oracle results: a DSSE envelope with an in-toto Statement v1 (through
//! `qual-attest`, the one DSSE encoder) about an oracle result file and its input tensors.
//!
//! `<result>.intoto.jsonl`, next to the result, created exclusively. Subjects: the result file
//! by the SHA-256 of its bytes, then every file-backed input of every case (reference, then
//! candidate) by its recorded source and the digest the result records for it; predicate type
//! [`PREDICATE_TYPE`]; predicate: `{result_sha256, schema, status, top_k, cases: [id]}` copied
//! from the result.
//!
//! A verified signature says the holder of a trusted key vouched for these result bytes and
//! these input digests. That the inputs still have those digests, and that the metrics follow
//! from them, is `oracle check --verify-inputs`; that the reference was computed correctly is
//! neither's to say.

use crate::result::{OracleResult, Status};
use crate::tensor::TensorFormat;
use qual_json::{Object, Value};
use std::path::{Path, PathBuf};

/// The predicate type of an oracle-result attestation.
pub const PREDICATE_TYPE: &str = "https://kiln-qual.dev/oracle-result/v1";

/// Why a result could not be signed or its signature verified.
#[derive(Debug, thiserror::Error)]
pub enum OracleAttestError {
    /// The result could not be read.
    #[error("read the oracle result {path}: {reason}")]
    Result {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The envelope, key or signature.
    #[error("{0}")]
    Attest(#[from] qual_attest::AttestError),
}

fn read(path: &Path) -> Result<(String, Vec<u8>, OracleResult), OracleAttestError> {
    let err = |reason: String| OracleAttestError::Result {
        path: qual_json::escape_path(path),
        reason,
    };
    let bytes = qual_json::read_file_limited(path, crate::check::MAX_RESULT_BYTES)
        .map_err(|e| err(e.to_string()))?;
    let doc = qual_json::from_slice(&bytes).map_err(|e| err(e.to_string()))?;
    let r: OracleResult = doc
        .to_serde()
        .ok_or_else(|| err("holds a number JSON tools cannot represent".into()))
        .and_then(|v| serde_json::from_value(v).map_err(|e| err(e.to_string())))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| err("the file name is not UTF-8".into()))?
        .to_owned();
    Ok((name, bytes, r))
}

/// The subjects (name, hex SHA-256): the result file, then each file-backed input.
fn subjects(name: &str, bytes: &[u8], r: &OracleResult) -> Vec<(String, String)> {
    let mut out = vec![(name.to_owned(), qual_attest::sha256_hex(bytes))];
    for c in &r.cases {
        for t in [&c.reference, &c.candidate] {
            if t.format == TensorFormat::Memory {
                continue;
            }
            if let Some(d) = &t.file_sha256 {
                let hex = d.strip_prefix("sha256:").unwrap_or(d);
                out.push((t.source.clone(), hex.to_owned()));
            }
        }
    }
    out
}

/// The result identity a statement carries.
pub fn predicate(r: &OracleResult) -> Value {
    let mut o = Object::new();
    o.insert("result_sha256", Value::from(r.result_sha256.as_str()));
    o.insert("schema", Value::from(r.schema.as_str()));
    o.insert(
        "status",
        Value::from(match r.verdict.status {
            Status::Passed => "passed",
            Status::Compared => "compared",
            Status::Failed => "failed",
        }),
    );
    o.insert("top_k", Value::from_serde(&serde_json::json!(r.top_k)));
    o.insert(
        "cases",
        Value::Array(r.cases.iter().map(|c| Value::from(c.id.as_str())).collect()),
    );
    Value::Object(o)
}

/// Signs the oracle result at `path`; returns the envelope written.
pub fn sign(path: &Path, key: &qual_attest::SigningKey) -> Result<PathBuf, OracleAttestError> {
    let (name, bytes, r) = read(path)?;
    let subjects = subjects(&name, &bytes, &r)
        .iter()
        .map(|(n, d)| qual_attest::subject_digest(n, d))
        .collect();
    let st = qual_attest::statement_about(subjects, PREDICATE_TYPE, predicate(&r));
    Ok(qual_attest::publish(
        &qual_attest::envelope_path(path),
        &st,
        key,
    )?)
}

/// Verifies the attestation next to the oracle result at `path` against its bytes, the input
/// digests it records and the trusted keys.
pub fn verify(
    path: &Path,
    trusted: &[qual_attest::TrustedKey],
) -> Result<qual_attest::Verified, OracleAttestError> {
    let opened = qual_attest::open(&qual_attest::envelope_path(path), PREDICATE_TYPE, trusted)?;
    let (name, bytes, r) = read(path)?;
    qual_attest::subjects_match(&opened, &subjects(&name, &bytes, &r))?;
    qual_attest::predicate_matches(&opened, &predicate(&r), "the result's identity")?;
    Ok(opened.verified)
}
