//! Collecting a fleet: every target's evidence brought into one evidence tree
//! (`<evidence>/targets/<target>/`), then verified.
//!
//! **Import** reads each source — a directory holding `<target>/` (the Slurm inbox, a
//! directory of `gh run download`), or an artifact zip, extracted with the latency importer's
//! bounded extractor (`qual_latency::import::extract_zip`: no `..`, no absolute names, no
//! symlinks, bounded members and bytes) — and copies a target's files into the tree only
//! when they fit the closed layout: `<target>.json` (the receipt), `<target>.json.intoto.jsonl`
//! (its attestation), `kiln-qual.log`, and `runs/<receipt id>/…` (regular files, bounded depth,
//! count and bytes). Copies are exclusive: a file already in the tree with the same bytes is
//! left as it is (so re-collecting is idempotent), with other bytes the target is refused.
//!
//! **Verification** of each planned target, refusing by name — never dropping — what is
//! missing, unsigned, signed by another key than its host's, from another commit or host, or
//! edited: the receipt's own rules (`qual_receipt::validate`), the publication gate against the
//! plan's upstream branch, `receipt verify` against its run directory
//! (`qual_receipt::verify::verify_run`), and the attestation against the planned host's key
//! (`qual_attest::verify`).

use crate::plan::{Plan, Target};
use qual_json::Value;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where collected evidence lies, relative to the evidence directory.
pub const TARGETS: &str = "targets";
/// Most files one target may bring.
const MAX_FILES: usize = 20_000;
/// Most bytes one target may bring.
const MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// Largest single evidence file.
const MAX_FILE_BYTES: usize = 256 * 1024 * 1024;
/// Deepest nesting below `runs/`.
const MAX_DEPTH: usize = 8;

/// What kind of refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// No receipt arrived.
    Missing,
    /// The receipt has no attestation.
    Unsigned,
    /// The attestation is not signed by the planned host's key.
    WrongKey,
    /// The receipt (or its run directory) was changed after the run or the signature.
    Edited,
    /// The receipt is from another commit than the plan's.
    WrongCommit,
    /// The receipt is from another host than planned.
    WrongHost,
    /// The receipt is of another workload variant than planned.
    WrongWorkload,
    /// The receipt breaks its own rules.
    Invalid,
    /// The publication gate refused it.
    Publication,
    /// The evidence does not fit the closed layout or would replace other bytes.
    Layout,
}

impl RefusalKind {
    /// The kind's name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalKind::Missing => "missing",
            RefusalKind::Unsigned => "unsigned",
            RefusalKind::WrongKey => "wrong_key",
            RefusalKind::Edited => "edited",
            RefusalKind::WrongCommit => "wrong_commit",
            RefusalKind::WrongHost => "wrong_host",
            RefusalKind::WrongWorkload => "wrong_workload",
            RefusalKind::Invalid => "invalid",
            RefusalKind::Publication => "publication",
            RefusalKind::Layout => "layout",
        }
    }
}

/// One reason a target is refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The kind.
    pub kind: RefusalKind,
    /// What exactly.
    pub message: String,
}

/// What became of one planned target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Every check passed: the receipt is admitted with its verdict.
    Verified {
        /// The receipt's verdict (`passed` / `failed`).
        verdict: String,
        /// The key that signed (`SHA256:…`).
        keyid: String,
        /// The receipt in the evidence tree.
        receipt: String,
    },
    /// Refused, with every reason.
    Refused {
        /// The reasons.
        reasons: Vec<Refusal>,
    },
}

/// One planned target and its outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TargetReport {
    /// The target id.
    pub target: String,
    /// The planned host.
    pub host_id: String,
    /// The planned workload.
    pub workload: String,
    /// The planned variant.
    pub variant: String,
    /// What became of it.
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl TargetReport {
    /// Whether it was refused.
    pub fn is_refused(&self) -> bool {
        matches!(self.outcome, Outcome::Refused { .. })
    }
}

