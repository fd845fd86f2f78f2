//! Signed receipt attestations: a DSSE envelope holding an in-toto Statement v1 about one
//! receipt file, signed with an Ed25519 key in OpenSSH format.
//!
//! Format (what [`sign`] writes and [`verify`] accepts):
//!
//! - the envelope (DSSE v1) is one line of JSON followed by a newline:
//!   `{"payload": <base64>, "payloadType": "application/vnd.in-toto+json",
//!   "signatures": [{"keyid": "SHA256:<fingerprint>", "sig": <base64>}]}`, standard base64 with
//!   padding. Each signature is Ed25519 over the DSSE pre-authentication encoding
//!   `"DSSEv1" SP len(type) SP type SP len(payload) SP payload` ([`pae`]);
//! - the payload is an in-toto Statement v1 ([`STATEMENT_TYPE`]) whose one subject is the
//!   receipt: `{"name": <receipt file name>, "digest": {"sha256": <hex of its bytes>}}`;
//! - the predicate type is [`PREDICATE_TYPE`]; the predicate is the receipt's identity
//!   ([`predicate`]): receipt id, kind, verdict, backend, host, device, workload id, digest and
//!   variant, source commit, tree hash and its format;
//! - the key id is the key's SHA-256 fingerprint exactly as `ssh-keygen -l` prints it
//!   (`SHA256:` + unpadded base64).
//!
//! The envelope lives next to the receipt as `<receipt file name>.intoto.jsonl`
//! ([`envelope_path`]) and is created exclusively: an existing envelope is never replaced.
//!
//! Verification ([`verify`]) reads the envelope strictly (unknown or duplicate keys refused),
//! requires at least one signature by a trusted key to verify, the subject digest to equal the
//! receipt's bytes, and the predicate to equal the identity recomputed from the receipt.
//! The same envelope carries other statements ([`statement_about`], [`publish`], [`open`]):
//! `qual-campaign` signs a campaign summary together with every receipt it lists, and
//! `qual-oracle` an oracle result with its input tensors, each with its own predicate type;
//! [`open`] checks the envelope and the signature, the caller what the statement must say.
//! No cryptography is implemented here: keys are parsed by `ssh-key`, signatures made and
//! checked by `ed25519-dalek`.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signer, Verifier};
use qual_json::{Object, Value};
use sha2::{Digest, Sha256};

/// DSSE payload type of an in-toto Statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of a receipt identity.
pub const PREDICATE_TYPE: &str = "https://kiln-qual.dev/receipt-identity/v1";
/// Suffix appended to the receipt's file name.
pub const ENVELOPE_SUFFIX: &str = ".intoto.jsonl";
/// Largest key, trusted-keys or envelope file read.
const MAX_FILE_BYTES: usize = 1024 * 1024;

