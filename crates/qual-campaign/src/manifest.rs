//! Runtime manifests (`kiln-qual runtime-manifest`): a portable description of a Python
//! reference runtime, bound by content.
//!
//! Captured: the interpreter (path, resolved path, digest, implementation, version), its
//! site directories and module path, every installed distribution (`*.dist-info`: name,
//! version, the digest of its `RECORD`, and every file `RECORD` lists hashed and compared with
//! the hash `RECORD` gives: the count that agrees, each disagreement by path, and the digests
//! of files listed without a hash — [`crate::installed`]), the start-up files on the module
//! path that no distribution owns (`*.pth`, `sitecustomize`, `usercustomize`), and the
//! inference-affecting environment variables of the launch. So the manifest binds installed
//! bytes, not only names and versions: an edited module shows as a mismatch, an added
//! `.pth` or `sitecustomize.py` as an unowned file, and either changes the content hash. A
//! capture is taken twice and the two must be byte-identical; `runtime_content_sha256` is the
//! canonical hash of the manifest without that key. The interpreter is asked for its facts
//! through `qual-exec` (isolated mode `-I`, `-B` so it writes no compiled file, a minimal
//! environment; the probe's answer is its last line of output, so a `sitecustomize` that
//! prints does not break it). Not covered: the standard library's own files (bound only
//! through the interpreter's version), zip archives on `sys.path`, and the user site
//! directory (the probe runs isolated, as `-I` disables it).

use crate::identity::digest_file;
use crate::installed::{self, InstalledFile, RecordMismatch, UnownedFile, DIST_INFO_FILE_LIMIT};
use crate::records::{FileDigest, ManifestBinding};
use qual_json::file::{read_regular_bytes, read_regular_string};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Manifest schema.
pub const SCHEMA: &str = "kiln-qual.runtime-manifest.v2";

/// Environment variables that can change what an inference runtime computes.
pub const INFERENCE_ENV_PREFIXES: [&str; 12] = [
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "KMP_",
    "TORCH",
    "PYTORCH_",
    "CUDA_",
    "HF_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "PYTHONHASHSEED",
    "GGML_",
];

/// The interpreter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interpreter {
    /// The file.
    pub file: FileDigest,
    /// `sys.implementation.name`.
    pub implementation: String,
    /// `platform.python_version()`.
    pub version: String,
    /// `sys.prefix`.
    pub prefix: String,
}

/// One installed distribution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distribution {
    /// `Name:` from METADATA.
    pub name: String,
    /// `Version:` from METADATA.
    pub version: String,
    /// `sha256:` of the RECORD file.
    pub record_sha256: String,
    /// Files listed in RECORD.
    pub record_files: u64,
    /// Files whose bytes match the hash RECORD gives for them.
    pub verified_files: u64,
    /// Files RECORD lists without a `sha256` (RECORD itself excepted), hashed here.
    pub unhashed_files: Vec<InstalledFile>,
    /// Files whose bytes disagree with RECORD (or that are missing or unreadable).
    pub record_mismatches: Vec<RecordMismatch>,
}

/// A runtime manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`SCHEMA`].
    pub schema: String,
    /// Interpreter.
    pub interpreter: Interpreter,
    /// Site directories scanned for distributions and `*.pth` files.
    pub site_directories: Vec<String>,
    /// The interpreter's `sys.path` directories, scanned for `sitecustomize` / `usercustomize`.
    pub module_path: Vec<String>,
    /// Distributions sorted by name.
    pub distributions: Vec<Distribution>,
    /// Start-up files on the module path that no distribution's RECORD lists.
    pub unowned_files: Vec<UnownedFile>,
    /// Inference-affecting environment of the launch.
    pub environment: BTreeMap<String, String>,
    /// Canonical hash of the manifest without this key.
    pub runtime_content_sha256: String,
}

impl Manifest {
    /// One line per thing a reader must know about these installed bytes: each file that
    /// disagrees with its distribution's RECORD, and each start-up file no distribution owns.
    pub fn findings(&self) -> Vec<String> {
        let mut v = Vec::new();
        for d in &self.distributions {
            for m in &d.record_mismatches {
                let what = match &m.found {
                    installed::Found::Differs { sha256, .. } => {
                        format!("differs from its RECORD (now {sha256})")
                    }
                    installed::Found::Missing => "is listed in its RECORD but missing".into(),
                    installed::Found::Unreadable { error } => {
                        format!("cannot be hashed ({error})")
                    }
                };
                v.push(format!("{} {}: {} {what}", d.name, d.version, m.path));
            }
        }
        for u in &self.unowned_files {
            let kind = match u.kind {
                installed::UnownedKind::Pth => "a .pth file",
                installed::UnownedKind::Sitecustomize => "a sitecustomize module",
                installed::UnownedKind::Usercustomize => "a usercustomize module",
            };
            v.push(format!(
                "{} is {kind} no distribution owns ({})",
                u.path, u.sha256
            ));
        }
        v
    }
}

