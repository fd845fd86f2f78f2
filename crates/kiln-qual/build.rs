//! Records the commit this binary is built from for `--version` (`KILN_QUAL_COMMIT`): the
//! output of `git rev-parse --short=12 HEAD` at build time, with `-dirty` when the worktree
//! has changes, or `unknown` when git or the repository is unavailable (a crates.io tarball,
//! a source export). The binary never runs git for this.

// Build script: asks git for the commit at build time, before any product code exists.
#![allow(clippy::disallowed_methods)]

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).map_or_else(
        || "unknown".to_owned(),
        |c| {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        },
    );
    println!("cargo:rustc-env=KILN_QUAL_COMMIT={commit}");
    // Rebuild when HEAD moves (a commit, a checkout) or the index changes.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index", "logs/HEAD"] {
            let p = std::path::Path::new(&dir).join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
