//! Path rules of the legacy pipeline (all lexical unless stated).
//!
//! - *repo-relative*: not absolute and without a `..` component;
//! - *canonical result path*: repo-relative, under `bench-results/backend-latency`, not under
//!   `bench-results/backend-latency/raw`, last suffix `.json` (any depth);
//! - *canonical raw-log path*: repo-relative, under `bench-results/backend-latency/raw`, last
//!   suffix `.log`;
//! - [`repo_relative_path`]: the one rule that touches the file system (symlinks resolved);
//! - [`contained`]: a path named by a manifest (`source`, `result_artifact`) is repo-relative
//!   and, symlinks resolved, stays inside the repository, in every mode (a deliberate
//!   difference: the original accepted any path outside `--require-covered`, so `latency run`
//!   could write an artifact anywhere the manifest said).

use std::path::{Component, Path, PathBuf};

/// Directory of compact results.
pub const RESULT_DIR: &str = "bench-results/backend-latency";
/// Directory of raw logs.
pub const RAW_DIR: &str = "bench-results/backend-latency/raw";

/// Not absolute, no `..` component.
pub fn is_repo_relative(p: &str) -> bool {
    let path = Path::new(p);
    !path.is_absolute() && !path.components().any(|c| matches!(c, Component::ParentDir))
}

fn parts(p: &str) -> Vec<String> {
    Path::new(p)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

/// Lexically `p` is `dir` or below it (`PurePath.is_relative_to`).
pub fn is_under(p: &str, dir: &str) -> bool {
    let p = parts(p);
    let d = parts(dir);
    p.len() >= d.len() && p[..d.len()] == d[..]
}

fn suffix_is(p: &str, ext: &str) -> bool {
    Path::new(p).extension().is_some_and(|e| e == ext)
}

/// Canonical compact-result path.
pub fn is_canonical_result_path(p: &str) -> bool {
    is_repo_relative(p) && is_under(p, RESULT_DIR) && !is_under(p, RAW_DIR) && suffix_is(p, "json")
}

/// Canonical raw-log path.
pub fn is_canonical_raw_log_path(p: &str) -> bool {
    is_repo_relative(p) && is_under(p, RAW_DIR) && suffix_is(p, "log")
}

/// Why a manifest path is refused (`None` when it is contained in the repository at `root`):
/// absolute, with a `..` component, or resolving (through symlinks) outside the root.
pub fn contained(root: &Path, p: &str) -> Option<&'static str> {
    if p.is_empty() {
        return Some("must be a non-empty path");
    }
    if Path::new(p).is_absolute() {
        return Some("must be repo-relative, not absolute");
    }
    if Path::new(p)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Some("must not contain '..'");
    }
    if !resolve(&root.join(p)).starts_with(resolve(root)) {
        return Some("resolves outside the repository");
    }
    None
}

/// Resolves a path against the repository root (absolute paths stay as they are).
pub fn under_root(root: &Path, p: &str) -> PathBuf {
    root.join(p)
}

/// Makes `p` absolute and resolves symlinks as far as the path exists (Python's non-strict
/// `Path.resolve`).
pub fn resolve(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    // Canonicalize the longest existing prefix, then append the rest lexically.
    let mut existing = abs.clone();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(c) = existing.canonicalize() {
            let mut out = c;
            for r in rest.iter().rev() {
                if r == ".." {
                    out.pop();
                } else if r != "." {
                    out.push(r);
                }
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return abs,
        }
    }
}

/// `repo_relative_path(p)`: the path relative to the resolved repository root when it lies
/// below it, otherwise `p` exactly as given.
pub fn repo_relative_path(root: &Path, p: &Path) -> String {
    let resolved = resolve(p);
    let root = resolve(root);
    match resolved.strip_prefix(&root) {
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => p.to_string_lossy().into_owned(),
    }
}

/// The raw-log slug of a fixture id: runs of characters outside `[A-Za-z0-9_.-]` become `-`,
/// leading and trailing `-` are stripped, and an empty result becomes `fixture`.
pub fn slug(id: &str) -> String {
    let mut out = String::new();
    let mut in_run = false;
    for c in id.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    let trimmed = out.trim_matches('-');
    if trimmed.is_empty() {
        "fixture".into()
    } else {
        trimmed.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_paths() {
        assert!(is_canonical_result_path(
            "bench-results/backend-latency/x.json"
        ));
        assert!(is_canonical_result_path(
            "bench-results/backend-latency/a/b/x.json"
        ));
        assert!(is_canonical_result_path(
            "./bench-results/backend-latency/x.json"
        ));
        assert!(!is_canonical_result_path(
            "bench-results/backend-latency/raw/x.json"
        ));
        assert!(!is_canonical_result_path(
            "bench-results/backend-latency/x.log"
        ));
        assert!(!is_canonical_result_path(
            "/bench-results/backend-latency/x.json"
        ));
        assert!(!is_canonical_result_path(
            "bench-results/backend-latency/../x.json"
        ));
        assert!(!is_canonical_result_path("bench-results/x.json"));
        assert!(is_canonical_raw_log_path(
            "bench-results/backend-latency/raw/a.log"
        ));
        assert!(!is_canonical_raw_log_path(
            "bench-results/backend-latency/a.log"
        ));
        assert!(!is_canonical_raw_log_path(
            "bench-results/backend-latency/raw/a.txt"
        ));
    }

    #[test]
    fn slugs() {
        assert_eq!(
            slug("cuda_rtx4090_matmul_qwen35_4b"),
            "cuda_rtx4090_matmul_qwen35_4b"
        );
        assert_eq!(slug("a b//c"), "a-b-c");
        assert_eq!(slug("//"), "fixture");
        assert_eq!(slug("-x-"), "x");
        assert_eq!(slug("café"), "caf");
    }

    #[test]
    fn repo_relative() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(root.join("a/f.txt"), b"x").unwrap();
        assert_eq!(repo_relative_path(root, &root.join("a/f.txt")), "a/f.txt");
        assert_eq!(
            repo_relative_path(root, &root.join("a/new.txt")),
            "a/new.txt"
        );
        assert_eq!(
            repo_relative_path(root, Path::new("/elsewhere/x")),
            "/elsewhere/x"
        );
    }
}

#[cfg(test)]
mod containment_tests {
    use super::*;

    #[test]
    fn manifest_paths_stay_inside_the_repository() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("bench-results")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("bench-results/out")).unwrap();
        assert_eq!(
            contained(root, "bench-results/backend-latency/a.json"),
            None
        );
        assert!(contained(root, "/etc/x.json").unwrap().contains("absolute"));
        assert!(contained(root, "bench-results/../../x.json")
            .unwrap()
            .contains(".."));
        assert!(contained(root, "bench-results/out/x.json")
            .unwrap()
            .contains("outside the repository"));
        assert!(contained(root, "").is_some());
    }
}