/// Why an attestation could not be made or verified. Messages read after "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    /// A file could not be read.
    #[error("read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The signing key is unusable.
    #[error("load the signing key {path}: {reason}")]
    Key {
        /// The key file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A trusted-keys line is unusable.
    #[error("load the trusted keys {path}: line {line}: {reason}")]
    TrustedKey {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// Why.
        reason: String,
    },
    /// The envelope could not be written.
    #[error("write the attestation {path}: {reason}")]
    Write {
        /// The envelope path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The envelope is malformed.
    #[error("read the attestation: {0}")]
    Envelope(String),
    /// No signature verifies with a trusted key.
    #[error("verify the attestation signature: {0}")]
    Signature(String),
    /// The statement does not describe this receipt.
    #[error("match the attestation to the receipt: {0}")]
    Mismatch(String),
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, AttestError> {
    read_limited(path, MAX_FILE_BYTES)
}

fn read_limited(path: &Path, limit: usize) -> Result<Vec<u8>, AttestError> {
    qual_json::read_file_limited(path, limit).map_err(|e| AttestError::Read {
        path: path.display().to_string(),
        reason: match e {
            qual_json::LoadError::Io(e) => e.to_string(),
            qual_json::LoadError::TooLarge { limit, .. } => {
                format!("the file is larger than {limit} bytes")
            }
            other => other.to_string(),
        },
    })
}

/// DSSE v1 pre-authentication encoding.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// An Ed25519 signing key loaded from an OpenSSH private key file.
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
    keyid: String,
}

impl SigningKey {
    /// Loads an unencrypted OpenSSH Ed25519 private key (`ssh-keygen -t ed25519 -N ''`).
    pub fn from_openssh_file(path: &Path) -> Result<SigningKey, AttestError> {
        let bad = |reason: String| AttestError::Key {
            path: path.display().to_string(),
            reason,
        };
        let bytes = read_bounded(path)?;
        let key = ssh_key::PrivateKey::from_openssh(&bytes)
            .map_err(|e| bad(format!("not an OpenSSH private key: {e}")))?;
        if key.is_encrypted() {
            return Err(bad(
                "the key is passphrase-protected; use a key without a passphrase (ssh-keygen -N '')"
                    .into(),
            ));
        }
        let Some(pair) = key.key_data().ed25519() else {
            return Err(bad(format!(
                "the key is {}, not ssh-ed25519",
                key.algorithm()
            )));
        };
        let signing = ed25519_dalek::SigningKey::from_bytes(&pair.private.to_bytes());
        if signing.verifying_key().to_bytes() != pair.public.0 {
            return Err(bad("the public half does not match the private key".into()));
        }
        Ok(SigningKey {
            keyid: key
                .public_key()
                .fingerprint(ssh_key::HashAlg::Sha256)
                .to_string(),
            key: signing,
        })
    }

    /// `SHA256:<fingerprint>`, as `ssh-keygen -l` prints it.
    pub fn keyid(&self) -> &str {
        &self.keyid
    }
}

/// A trusted Ed25519 public key.
#[derive(Clone, Debug)]
pub struct TrustedKey {
    /// `SHA256:<fingerprint>`.
    pub keyid: String,
    /// The comment of its line, if any.
    pub comment: String,
    key: ed25519_dalek::VerifyingKey,
}

/// Parses one OpenSSH public key line (`ssh-ed25519 AAAA… comment`); any other key type or an
/// unparsable line is refused, the reason reading after "failed to load the key: ".
pub fn parse_public_key(line: &str) -> Result<TrustedKey, String> {
    let key = ssh_key::PublicKey::from_openssh(line.trim())
        .map_err(|e| format!("not an OpenSSH public key line: {e}"))?;
    let Some(ed) = key.key_data().ed25519() else {
        return Err(format!("the key is {}, not ssh-ed25519", key.algorithm()));
    };
    let verifying = ed25519_dalek::VerifyingKey::from_bytes(&ed.0)
        .map_err(|e| format!("not a valid Ed25519 public key: {e}"))?;
    Ok(TrustedKey {
        keyid: key.fingerprint(ssh_key::HashAlg::Sha256).to_string(),
        comment: key.comment().to_owned(),
        key: verifying,
    })
}

/// Loads an allowed-keys file: one OpenSSH public key per line (`ssh-ed25519 AAAA… comment`,
/// as in a `.pub` file); blank lines and lines starting with `#` are ignored. Any other key
/// type, an unparsable line, a repeated key or an empty file is refused.
pub fn load_trusted_keys(path: &Path) -> Result<Vec<TrustedKey>, AttestError> {
    let bytes = read_bounded(path)?;
    let shown = path.display().to_string();
    let text = std::str::from_utf8(&bytes).map_err(|e| AttestError::TrustedKey {
        path: shown.clone(),
        line: 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count(),
        reason: "the line is not UTF-8".into(),
    })?;
    let mut keys: Vec<TrustedKey> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bad = |reason: String| AttestError::TrustedKey {
            path: shown.clone(),
            line: n + 1,
            reason,
        };
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = parse_public_key(line).map_err(bad)?;
        if keys.iter().any(|k| k.keyid == key.keyid) {
            return Err(bad(format!("the key {} is listed twice", key.keyid)));
        }
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(AttestError::TrustedKey {
            path: shown,
            line: 0,
            reason: "the file lists no key".into(),
        });
    }
    Ok(keys)
}