/// Why a manifest could not be captured or read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The interpreter could not be asked.
    #[error("query the interpreter: {0}")]
    Interpreter(String),
    /// A file could not be read.
    #[error("read the runtime: {0}")]
    Files(String),
    /// The two captures differ.
    #[error("capture the runtime manifest: the two captures are not byte-identical")]
    NotRepeatable,
    /// A manifest file is invalid.
    #[error("{0}")]
    Invalid(String),
}

const PROBE: &str = "import json, os, platform, site, sys, sysconfig\nprint()\nprint(json.dumps({'implementation': sys.implementation.name, 'version': platform.python_version(), 'prefix': sys.prefix, 'purelib': sysconfig.get_paths()['purelib'], 'platlib': sysconfig.get_paths()['platlib'], 'sites': [os.path.abspath(p) for p in site.getsitepackages()], 'path': [os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)]}, sort_keys=True))";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Probe {
    implementation: String,
    version: String,
    prefix: String,
    purelib: String,
    platlib: String,
    sites: Vec<String>,
    path: Vec<String>,
}

fn ask(python: &Path) -> Result<Probe, ManifestError> {
    let spec = qual_exec::ExecSpec {
        argv: vec![
            python.display().to_string(),
            "-I".into(),
            // The capture must not change what it describes: no compiled files written.
            "-B".into(),
            "-c".into(),
            PROBE.into(),
        ],
        cwd: std::env::temp_dir(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ],
        timeout: Duration::from_secs(60),
        term_grace: Duration::from_secs(2),
        capture: qual_exec::CaptureLimits::default(),
        network: qual_exec::NetworkPolicy::Inherit,
        sandbox: qual_exec::Sandbox::default(),
    };
    let ex = qual_exec::execute(&spec).map_err(|e| ManifestError::Interpreter(e.to_string()))?;
    if !ex.termination.success() {
        return Err(ManifestError::Interpreter(format!(
            "{} ended with {:?}: {}",
            python.display(),
            ex.termination,
            qual_json::escape_text(&String::from_utf8_lossy(&ex.stderr.tail))
        )));
    }
    // The answer is the last line: a `sitecustomize` may have printed before it.
    let out = ex.stdout.head.trim_ascii();
    let last = out.rsplit(|b| *b == b'\n').next().unwrap_or(out);
    let v = qual_json::from_slice(last)
        .map_err(|e| ManifestError::Interpreter(format!("probe output: {e}")))?;
    serde_json::from_value(v.to_serde().unwrap_or_default())
        .map_err(|e| ManifestError::Interpreter(format!("probe output: {e}")))
}

fn metadata_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
}

/// One distribution and the resolved paths its RECORD owns.
fn distribution(
    site: &Path,
    info: &Path,
) -> Result<(Distribution, std::collections::BTreeSet<PathBuf>), ManifestError> {
    let files = |e: std::io::Error| ManifestError::Files(format!("{}: {e}", info.display()));
    let meta = read_regular_string(&info.join("METADATA"), DIST_INFO_FILE_LIMIT).map_err(files)?;
    let record = read_regular_bytes(&info.join("RECORD"), DIST_INFO_FILE_LIMIT).map_err(files)?;
    let checked = installed::check_record(site, info, &record);
    let d = Distribution {
        name: metadata_field(&meta, "Name:").unwrap_or_default(),
        version: metadata_field(&meta, "Version:").unwrap_or_default(),
        record_sha256: qual_json::sha256_prefixed(&record),
        record_files: checked.record_files,
        verified_files: checked.verified_files,
        unhashed_files: checked.unhashed_files,
        record_mismatches: checked.mismatches,
    };
    Ok((d, checked.owned))
}