/// The collection of a whole fleet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Collection {
    /// The fleet id.
    pub fleet_id: String,
    /// The planned commit.
    pub commit: String,
    /// Every planned target, in plan order.
    pub targets: Vec<TargetReport>,
    /// Files copied into the tree by this collection (0 when re-collecting).
    pub imported_files: usize,
}

impl Collection {
    /// Whether every planned target was verified.
    pub fn all_verified(&self) -> bool {
        self.targets.iter().all(|t| !t.is_refused())
    }
}

/// Why collection could not start. Messages read after "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// A source is neither a directory nor a zip.
    #[error("read the source {0}: not a directory or a .zip file")]
    Source(String),
    /// A zip could not be extracted.
    #[error("extract {path}: {reason}")]
    Extract {
        /// The zip.
        path: String,
        /// Why.
        reason: String,
    },
    /// The evidence tree could not be written.
    #[error("write {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn refusal(kind: RefusalKind, message: impl Into<String>) -> Refusal {
    Refusal {
        kind,
        message: message.into(),
    }
}

/// Imports from `sources` into `<evidence>/targets/`, then verifies every planned target
/// against the repository at `root` (which must have the plan's commit).
pub fn collect(
    plan: &Plan,
    root: &Path,
    evidence: &Path,
    sources: &[PathBuf],
) -> Result<Collection, CollectError> {
    let tree = evidence.join(TARGETS);
    std::fs::create_dir_all(&tree).map_err(|source| CollectError::Io {
        path: tree.display().to_string(),
        source,
    })?;
    let mut layout: Vec<(String, Refusal)> = Vec::new();
    let mut imported = 0usize;
    let mut extracted = Vec::new();
    for src in sources {
        let dir = if src.is_dir() {
            src.clone()
        } else if src.extension().is_some_and(|e| e == "zip") && src.is_file() {
            // An artifact zip holds one target's files at its top (`<artifact>.zip`, as
            // GitHub's API serves it), or `<target>/` directories.
            let stem = src.file_stem().map(|s| s.to_string_lossy().into_owned());
            let target = plan
                .targets
                .iter()
                .find(|t| stem.as_deref() == Some(crate::gha::artifact_name(plan, t).as_str()));
            let tmp = extract(src, evidence, target.map(|t| t.id.as_str()))?;
            let dir = tmp.clone();
            extracted.push(tmp);
            dir
        } else {
            return Err(CollectError::Source(src.display().to_string()));
        };
        for t in &plan.targets {
            let from = target_dir_in(&dir, plan, t);
            let Some(from) = from else { continue };
            match import_target(&from, &tree.join(&t.id), &t.id) {
                Ok(n) => imported += n,
                Err(r) => layout.push((t.id.clone(), r)),
            }
        }
    }
    for d in extracted {
        let _ = std::fs::remove_dir_all(d);
    }
    let targets = plan
        .targets
        .iter()
        .map(|t| {
            let mut reasons: Vec<Refusal> = layout
                .iter()
                .filter(|(id, _)| id == &t.id)
                .map(|(_, r)| r.clone())
                .collect();
            let outcome = verify_target(plan, t, root, &tree.join(&t.id));
            let outcome = match outcome {
                Outcome::Refused { reasons: more } => {
                    reasons.extend(more);
                    Outcome::Refused { reasons }
                }
                ok if reasons.is_empty() => ok,
                _ => Outcome::Refused { reasons },
            };
            TargetReport {
                target: t.id.clone(),
                host_id: t.host_id.clone(),
                workload: t.workload.clone(),
                variant: t.variant.clone(),
                outcome,
            }
        })
        .collect();
    Ok(Collection {
        fleet_id: plan.fleet_id.clone(),
        commit: plan.commit.clone(),
        targets,
        imported_files: imported,
    })
}

