//! Signed campaigns: a DSSE envelope with an in-toto Statement v1 (through `qual-attest`, the
//! one DSSE encoder) about a campaign summary and every receipt it lists.
//!
//! `campaign.<engine>.json.intoto.jsonl`, next to the summary, created exclusively. Subjects:
//! the summary file, then each listed receipt file in the summary's order, each by the
//! SHA-256 of its bytes; predicate type [`PREDICATE_TYPE`]; predicate: the campaign's identity
//! copied from the summary (`campaign_id`, `engine`, `prompt_set_id`, `reference_dir`,
//! `verdict`, and per profile `profile`, `status`, `receipt`, `verdict`).
//!
//! What a verified signature adds to `campaign verify`: the holder of a trusted key vouched for
//! exactly these bytes. Re-hashing after an edit no longer helps (the subject digests are
//! signed), and a profile dropped together with its receipt file is seen (the signed subject
//! list names it). What it does not add: that the numbers were measured honestly, or that the
//! signer ran the campaign; a key vouches, it does not measure.

use crate::records::{self, ProfileStatus, Summary};
use qual_json::{Object, Value};
use std::path::{Path, PathBuf};

/// The predicate type of a campaign attestation.
pub const PREDICATE_TYPE: &str = "https://kiln-qual.dev/serving-campaign/v1";

fn text(s: &str) -> Value {
    Value::from(s)
}

fn enum_value<T: serde::Serialize>(v: &T) -> Value {
    Value::from_serde(&serde_json::to_value(v).expect("enums serialize"))
}

/// The campaign identity a statement carries.
pub fn predicate(s: &Summary) -> Value {
    let mut o = Object::new();
    o.insert("campaign_id", text(&s.campaign_id));
    o.insert("engine", text(&s.engine));
    o.insert("prompt_set_id", text(&s.prompt_set_id));
    o.insert(
        "reference_dir",
        s.reference_dir.as_deref().map(text).unwrap_or(Value::Null),
    );
    o.insert("verdict", enum_value(&s.verdict));
    let profiles = s
        .profiles
        .iter()
        .map(|l| {
            let mut p = Object::new();
            p.insert("profile", text(l.profile.name()));
            p.insert("status", enum_value(&l.status));
            p.insert(
                "receipt",
                l.receipt.as_deref().map(text).unwrap_or(Value::Null),
            );
            p.insert(
                "verdict",
                l.verdict.map(|v| enum_value(&v)).unwrap_or(Value::Null),
            );
            Value::Object(p)
        })
        .collect();
    o.insert("profiles", Value::Array(profiles));
    Value::Object(o)
}

/// Files by name (relative to the summary's directory) with their bytes.
pub type NamedFiles = Vec<(String, Vec<u8>)>;

/// The files a campaign attestation covers, with their bytes: the summary, then every listed
/// receipt (relative names, as the summary lists them).
pub fn covered_files(summary_path: &Path) -> Result<(Summary, NamedFiles), String> {
    let (bytes, _, s): (_, _, Summary) =
        records::read_record(summary_path).map_err(|e| e.to_string())?;
    let name = summary_path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: the file name is not UTF-8", summary_path.display()))?
        .to_owned();
    let dir = summary_path.parent().unwrap_or(Path::new("."));
    let mut files = vec![(name, bytes)];
    for l in &s.profiles {
        if l.status != ProfileStatus::Completed {
            continue;
        }
        let Some(r) = &l.receipt else { continue };
        if r.contains('/') {
            return Err(format!(
                "{}: the summary lists {} outside its directory",
                summary_path.display(),
                qual_json::show::quote(r)
            ));
        }
        let b = qual_json::read_file_limited(&dir.join(r), records::MAX_RECORD_BYTES)
            .map_err(|e| format!("read {}: {e}", dir.join(r).display()))?;
        files.push((r.clone(), b));
    }
    Ok((s, files))
}

/// The statement about the campaign whose summary is at `summary_path`.
pub fn statement(summary_path: &Path) -> Result<Value, String> {
    let (s, files) = covered_files(summary_path)?;
    let subjects = files
        .iter()
        .map(|(n, b)| qual_attest::subject(n, b))
        .collect();
    Ok(qual_attest::statement_about(
        subjects,
        PREDICATE_TYPE,
        predicate(&s),
    ))
}

/// Why a campaign could not be signed or its signature verified.
#[derive(Debug, thiserror::Error)]
pub enum CampaignAttestError {
    /// The campaign's files could not be read.
    #[error("read the campaign: {0}")]
    Campaign(String),
    /// The envelope, key or signature.
    #[error("{0}")]
    Attest(#[from] qual_attest::AttestError),
}

/// Signs the campaign of `summary_path`; returns the envelope written.
pub fn sign(
    summary_path: &Path,
    key: &qual_attest::SigningKey,
) -> Result<PathBuf, CampaignAttestError> {
    let st = statement(summary_path).map_err(CampaignAttestError::Campaign)?;
    Ok(qual_attest::publish(
        &qual_attest::envelope_path(summary_path),
        &st,
        key,
    )?)
}

/// Verifies the campaign attestation next to `summary_path` against the files as they are
/// now and the trusted keys.
pub fn verify(
    summary_path: &Path,
    trusted: &[qual_attest::TrustedKey],
) -> Result<qual_attest::Verified, CampaignAttestError> {
    let opened = qual_attest::open(
        &qual_attest::envelope_path(summary_path),
        PREDICATE_TYPE,
        trusted,
    )?;
    let (s, files) = covered_files(summary_path).map_err(CampaignAttestError::Campaign)?;
    let want: Vec<(String, String)> = files
        .iter()
        .map(|(n, b)| (n.clone(), qual_attest::sha256_hex(b)))
        .collect();
    qual_attest::subjects_match(&opened, &want)?;
    qual_attest::predicate_matches(&opened, &predicate(&s), "the summary's identity")?;
    Ok(opened.verified)
}