/// One capture.
pub fn capture_once(
    python: &Path,
    environment: &BTreeMap<String, String>,
) -> Result<Manifest, ManifestError> {
    // The interpreter runs in a neutral directory: a relative path is made absolute first.
    let python = &std::path::absolute(python)
        .map_err(|e| ManifestError::Interpreter(format!("{}: {e}", python.display())))?;
    let probe = ask(python)?;
    let mut sites: Vec<String> = vec![probe.purelib.clone(), probe.platlib.clone()];
    sites.extend(probe.sites.iter().cloned());
    sites.sort();
    sites.dedup();
    let mut module_path = probe.path.clone();
    module_path.dedup();
    let mut dists = Vec::new();
    let mut owned = std::collections::BTreeSet::new();
    for s in &sites {
        let site = PathBuf::from(s);
        let Ok(dir) = std::fs::read_dir(&site) else {
            continue;
        };
        let mut infos: Vec<PathBuf> = dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "dist-info") && p.is_dir())
            .collect();
        infos.sort();
        for info in infos {
            let (d, o) = distribution(&site, &info)?;
            dists.push(d);
            owned.extend(o);
        }
    }
    dists.sort_by(|a, b| {
        a.name
            .to_ascii_lowercase()
            .cmp(&b.name.to_ascii_lowercase())
    });
    let unowned_files =
        installed::unowned(&sites, &module_path, &owned).map_err(ManifestError::Files)?;
    let env = environment
        .iter()
        .filter(|(k, _)| INFERENCE_ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut m = Manifest {
        schema: SCHEMA.into(),
        interpreter: Interpreter {
            file: digest_file(python).map_err(ManifestError::Files)?,
            implementation: probe.implementation,
            version: probe.version,
            prefix: probe.prefix,
        },
        site_directories: sites,
        module_path,
        distributions: dists,
        unowned_files,
        environment: env,
        runtime_content_sha256: String::new(),
    };
    m.runtime_content_sha256 = crate::records::self_hash(&m, "runtime_content_sha256");
    Ok(m)
}

/// Two captures, required byte-identical; returns the manifest and its file bytes.
pub fn capture(
    python: &Path,
    environment: &BTreeMap<String, String>,
) -> Result<(Manifest, Vec<u8>), ManifestError> {
    let a = capture_once(python, environment)?;
    let b = capture_once(python, environment)?;
    let (ba, bb) = (
        crate::records::to_file_bytes(&a),
        crate::records::to_file_bytes(&b),
    );
    if ba != bb {
        return Err(ManifestError::NotRepeatable);
    }
    Ok((a, ba))
}

/// Reads a manifest strictly and checks its content hash.
pub fn read(path: &Path) -> Result<Manifest, ManifestError> {
    let (_, doc, m): (_, _, Manifest) =
        crate::records::read_record(path).map_err(|e| ManifestError::Invalid(e.to_string()))?;
    if m.schema != SCHEMA {
        return Err(ManifestError::Invalid(format!(
            "{}: /schema: expected {}",
            path.display(),
            qual_json::show::quote(SCHEMA)
        )));
    }
    let want = crate::records::document_hash(&doc, "runtime_content_sha256");
    if m.runtime_content_sha256 != want {
        return Err(ManifestError::Invalid(format!(
            "{}: /runtime_content_sha256 does not match the content ({want})",
            path.display()
        )));
    }
    Ok(m)
}

/// Binds a runtime manifest file: its digest and the runtime content hash it declares.
pub fn bind(path: &Path) -> Result<ManifestBinding, String> {
    let file = digest_file(path)?;
    let m = read(path).map_err(|e| e.to_string())?;
    Ok(ManifestBinding {
        file,
        runtime_content_sha256: m.runtime_content_sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_python_manifest_is_repeatable_and_self_hashed() {
        let py = Path::new("/usr/bin/python3");
        if !py.exists() {
            return;
        }
        let env: BTreeMap<String, String> = [
            ("OMP_NUM_THREADS".to_string(), "1".to_string()),
            ("HOME".to_string(), "/root".to_string()),
        ]
        .into();
        let (m, bytes) = capture(py, &env).unwrap();
        assert_eq!(
            m.environment.keys().collect::<Vec<_>>(),
            ["OMP_NUM_THREADS"]
        );
        assert!(m.interpreter.version.starts_with('3'));
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("m.json");
        std::fs::write(&f, &bytes).unwrap();
        assert_eq!(read(&f).unwrap(), m);
        let tampered = String::from_utf8(bytes).unwrap().replace("\"1\"", "\"2\"");
        std::fs::write(d.path().join("t.json"), tampered).unwrap();
        assert!(read(&d.path().join("t.json"))
            .unwrap_err()
            .to_string()
            .contains("runtime_content_sha256"));
    }
}