/// Where target `t` lies in a source directory: `<dir>/<target>/`, or the artifact directory
/// `gh run download` makes (`<dir>/<artifact name>/<target>/` or `<dir>/<artifact name>/`).
fn target_dir_in(dir: &Path, plan: &Plan, t: &Target) -> Option<PathBuf> {
    let artifact = dir.join(crate::gha::artifact_name(plan, t));
    [dir.join(&t.id), artifact.join(&t.id), artifact.clone()]
        .into_iter()
        .find(|p| {
            p.is_dir()
                && !p.is_symlink()
                && (p != &artifact || p.join(format!("{}.json", t.id)).exists())
        })
}

/// Extracts a zip below `<evidence>/.extract-<pid>/` (into `<target>/` when the zip is one
/// target's artifact); returns the extraction root, which the caller removes.
fn extract(zip: &Path, evidence: &Path, target: Option<&str>) -> Result<PathBuf, CollectError> {
    let root = evidence.join(format!(".extract-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dest = match target {
        Some(id) => root.join(id),
        None => root.clone(),
    };
    std::fs::create_dir_all(&dest).map_err(|source| CollectError::Io {
        path: dest.display().to_string(),
        source,
    })?;
    let limits = qual_latency::import::ImportLimits {
        entries: MAX_FILES,
        bytes: MAX_BYTES,
    };
    qual_latency::import::extract_zip(zip, &dest, &limits, &|_| qual_latency::import::Take::Whole)
        .map_err(|e| {
            let _ = std::fs::remove_dir_all(&root);
            CollectError::Extract {
                path: zip.display().to_string(),
                reason: e.to_string(),
            }
        })?;
    Ok(root)
}

/// The files of one target's evidence, relative, checked against the closed layout.
fn layout_files(from: &Path, id: &str) -> Result<Vec<String>, String> {
    let top_files = [
        format!("{id}.json"),
        format!("{id}.json{}", qual_attest::ENVELOPE_SUFFIX),
        "kiln-qual.log".to_owned(),
    ];
    let mut files = Vec::new();
    let mut unexpected = Vec::new();
    let entries =
        std::fs::read_dir(from).map_err(|e| format!("cannot list {}: {e}", from.display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e.file_type().map_err(|e| e.to_string())?;
        if ft.is_file() && top_files.contains(&name) {
            files.push(name);
        } else if ft.is_dir() && name == "runs" {
            walk(&e.path(), "runs", 0, &mut files, &mut unexpected)?;
        } else {
            unexpected.push(name);
        }
    }
    if !unexpected.is_empty() {
        unexpected.sort();
        return Err(format!(
            "does not fit the evidence layout ({id}.json, its .intoto.jsonl, kiln-qual.log, runs/): {}",
            unexpected.join(", ")
        ));
    }
    if files.len() > MAX_FILES {
        return Err(format!("brings more than {MAX_FILES} files"));
    }
    files.sort();
    Ok(files)
}

fn walk(
    dir: &Path,
    rel: &str,
    depth: usize,
    files: &mut Vec<String>,
    unexpected: &mut Vec<String>,
) -> Result<(), String> {
    if depth > MAX_DEPTH || files.len() > MAX_FILES {
        return Err(format!(
            "{rel} is nested deeper than {MAX_DEPTH} or too large"
        ));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {rel}: {e}"))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = format!("{rel}/{name}");
        match e.file_type() {
            Ok(ft) if ft.is_file() => files.push(path),
            Ok(ft) if ft.is_dir() => walk(&e.path(), &path, depth + 1, files, unexpected)?,
            _ => unexpected.push(path),
        }
    }
    Ok(())
}

/// Copies one target's evidence into the tree (exclusive; identical bytes are left as they
/// are). Returns how many files were new.
fn import_target(from: &Path, to: &Path, id: &str) -> Result<usize, Refusal> {
    let layout = |m: String| refusal(RefusalKind::Layout, m);
    let files = layout_files(from, id).map_err(layout)?;
    let mut total = 0u64;
    let mut new = 0;
    for rel in files {
        let src = from.join(&rel);
        let dst = to.join(&rel);
        if dst.exists() {
            match qual_latency::import::same_bytes(&src, &dst) {
                Ok(true) => continue,
                Ok(false) => {
                    return Err(layout(format!(
                        "{rel} is already collected with other bytes (nothing is replaced)"
                    )))
                }
                Err(e) => return Err(layout(format!("cannot compare {rel}: {e}"))),
            }
        }
        let bytes = qual_json::file::read_regular_bytes(&src, MAX_FILE_BYTES)
            .map_err(|e| layout(format!("cannot read {rel}: {e}")))?;
        total += bytes.len() as u64;
        if total > MAX_BYTES {
            return Err(layout(format!("brings more than {MAX_BYTES} bytes")));
        }
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| layout(format!("cannot create the directory of {rel}: {e}")))?;
        }
        qual_json::publish::write_new(&dst, &bytes)
            .map_err(|e| layout(format!("cannot write {rel}: {e}")))?;
        new += 1;
    }
    Ok(new)
}