/// `<receipt>.intoto.jsonl` next to the receipt.
pub fn envelope_path(receipt: &Path) -> PathBuf {
    let mut name = receipt.file_name().unwrap_or_default().to_os_string();
    name.push(ENVELOPE_SUFFIX);
    receipt.with_file_name(name)
}

fn get(v: &Value, pointer: &str) -> Value {
    let mut cur = v;
    for t in pointer.split('/').skip(1) {
        match cur.get(t) {
            Some(x) => cur = x,
            None => return Value::Null,
        }
    }
    cur.clone()
}

/// The receipt identity the statement carries (predicate [`PREDICATE_TYPE`]):
/// `{backend, device, host_id, kind, receipt_id, source: {git_commit, tree_hash,
/// tree_hash_format}, verdict, workload: {id, sha256, variant_id} | null}`, every value copied
/// from the receipt (`device` is `environment.device` whole).
pub fn predicate(receipt: &Value) -> Value {
    let mut o = Object::new();
    o.insert("receipt_id", get(receipt, "/receipt_id"));
    o.insert("kind", get(receipt, "/qualification/kind"));
    o.insert("verdict", get(receipt, "/qualification/verdict"));
    o.insert("backend", get(receipt, "/qualification/backend"));
    o.insert("host_id", get(receipt, "/environment/host_id"));
    o.insert("device", get(receipt, "/environment/device"));
    let mut source = Object::new();
    for k in ["git_commit", "tree_hash", "tree_hash_format"] {
        source.insert(k, get(receipt, &format!("/source/{k}")));
    }
    o.insert("source", Value::Object(source));
    let workload = if get(receipt, "/workload").is_null() {
        Value::Null
    } else {
        let mut w = Object::new();
        w.insert("id", get(receipt, "/workload/id"));
        w.insert("sha256", get(receipt, "/workload/sha256"));
        w.insert(
            "variant_id",
            get(receipt, "/workload/parameters/variant_id"),
        );
        Value::Object(w)
    };
    o.insert("workload", workload);
    Value::Object(o)
}

/// One in-toto subject: a file name and the SHA-256 of its bytes.
pub fn subject(name: &str, bytes: &[u8]) -> Value {
    subject_digest(name, &sha256_hex(bytes))
}

/// An in-toto Statement v1 about `subjects` with the given predicate.
pub fn statement_about(subjects: Vec<Value>, predicate_type: &str, predicate: Value) -> Value {
    let mut s = Object::new();
    s.insert("_type", Value::from(STATEMENT_TYPE));
    s.insert("subject", Value::Array(subjects));
    s.insert("predicateType", Value::from(predicate_type));
    s.insert("predicate", predicate);
    Value::Object(s)
}

/// The in-toto Statement about one receipt file.
pub fn statement(file_name: &str, receipt_bytes: &[u8], receipt: &Value) -> Value {
    statement_about(
        vec![subject(file_name, receipt_bytes)],
        PREDICATE_TYPE,
        predicate(receipt),
    )
}

/// The envelope text (one JSON line and a newline) signing `statement` with `key`.
pub fn envelope(statement: &Value, key: &SigningKey) -> String {
    let payload = qual_json::to_canonical_string(statement).into_bytes();
    let sig = key.key.sign(&pae(PAYLOAD_TYPE, &payload));
    let mut s = Object::new();
    s.insert("keyid", Value::from(key.keyid.as_str()));
    s.insert("sig", Value::from(STANDARD.encode(sig.to_bytes())));
    let mut e = Object::new();
    e.insert("payload", Value::from(STANDARD.encode(&payload)));
    e.insert("payloadType", Value::from(PAYLOAD_TYPE));
    e.insert("signatures", Value::Array(vec![Value::Object(s)]));
    let mut text = qual_json::to_canonical_string(&Value::Object(e));
    text.push('\n');
    text
}

