//! Runtime identity: files bound by content (the server's resolved executable and, for an
//! interpreter, its script; extra `--runtime-artifact` files; a runtime manifest) and the
//! model bound by `qual-probe`'s fingerprint. Every binding is taken before traffic and
//! re-checked after it (a finalization check per kind). A runtime manifest's binding is
//! [`crate::manifest::bind`]'s (this module only digests its file).

use crate::records::{FileDigest, ModelIdentity};
use std::path::{Path, PathBuf};

/// Digests a regular file (symlinks followed and the resolved path recorded).
pub fn digest_file(path: &Path) -> Result<FileDigest, String> {
    let resolved =
        std::fs::canonicalize(path).map_err(|e| format!("resolve {}: {e}", path.display()))?;
    let hashed = qual_json::sha256_file(&resolved, None).map_err(|e| match e {
        qual_json::HashError::Read { source, .. } => {
            format!("read {}: {source}", resolved.display())
        }
        e => format!("open {}: {e}", resolved.display()),
    })?;
    let bytes = hashed.bytes;
    if bytes == 0 {
        return Err(format!("{} is empty", resolved.display()));
    }
    Ok(FileDigest {
        path: path.display().to_string(),
        resolved: resolved.display().to_string(),
        bytes,
        sha256: hashed.sha256,
    })
}

/// The executable of an owned server's argv (relative to its working directory, else looked
/// up on `PATH`) and, when the next argument is a regular file (an interpreter's script), that
/// file too.
pub fn executables(argv: &[String], cwd: &Path) -> Result<Vec<FileDigest>, String> {
    let exe = argv.first().ok_or("the launch command is empty")?;
    let resolve = |a: &str| -> Option<PathBuf> {
        let p = Path::new(a);
        if p.is_absolute() {
            return Some(p.to_path_buf());
        }
        if a.contains('/') {
            return Some(cwd.join(p));
        }
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(a))
                .find(|c| c.is_file())
        })
    };
    let exe_path = resolve(exe).ok_or(format!("cannot find the executable {exe}"))?;
    let mut v = vec![digest_file(&exe_path)?];
    if let Some(script) = argv.get(1).filter(|a| !a.starts_with('-')) {
        let p = cwd.join(script);
        if p.is_file() {
            v.push(digest_file(&p)?);
        }
    }
    Ok(v)
}

/// Re-digests bound files; returns the paths whose content changed or vanished.
pub fn changed(files: &[FileDigest]) -> Vec<String> {
    files
        .iter()
        .filter(|f| digest_file(Path::new(&f.resolved)).map_or(true, |now| now.sha256 != f.sha256))
        .map(|f| f.path.clone())
        .collect()
}

/// Fingerprints the model directory; the content digest excludes its path.
pub fn model_identity(dir: &Path, id: Option<&str>) -> Result<ModelIdentity, String> {
    let fp = qual_probe::model::fingerprint(dir, id).map_err(|e| e.to_string())?;
    let mut v = fp.to_value();
    let fingerprint = v
        .to_serde()
        .ok_or("model fingerprint is not representable")?;
    if let qual_json::Value::Object(o) = &mut v {
        o.remove("path");
    }
    Ok(ModelIdentity {
        fingerprint,
        content_sha256: qual_json::canonical_digest(&v),
    })
}
