//! Evidence path rules: where a receipt and a run directory may be created.
//!
//! A receipt output must be strictly below `qualification/receipts/` or
//! `.qualification/receipts/` and end with `.json`; a run directory must be strictly below
//! `.qualification/runs/`. The check is lexical first (the path is made absolute without
//! resolving symlinks and must be inside the repository root), then every existing component
//! after the root is inspected with `lstat`: a symlink anywhere is refused, an existing
//! non-final component must be a directory. Nothing is created here.

use std::path::{Component, Path, PathBuf};

/// Allowed receipt roots.
pub const RECEIPT_ROOTS: [&str; 2] = ["qualification/receipts", ".qualification/receipts"];
/// The run directory root.
pub const RUNS_ROOT: &str = ".qualification/runs";

/// Lexically normalizes `p` against `base` (no symlink resolution).
pub fn lexical(base: &Path, p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Checks an evidence path and returns it relative to `root` (with `/` separators).
///
/// `allowed` are root-relative directories the path must be strictly below; `description`
/// names the path in messages (`receipt output`, `qualification run directory`).
pub fn check_evidence_path(
    root: &Path,
    cwd: &Path,
    path: &Path,
    allowed: &[&str],
    description: &str,
) -> Result<String, String> {
    let abs = lexical(cwd, path);
    let rel = abs
        .strip_prefix(root)
        .map_err(|_| {
            format!(
                "{description} must stay inside repository {}",
                root.display()
            )
        })?
        .to_path_buf();
    let rel_text = rel
        .to_str()
        .ok_or_else(|| format!("{description} path is not UTF-8"))?
        .to_string();
    let parts: Vec<&str> = rel_text.split('/').filter(|s| !s.is_empty()).collect();
    let mut cur = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        cur.push(part);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("{description} path cannot contain symlinks"))
            }
            Ok(m) if i + 1 < parts.len() && !m.is_dir() => {
                return Err(format!("{description} parent is not a directory"))
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let below = allowed.iter().any(|a| {
        rel_text.len() > a.len() + 1
            && rel_text.starts_with(a)
            && rel_text.as_bytes()[a.len()] == b'/'
    });
    if !below {
        return Err(format!(
            "{description} must be below {}",
            allowed.join(" or ")
        ));
    }
    Ok(rel_text)
}

/// Checks a receipt output path (also requires the `.json` suffix).
pub fn check_receipt_output(root: &Path, cwd: &Path, path: &Path) -> Result<String, String> {
    let rel = check_evidence_path(root, cwd, path, &RECEIPT_ROOTS, "receipt output")?;
    if !rel.ends_with(".json") || rel.rsplit('/').next() == Some(".json") {
        return Err("receipt output must use a .json filename".into());
    }
    Ok(rel)
}

/// Checks the run directory of `receipt_id`.
pub fn check_run_dir(root: &Path, receipt_id: &str) -> Result<String, String> {
    check_evidence_path(
        root,
        root,
        &root.join(RUNS_ROOT).join(receipt_id),
        &[RUNS_ROOT],
        "qualification run directory",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipt_outputs_must_be_below_evidence_roots() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        assert_eq!(
            check_receipt_output(root, root, Path::new("qualification/receipts/cpu/h/r.json"))
                .unwrap(),
            "qualification/receipts/cpu/h/r.json"
        );
        assert!(
            check_receipt_output(root, root, Path::new(".qualification/receipts/r.json")).is_ok()
        );
        for bad in [
            "qualification/receipts",
            "qualification/receipts/../../scripts/x.json",
            "src/x.json",
            "/etc/x.json",
            "qualification/receiptsx/r.json",
        ] {
            assert!(
                check_receipt_output(root, root, Path::new(bad)).is_err(),
                "{bad}"
            );
        }
        let e = check_receipt_output(root, root, Path::new("qualification/receipts/r.txt"))
            .unwrap_err();
        assert_eq!(e, "receipt output must use a .json filename");
    }

    #[test]
    fn symlinked_components_and_file_parents_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.join(".qualification")).unwrap();
        let e = check_run_dir(root, "abc").unwrap_err();
        assert!(e.contains("symlinks"), "{e}");
        std::fs::create_dir_all(root.join("qualification")).unwrap();
        std::fs::write(root.join("qualification/receipts"), b"x").unwrap();
        let e = check_receipt_output(root, root, Path::new("qualification/receipts/r.json"))
            .unwrap_err();
        assert!(e.contains("parent is not a directory"), "{e}");
    }
}