/// Signs the receipt file at `receipt_path` and creates its envelope exclusively next to it;
/// returns the envelope path.
pub fn sign(receipt_path: &Path, key: &SigningKey) -> Result<PathBuf, AttestError> {
    let bytes = read_limited(receipt_path, 64 * 1024 * 1024)?;
    let value = qual_json::from_slice(&bytes).map_err(|e| AttestError::Read {
        path: receipt_path.display().to_string(),
        reason: format!("not strict JSON: {e}"),
    })?;
    let name = receipt_path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| AttestError::Read {
            path: receipt_path.display().to_string(),
            reason: "the file name is not UTF-8".into(),
        })?;
    publish(
        &envelope_path(receipt_path),
        &statement(name, &bytes, &value),
        key,
    )
}

/// Signs `statement` with `key` and creates the envelope at `out` exclusively (an existing
/// attestation is never replaced); returns `out`.
pub fn publish(out: &Path, statement: &Value, key: &SigningKey) -> Result<PathBuf, AttestError> {
    let text = envelope(statement, key);
    let write_err = |reason: String| AttestError::Write {
        path: out.display().to_string(),
        reason,
    };
    qual_json::publish::write_new(out, text.as_bytes()).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => {
            write_err("it already exists (an attestation is never replaced)".into())
        }
        _ => write_err(e.to_string()),
    })?;
    Ok(out.to_path_buf())
}

/// What a verified attestation established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The trusted key that signed.
    pub keyid: String,
    /// Its comment in the trusted-keys file.
    pub comment: String,
}

/// The attestation's phrasing of a closed object: unknown keys first, then missing ones (in
/// declared order); only the first finding is reported.
const PHRASING: qual_json::Phrasing = qual_json::Phrasing {
    missing: "lacks keys: {}",
    unknown: "has unknown keys: {}",
    list: qual_json::KeyList::Plain,
    unknown_first: true,
};

fn exact_object<'v>(v: &'v Value, keys: &[&str], what: &str) -> Result<&'v Object, AttestError> {
    let o = v
        .as_object()
        .ok_or_else(|| AttestError::Envelope(format!("{what} must be a JSON object")))?;
    let diff = qual_json::ClosedKeys::new(keys)
        .missing_order(qual_json::Order::Declared)
        .check(o);
    match diff.messages(&PHRASING).into_iter().next() {
        Some(m) => Err(AttestError::Envelope(format!("{what} {m}"))),
        None => Ok(o),
    }
}

fn string<'v>(o: &'v Object, key: &str, what: &str) -> Result<&'v str, AttestError> {
    o.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| AttestError::Envelope(format!("{what}.{key} must be a string")))
}

fn base64(text: &str, what: &str) -> Result<Vec<u8>, AttestError> {
    STANDARD
        .decode(text)
        .map_err(|e| AttestError::Envelope(format!("{what} is not standard base64: {e}")))
}

/// An envelope whose signature verified with a trusted key, and what its statement says.
#[derive(Clone, Debug)]
pub struct Opened {
    /// Who signed.
    pub verified: Verified,
    /// The subjects in order: file name and hex SHA-256.
    pub subjects: Vec<(String, String)>,
    /// The predicate.
    pub predicate: Value,
}

