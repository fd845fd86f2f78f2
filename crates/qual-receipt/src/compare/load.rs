//! Loading what a comparison reads: a receipt (strict JSON, validated, identified by the
//! SHA-256 of its exact bytes), the workload manifest (under `qualification/workloads/`, equal
//! to its committed bytes at HEAD, valid), and binding each receipt to the manifest (workload
//! id, bytes, seed, parameters, variant, backend, kind). Every refusal is a [`CompareError`].

use super::*;
use qual_json::violation::Dotted;
use std::path::{Path, PathBuf};

/// Repository-relative directory a workload manifest must live in.
pub const WORKLOAD_DIRECTORY: &str = "qualification/workloads";

/// Why two receipts could not be compared at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.text())]
pub struct CompareError {
    /// What was refused and why (reads after "comparison failed: ").
    pub message: String,
    /// One line each where the refusal lists violations (a document that failed
    /// validation): kept apart from `message` so that a terminal shows each escaped on a line
    /// of its own, and a newline inside one (an untrusted path) stays escaped.
    pub details: Vec<String>,
}

impl CompareError {
    /// The message and its details as one text, each detail on a line `  - …`.
    pub fn text(&self) -> String {
        let mut out = self.message.clone();
        for d in &self.details {
            out.push_str("\n  - ");
            out.push_str(d);
        }
        out
    }
}

pub(super) fn refuse(message: impl Into<String>) -> CompareError {
    CompareError {
        message: message.into(),
        details: Vec::new(),
    }
}

/// A receipt that loaded and passed basic validation.
#[derive(Clone, Debug)]
pub struct LoadedReceipt {
    /// The path as given.
    pub path: PathBuf,
    /// The strictly parsed document.
    pub value: Value,
    /// `sha256:` of the exact file bytes.
    pub sha256: String,
}

impl LoadedReceipt {
    /// Builds a loaded receipt from bytes (strict JSON, object, basic validation).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<LoadedReceipt, CompareError> {
        let value = qual_json::from_slice(bytes)
            .map_err(|e| refuse(format!("cannot load receipt {}: {e}", path.display())))?;
        if value.as_object().is_none() {
            return Err(refuse(format!(
                "receipt {} must be a JSON object",
                path.display()
            )));
        }
        let violations = validate::validate(&value);
        if !violations.is_empty() {
            return Err(CompareError {
                message: format!("receipt {} failed validation:", path.display()),
                details: violations.iter().map(|v| Dotted(v).to_string()).collect(),
            });
        }
        Ok(LoadedReceipt {
            path: path.to_path_buf(),
            value,
            sha256: qual_json::sha256_prefixed(bytes),
        })
    }

    /// Reads and loads a receipt file.
    pub fn load(path: &Path) -> Result<LoadedReceipt, CompareError> {
        let bytes = qual_json::read_file_limited(path, 64 * 1024 * 1024)
            .map_err(|e| refuse(format!("cannot read receipt {}: {e}", path.display())))?;
        LoadedReceipt::from_bytes(path, &bytes)
    }
}

/// A workload manifest that is committed at HEAD, byte for byte, and valid.
#[derive(Clone, Debug)]
pub struct LoadedManifest {
    pub(super) root: PathBuf,
    pub(super) relative: PathBuf,
    pub(super) value: Value,
    pub(super) sha256: String,
}

impl LoadedManifest {
    /// The manifest path relative to the repository root.
    pub fn relative_path(&self) -> &Path {
        &self.relative
    }
    /// `sha256:` of the manifest bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
    /// The strictly parsed manifest.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

pub(super) fn committed_bytes(root: &Path, relative: &Path) -> Result<Vec<u8>, CompareError> {
    let rel = relative.to_string_lossy().replace('\\', "/");
    match qual_git::Repo::new(root).show_head(&rel) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(refuse(format!(
            "workload manifest must be committed at HEAD: {rel}"
        ))),
        Err(e) => Err(refuse(format!(
            "workload manifest must be committed at HEAD: {rel} (failed to read it: {e})"
        ))),
    }
}