/// Verifies one target's collected evidence (see the module docs).
pub fn verify_target(plan: &Plan, t: &Target, root: &Path, dir: &Path) -> Outcome {
    let refused = |r: Vec<Refusal>| Outcome::Refused { reasons: r };
    let receipt_path = dir.join(format!("{}.json", t.id));
    if !receipt_path.exists() {
        return refused(vec![refusal(
            RefusalKind::Missing,
            format!("no receipt arrived ({} is absent)", receipt_path.display()),
        )]);
    }
    let (value, bytes) = match qual_receipt::validate::load(&receipt_path) {
        Ok(x) => x,
        Err(e) => {
            return refused(vec![refusal(
                RefusalKind::Invalid,
                format!("the receipt cannot be loaded: {e}"),
            )])
        }
    };
    let mut reasons = identity(plan, t, root, &value);
    reasons.extend(receipt_rules(plan, root, &value));
    // The run directory is named by the receipt id, read only when the id is well formed
    // (an invalid id is already a reason).
    if let Some(run_dir) = run_dir(dir, &value) {
        for f in qual_receipt::verify::verify_run(&value, root, Some(&run_dir)) {
            reasons.push(refusal(RefusalKind::Edited, f.to_string()));
        }
    }
    let keyid = attestation(plan, t, &receipt_path, &bytes, &mut reasons);
    if !reasons.is_empty() {
        return refused(reasons);
    }
    Outcome::Verified {
        verdict: value
            .at_pointer("/qualification/verdict")
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        keyid: keyid.unwrap_or_default(),
        receipt: receipt_path.display().to_string(),
    }
}

/// Host id, commit, workload and variant as planned.
fn identity(plan: &Plan, t: &Target, root: &Path, v: &Value) -> Vec<Refusal> {
    let mut out = Vec::new();
    let s = |p: &str| v.at_pointer(p).as_str().unwrap_or_default().to_owned();
    for (kind, pointer, what, want) in [
        (
            RefusalKind::WrongCommit,
            "/source/git_commit",
            "commit",
            &plan.commit,
        ),
        (
            RefusalKind::WrongHost,
            "/environment/host_id",
            "host",
            &t.host_id,
        ),
        (
            RefusalKind::WrongWorkload,
            "/workload/parameters/variant_id",
            "variant",
            &t.variant,
        ),
    ] {
        let got = s(pointer);
        if got != *want {
            out.push(refusal(
                kind,
                format!("the receipt's {what} is {got:?}, the plan's is {want:?}"),
            ));
        }
    }
    let digest = s("/workload/sha256");
    match planned_workload_digest(root, plan, t) {
        Ok(want) if want == digest => {}
        Ok(want) => out.push(refusal(
            RefusalKind::WrongWorkload,
            format!(
                "the receipt's workload is {digest}, the plan's {} at {} is {want}",
                t.workload, plan.commit
            ),
        )),
        Err(e) => out.push(refusal(RefusalKind::WrongWorkload, e)),
    }
    out
}