/// Reads the envelope at `envelope_path` strictly, requires a signature by a trusted key over
/// its payload, and an in-toto Statement v1 of `predicate_type` with at least one well-formed
/// subject. What the statement must say about which files is the caller's to check
/// ([`subjects_match`], [`predicate_matches`]).
pub fn open(
    envelope_path: &Path,
    predicate_type: &str,
    trusted: &[TrustedKey],
) -> Result<Opened, AttestError> {
    let bytes = read_bounded(envelope_path)?;
    let limits = qual_json::Limits {
        max_bytes: MAX_FILE_BYTES,
        max_depth: 32,
        max_int_digits: 64,
    };
    let value = qual_json::from_slice_with(&bytes, limits)
        .map_err(|e| AttestError::Envelope(format!("not strict JSON: {e}")))?;
    let e = exact_object(
        &value,
        &["payload", "payloadType", "signatures"],
        "the envelope",
    )?;
    let payload_type = string(e, "payloadType", "the envelope")?;
    if payload_type != PAYLOAD_TYPE {
        return Err(AttestError::Envelope(format!(
            "the envelope's payloadType is {payload_type:?}, expected {PAYLOAD_TYPE:?}"
        )));
    }
    let payload = base64(
        string(e, "payload", "the envelope")?,
        "the envelope's payload",
    )?;
    let signatures = e
        .get("signatures")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            AttestError::Envelope("the envelope's signatures must be a non-empty array".into())
        })?;
    let verified = signed_by(signatures, &pae(payload_type, &payload), trusted)?;
    let statement = qual_json::from_slice_with(&payload, limits)
        .map_err(|e| AttestError::Envelope(format!("the payload is not strict JSON: {e}")))?;
    let st = exact_object(
        &statement,
        &["_type", "subject", "predicateType", "predicate"],
        "the statement",
    )?;
    for (key, want) in [("_type", STATEMENT_TYPE), ("predicateType", predicate_type)] {
        let got = string(st, key, "the statement")?;
        if got != want {
            return Err(AttestError::Envelope(format!(
                "the statement's {key} is {got:?}, expected {want:?}"
            )));
        }
    }
    let listed = st
        .get("subject")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| AttestError::Envelope("the statement must have a subject".into()))?;
    let mut subjects = Vec::new();
    for s in listed {
        let subject = exact_object(s, &["name", "digest"], "the statement's subject")?;
        let name = string(subject, "name", "the statement's subject")?;
        let digest = exact_object(
            subject.get("digest").unwrap_or(&Value::Null),
            &["sha256"],
            "the subject's digest",
        )?;
        let sha = string(digest, "sha256", "the subject's digest")?;
        subjects.push((name.to_owned(), sha.to_owned()));
    }
    Ok(Opened {
        verified,
        subjects,
        predicate: st.get("predicate").cloned().unwrap_or(Value::Null),
    })
}

/// The first signature by a trusted key that verifies over `message`.
fn signed_by(
    signatures: &[Value],
    message: &[u8],
    trusted: &[TrustedKey],
) -> Result<Verified, AttestError> {
    let mut seen = Vec::new();
    for (i, s) in signatures.iter().enumerate() {
        let what = format!("the envelope's signatures[{i}]");
        let s = exact_object(s, &["keyid", "sig"], &what)?;
        let keyid = string(s, "keyid", &what)?;
        let sig = base64(string(s, "sig", &what)?, &format!("{what}.sig"))?;
        seen.push(keyid.to_owned());
        let Some(key) = trusted.iter().find(|k| k.keyid == keyid) else {
            continue;
        };
        let Ok(sig) = ed25519_dalek::Signature::from_slice(&sig) else {
            continue;
        };
        if key.key.verify(message, &sig).is_ok() {
            // Later signatures are still read, so a malformed one is refused wherever it is.
            for (j, rest) in signatures.iter().enumerate().skip(i + 1) {
                let what = format!("the envelope's signatures[{j}]");
                let r = exact_object(rest, &["keyid", "sig"], &what)?;
                string(r, "keyid", &what)?;
                base64(string(r, "sig", &what)?, &format!("{what}.sig"))?;
            }
            return Ok(Verified {
                keyid: key.keyid.clone(),
                comment: key.comment.clone(),
            });
        }
    }
    Err(AttestError::Signature(format!(
        "no signature verifies with a trusted key (the envelope names {})",
        seen.join(", ")
    )))
}

