//! Runtime manifests (`kiln-qual runtime-manifest`): a portable description of a Python
//! reference runtime, bound by content.
//!
//! Captured: the interpreter (path, resolved path, digest, implementation, version), its
//! site directories, every installed distribution (`*.dist-info`: name, version, the digest
//! of its `RECORD` — which lists the hash of every installed file — and the real digests of
//! its native extensions), and the inference-affecting environment variables of the launch.
//! Native extensions of GPU-only library distributions (`nvidia-*`, `cuda-*`, `triton`) are
//! bound through their `RECORD` digest only: they are not executed by a CPU run and hashing
//! their ~4 GB on every capture would dominate the campaign. A capture is taken twice and the
//! two must be byte-identical; `runtime_content_sha256` is the canonical hash of the
//! manifest without that key. The interpreter is asked for its facts through `qual-exec`
//! (isolated mode `-I`, a minimal environment).

use crate::identity::digest_file;
use crate::records::{FileDigest, ManifestBinding};
use qual_json::file::{read_regular_bytes, read_regular_string};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Manifest schema.
pub const SCHEMA: &str = "kiln-qual.runtime-manifest.v1";

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

/// One native extension.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NativeExtension {
    /// Path relative to the site directory.
    pub path: String,
    /// Size.
    pub bytes: u64,
    /// `sha256:` of the content.
    pub sha256: String,
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
    /// Native extensions hashed (empty for GPU-only library distributions).
    pub native_extensions: Vec<NativeExtension>,
}

/// A runtime manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`SCHEMA`].
    pub schema: String,
    /// Interpreter.
    pub interpreter: Interpreter,
    /// Site directories scanned.
    pub site_directories: Vec<String>,
    /// Distributions sorted by name.
    pub distributions: Vec<Distribution>,
    /// Inference-affecting environment of the launch.
    pub environment: BTreeMap<String, String>,
    /// Canonical hash of the manifest without this key.
    pub runtime_content_sha256: String,
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

const PROBE: &str = "import json, platform, sys, sysconfig\nprint(json.dumps({'implementation': sys.implementation.name, 'version': platform.python_version(), 'prefix': sys.prefix, 'purelib': sysconfig.get_paths()['purelib'], 'platlib': sysconfig.get_paths()['platlib']}, sort_keys=True))";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Probe {
    implementation: String,
    version: String,
    prefix: String,
    purelib: String,
    platlib: String,
}

fn ask(python: &Path) -> Result<Probe, ManifestError> {
    let spec = qual_exec::ExecSpec {
        argv: vec![
            python.display().to_string(),
            "-I".into(),
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
    let v = qual_json::from_slice(ex.stdout.head.trim_ascii())
        .map_err(|e| ManifestError::Interpreter(format!("probe output: {e}")))?;
    serde_json::from_value(v.to_serde().unwrap_or_default())
        .map_err(|e| ManifestError::Interpreter(format!("probe output: {e}")))
}

fn metadata_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
}

fn gpu_only(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("nvidia-") || n.starts_with("nvidia_") || n.starts_with("cuda-") || n == "triton"
}

/// The most a distribution's `METADATA` or `RECORD` may hold.
const DIST_INFO_FILE_LIMIT: usize = 64 << 20;

fn distribution(site: &Path, info: &Path) -> Result<Distribution, ManifestError> {
    let files = |e: std::io::Error| ManifestError::Files(format!("{}: {e}", info.display()));
    let meta = read_regular_string(&info.join("METADATA"), DIST_INFO_FILE_LIMIT).map_err(files)?;
    let record = read_regular_bytes(&info.join("RECORD"), DIST_INFO_FILE_LIMIT).map_err(files)?;
    let name = metadata_field(&meta, "Name:").unwrap_or_default();
    let version = metadata_field(&meta, "Version:").unwrap_or_default();
    let text = String::from_utf8_lossy(&record);
    let entries: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split(',').next())
        .filter(|p| !p.is_empty())
        .collect();
    let mut native = Vec::new();
    if !gpu_only(&name) {
        let mut sos: Vec<&str> = entries
            .iter()
            .copied()
            .filter(|p| p.ends_with(".so") || p.contains(".so."))
            .filter(|p| !p.starts_with(".."))
            .collect();
        sos.sort_unstable();
        for p in sos {
            let d = digest_file(&site.join(p)).map_err(ManifestError::Files)?;
            native.push(NativeExtension {
                path: p.to_string(),
                bytes: d.bytes,
                sha256: d.sha256,
            });
        }
    }
    Ok(Distribution {
        name,
        version,
        record_sha256: qual_json::sha256_prefixed(&record),
        record_files: entries.len() as u64,
        native_extensions: native,
    })
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
    sites.sort();
    sites.dedup();
    let mut dists = Vec::new();
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
            dists.push(distribution(&site, &info)?);
        }
    }
    dists.sort_by(|a, b| {
        a.name
            .to_ascii_lowercase()
            .cmp(&b.name.to_ascii_lowercase())
    });
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
        distributions: dists,
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