/// Loads a workload manifest that must resolve under `<root>/qualification/workloads/`, end in
/// `.json`, equal its committed HEAD bytes exactly and pass workload validation.
pub fn load_committed_manifest(path: &Path, root: &Path) -> Result<LoadedManifest, CompareError> {
    let root = root
        .canonicalize()
        .map_err(|e| refuse(format!("cannot resolve root {}: {e}", root.display())))?;
    let workloads = root.join(WORKLOAD_DIRECTORY);
    let outside = || {
        refuse(format!(
            "workload manifest must resolve under {}",
            workloads.display()
        ))
    };
    let resolved = path.canonicalize().map_err(|_| outside())?;
    let relative = resolved
        .strip_prefix(&root)
        .map_err(|_| outside())?
        .to_path_buf();
    if !relative.starts_with(WORKLOAD_DIRECTORY) {
        return Err(outside());
    }
    if resolved.extension().and_then(|e| e.to_str()) != Some("json") {
        return Err(refuse("workload manifest must be a JSON file"));
    }
    let limit = 8 * 1024 * 1024;
    let bytes = qual_json::read_file_limited(&resolved, limit).map_err(|e| {
        refuse(format!(
            "cannot read workload manifest {}: {e}",
            resolved.display()
        ))
    })?;
    if bytes != committed_bytes(&root, &relative)? {
        return Err(refuse(format!(
            "workload manifest must exactly match its committed HEAD version: {}",
            relative.display()
        )));
    }
    let value = qual_json::from_slice(&bytes).map_err(|e| {
        refuse(format!(
            "cannot load workload manifest {}: {e}",
            relative.display()
        ))
    })?;
    if value.as_object().is_none() {
        return Err(refuse(format!(
            "workload manifest {} must be a JSON object",
            relative.display()
        )));
    }
    let violations = qual_contract::validate_workload(&value);
    if !violations.is_empty() {
        return Err(CompareError {
            message: format!(
                "workload manifest {} failed validation:",
                relative.display()
            ),
            details: violations.iter().map(|v| v.message.clone()).collect(),
        });
    }
    let reread = qual_json::read_file_limited(&resolved, limit).ok();
    if reread.as_deref() != Some(&bytes[..]) {
        return Err(refuse(format!(
            "workload manifest changed while it was being loaded: {}",
            relative.display()
        )));
    }
    Ok(LoadedManifest {
        root,
        relative,
        sha256: qual_json::sha256_prefixed(&bytes),
        value,
    })
}

pub(super) fn verify_committed(manifest: &LoadedManifest) -> Result<(), CompareError> {
    let current = load_committed_manifest(&manifest.root.join(&manifest.relative), &manifest.root)?;
    if current.sha256 != manifest.sha256 || canon(&current.value) != canon(&manifest.value) {
        return Err(refuse(
            "comparison policy must come from the exact committed workload",
        ));
    }
    Ok(())
}

pub(super) fn variant<'a>(manifest: &'a Value, id: &str) -> Option<&'a Value> {
    arr(at(manifest, "variants"))
        .iter()
        .find(|v| at(v, "id").as_str() == Some(id))
}

/// Binds both receipts to the manifest; returns the selected variant ids.
pub(super) fn bind(
    baseline: &LoadedReceipt,
    candidate: &LoadedReceipt,
    manifest: &LoadedManifest,
) -> Result<(String, String), CompareError> {
    let m = &manifest.value;
    let mut selected = Vec::with_capacity(2);
    for (label, receipt) in [("baseline", baseline), ("candidate", candidate)] {
        let workload = at(&receipt.value, "workload");
        if workload.as_object().is_none() {
            return Err(refuse(format!(
                "{label} receipt must name a workload manifest"
            )));
        }
        if !json_eq(at(workload, "id"), at(m, "workload_id")) {
            return Err(refuse(format!(
                "{label} receipt workload id {} does not match committed manifest {}",
                s(at(workload, "id")),
                s(at(m, "workload_id"))
            )));
        }
        if at(workload, "sha256").as_str() != Some(manifest.sha256.as_str()) {
            return Err(refuse(format!(
                "{label} receipt workload sha256 does not match exact committed manifest bytes \
                 ({} != {})",
                s(at(workload, "sha256")),
                manifest.sha256
            )));
        }
        if !json_eq(at(workload, "seed"), at2(m, "determinism", "seed")) {
            return Err(refuse(format!(
                "{label} receipt seed does not match workload manifest ({} != {})",
                canon(at(workload, "seed")),
                canon(at2(m, "determinism", "seed"))
            )));
        }
        let errors = qual_contract::validate_workload_parameters(m, at(workload, "parameters"));
        if !errors.is_empty() {
            return Err(CompareError {
                message: format!("{label} receipt parameters do not match committed workload:"),
                details: errors.iter().map(|e| e.message.clone()).collect(),
            });
        }
        let variant_id = at2(workload, "parameters", "variant_id").as_str();
        let Some((variant_id, declared)) =
            variant_id.and_then(|id| variant(m, id).map(|v| (id, v)))
        else {
            return Err(refuse(format!(
                "{label} receipt workload.parameters.variant_id must name a declared variant"
            )));
        };
        let backend = at2(&receipt.value, "qualification", "backend");
        if !json_eq(backend, at(declared, "backend")) {
            return Err(refuse(format!(
                "{label} receipt backend {} does not match variant {} backend {}",
                repr(&s(backend)),
                repr(variant_id),
                repr(&s(at(declared, "backend")))
            )));
        }
        let kind = at2(&receipt.value, "qualification", "kind");
        if !json_eq(kind, at(m, "kind")) {
            return Err(refuse(format!(
                "{label} receipt kind {} does not match workload kind {}",
                repr(&s(kind)),
                repr(&s(at(m, "kind")))
            )));
        }
        selected.push(variant_id.to_owned());
    }
    let candidate_variant = selected.pop().unwrap_or_default();
    let baseline_variant = selected.pop().unwrap_or_default();
    Ok((baseline_variant, candidate_variant))
}