/// The hex SHA-256 of `bytes`, as a subject's digest spells it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The subjects must be exactly `want` (name and hex SHA-256), in order.
pub fn subjects_match(opened: &Opened, want: &[(String, String)]) -> Result<(), AttestError> {
    let got_names: Vec<&str> = opened.subjects.iter().map(|(n, _)| n.as_str()).collect();
    let want_names: Vec<&str> = want.iter().map(|(n, _)| n.as_str()).collect();
    if got_names != want_names {
        return Err(AttestError::Mismatch(format!(
            "the subjects are {}, the files are {}",
            qual_json::show::list(&got_names),
            qual_json::show::list(&want_names)
        )));
    }
    for ((name, got), (_, want)) in opened.subjects.iter().zip(want) {
        if got != want {
            return Err(AttestError::Mismatch(format!(
                "the subject {name:?} has sha256 {got}, the file's bytes hash to {want}"
            )));
        }
    }
    Ok(())
}

/// One subject named `name` with the hex SHA-256 `sha256_hex` (a file bound by a digest
/// recorded elsewhere).
pub fn subject_digest(name: &str, sha256_hex: &str) -> Value {
    let mut digest = Object::new();
    digest.insert("sha256", Value::from(sha256_hex));
    let mut subject = Object::new();
    subject.insert("name", Value::from(name));
    subject.insert("digest", Value::Object(digest));
    Value::Object(subject)
}

/// The signed predicate must equal `expected` (canonical JSON); the error names the keys that
/// differ.
pub fn predicate_matches(opened: &Opened, expected: &Value, what: &str) -> Result<(), AttestError> {
    let got = &opened.predicate;
    if qual_json::to_canonical_string(got) == qual_json::to_canonical_string(expected) {
        return Ok(());
    }
    let mut keys: Vec<String> = Vec::new();
    if let (Some(a), Some(b)) = (got.as_object(), expected.as_object()) {
        for k in a.keys().chain(b.keys()) {
            let differs = a.get(k).map(qual_json::to_canonical_string)
                != b.get(k).map(qual_json::to_canonical_string);
            if differs && !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    Err(AttestError::Mismatch(format!(
        "the predicate differs from {what} in: {}",
        if keys.is_empty() {
            "its shape".to_owned()
        } else {
            keys.join(", ")
        }
    )))
}

/// Verifies the envelope at `envelope_path` against the receipt bytes, its file name and the
/// trusted keys.
pub fn verify(
    envelope_path: &Path,
    receipt_name: &str,
    receipt_bytes: &[u8],
    trusted: &[TrustedKey],
) -> Result<Verified, AttestError> {
    let opened = open(envelope_path, PREDICATE_TYPE, trusted)?;
    let [(name, got)] = opened.subjects.as_slice() else {
        return Err(AttestError::Envelope(
            "the statement must have exactly one subject".into(),
        ));
    };
    if name != receipt_name {
        return Err(AttestError::Mismatch(format!(
            "the subject is {name:?}, the receipt file is {receipt_name:?}"
        )));
    }
    let want = hex::encode(Sha256::digest(receipt_bytes));
    if *got != want {
        return Err(AttestError::Mismatch(format!(
            "the subject's sha256 is {got}, the receipt's bytes hash to {want}"
        )));
    }
    let receipt = qual_json::from_slice(receipt_bytes)
        .map_err(|e| AttestError::Mismatch(format!("the receipt is not strict JSON: {e}")))?;
    predicate_matches(&opened, &predicate(&receipt), "the receipt's identity")?;
    Ok(opened.verified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_matches_the_dsse_specification_example() {
        // From the DSSE protocol document.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn envelope_path_appends_the_suffix() {
        assert_eq!(
            envelope_path(Path::new("a/b/r.json")),
            PathBuf::from("a/b/r.json.intoto.jsonl")
        );
    }
}