/// `sha256:<hex>` of the planned workload's bytes at the plan's commit.
fn planned_workload_digest(root: &Path, plan: &Plan, t: &Target) -> Result<String, String> {
    match qual_git::Repo::new(root).blob_at(&plan.commit, &t.workload) {
        Ok(Some(bytes)) => Ok(format!("sha256:{}", qual_attest::sha256_hex(&bytes))),
        Ok(None) => Err(format!(
            "the plan's workload {} is not committed at {}",
            t.workload, plan.commit
        )),
        Err(e) => Err(format!("cannot read the plan's workload from git: {e}")),
    }
}

/// The receipt's own rules, and the publication gate against the plan's upstream branch.
fn receipt_rules(plan: &Plan, root: &Path, v: &Value) -> Vec<Refusal> {
    let strict = qual_receipt::validate::StrictChecks {
        root: Some(root),
        publication: Some(&plan.upstream),
        ..Default::default()
    };
    qual_receipt::validate::validate_strict(v, &strict)
        .into_iter()
        .map(|x| {
            let text = qual_receipt::validate::Dotted(&x).to_string();
            let kind = if text.contains("for publication") {
                RefusalKind::Publication
            } else {
                RefusalKind::Invalid
            };
            refusal(kind, text)
        })
        .collect()
}

/// The run directory of a collected receipt, `runs/<receipt id>/`, when the id is well formed.
fn run_dir(dir: &Path, v: &Value) -> Option<PathBuf> {
    let id = v.at_pointer("/receipt_id").as_str()?;
    qual_receipt::validate::is_receipt_id(id).then(|| dir.join("runs").join(id))
}

/// The attestation against the planned host's key; the signer's key id when it verifies.
fn attestation(
    plan: &Plan,
    t: &Target,
    receipt: &Path,
    bytes: &[u8],
    reasons: &mut Vec<Refusal>,
) -> Option<String> {
    let envelope = qual_attest::envelope_path(receipt);
    if !envelope.exists() {
        reasons.push(refusal(
            RefusalKind::Unsigned,
            format!(
                "the receipt has no attestation ({} is absent)",
                envelope.display()
            ),
        ));
        return None;
    }
    let host = plan.host(&t.host_id)?;
    let key = match qual_attest::parse_public_key(&host.public_key) {
        Ok(k) => k,
        Err(e) => {
            reasons.push(refusal(
                RefusalKind::WrongKey,
                format!("the plan's key is unusable: {e}"),
            ));
            return None;
        }
    };
    let name = receipt
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match qual_attest::verify(&envelope, &name, bytes, std::slice::from_ref(&key)) {
        Ok(v) => Some(v.keyid),
        Err(e @ qual_attest::AttestError::Signature(_)) => {
            let other = plan
                .hosts
                .iter()
                .filter(|h| h.host_id != t.host_id)
                .find(|h| {
                    qual_attest::parse_public_key(&h.public_key).is_ok_and(|k| {
                        qual_attest::verify(&envelope, &name, bytes, std::slice::from_ref(&k))
                            .is_ok()
                    })
                })
                .map(|h| format!(" (it is signed by host {:?}'s key)", h.host_id))
                .unwrap_or_default();
            reasons.push(refusal(
                RefusalKind::WrongKey,
                format!(
                    "not signed by host {:?}'s key {}: failed to {e}{other}",
                    t.host_id, key.keyid
                ),
            ));
            None
        }
        Err(e @ qual_attest::AttestError::Mismatch(_)) => {
            reasons.push(refusal(
                RefusalKind::Edited,
                format!("the receipt changed after it was signed: failed to {e}"),
            ));
            None
        }
        Err(e) => {
            reasons.push(refusal(RefusalKind::Unsigned, format!("failed to {e}")));
            None
        }
    }
}
