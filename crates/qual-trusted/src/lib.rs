//! qual-trusted: the programs kiln-qual itself starts by name (`git`, the probe tools, `gh`).
//!
//! # What this crate owns
//!
//! A case may write places a later lookup on `PATH` would search (a `PATH` directory inside
//! the worktree; as root, before the host was read-only to cases, all of them). A program
//! looked up by name *after* a case ran could be the case's, executed by the runner outside
//! the box. So every program kiln-qual starts by name goes through [`command`] (or
//! [`program`]), which:
//!
//! - resolves the name once per process, on the runner's `PATH` as it is at that moment:
//!   absolute directories only (a relative entry, `.` or an empty one is skipped), the first
//!   executable regular file whose directory on `PATH`, real directory and real file (after
//!   following symlinks) only root can change — owned by root, not writable by group or
//!   others ([`trusted_by_owner`]) — and that lie in no git worktree (a case writes its
//!   worktree, whoever owns it); a candidate that fails the rule is skipped and named in the
//!   error when nothing qualifies;
//! - records the file's identity (device, inode, size, mode, owner, modification and change
//!   times) and re-checks it, and the rule, before every start: a replaced or modified
//!   program is refused ([`TrustError::Changed`]), never run;
//! - runs the program by its absolute real path.
//!
//! [`seal`] marks the moment cases are about to run: from then on a name that was not
//! resolved before is refused ([`TrustError::Sealed`]) instead of looked up, so every program
//! the runner starts after the cases was chosen before any case ran.
//!
//! For an unprivileged runner "only root can change it" means the runner's user cannot. Root
//! can write every file; for a root runner the rule keeps out files other users could
//! change, and the box (the host is read-only to a case, `qual-exec`) together with the
//! identity re-check keeps out the case.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Why a program cannot be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// No candidate on `PATH` (or the absolute path given) qualifies.
    #[error("resolve {name}: {reason}")]
    NotFound {
        /// The name asked for.
        name: String,
        /// What was searched and which candidates were refused.
        reason: String,
    },
    /// Candidates exist, and each fails the rule of the crate docs.
    #[error("resolve {name}: every candidate was refused (only programs that only root can change are run): {candidates}")]
    Refused {
        /// The name asked for.
        name: String,
        /// Each candidate with the reason.
        candidates: String,
    },
    /// Cases already ran ([`seal`]) and the name was not resolved before.
    #[error(
        "resolve {name}: it was not resolved before the cases ran, so it is not looked up now"
    )]
    Sealed {
        /// The name asked for.
        name: String,
    },
    /// The resolved file changed (replaced, written, chmod'ed) since it was resolved.
    #[error("start {}: it changed since it was resolved ({reason})", path.display())]
    Changed {
        /// The resolved path.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
}

impl TrustError {
    /// Whether the program simply does not exist (as opposed to being refused).
    pub fn is_not_found(&self) -> bool {
        matches!(self, TrustError::NotFound { .. })
    }
}

/// What identifies a file: a replacement or a write changes at least one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    uid: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mode: m.mode(),
            uid: m.uid(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// A program resolved by this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    name: String,
    path: PathBuf,
    identity: Identity,
}

impl Program {
    /// The absolute real path it runs from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The name it was asked for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Re-checks the file (identity and ownership rule) and returns a command for it, with
    /// `argv[0]` the name it was asked for.
    #[allow(clippy::disallowed_methods)] // builds, never spawns: callers start it through qual-exec or qual-git
    pub fn command(&self) -> Result<Command, TrustError> {
        self.verify()?;
        let mut cmd = Command::new(&self.path);
        std::os::unix::process::CommandExt::arg0(&mut cmd, &self.name);
        Ok(cmd)
    }

    fn verify(&self) -> Result<(), TrustError> {
        let changed = |reason: String| TrustError::Changed {
            path: self.path.clone(),
            reason,
        };
        let meta = std::fs::symlink_metadata(&self.path).map_err(|e| changed(e.to_string()))?;
        if Identity::of(&meta) != self.identity {
            return Err(changed(
                "another file, or its contents, mode or owner changed".into(),
            ));
        }
        check_file_and_dir(&self.path).map_err(changed)
    }
}

static RESOLVED: Mutex<Option<HashMap<String, Result<Program, TrustError>>>> = Mutex::new(None);
static SEALED: AtomicBool = AtomicBool::new(false);

/// From now on only names resolved before are started (see the crate docs). Call it right
/// before the first case runs.
pub fn seal() {
    SEALED.store(true, Ordering::SeqCst);
}

/// Whether [`seal`] was called in this process.
pub fn sealed() -> bool {
    SEALED.load(Ordering::SeqCst)
}

/// The program `name` (a bare name looked up on `PATH`, or an absolute path), resolved once
/// per process and re-checked now.
pub fn program(name: &str) -> Result<Program, TrustError> {
    let mut guard = RESOLVED.lock().unwrap_or_else(|p| p.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    let found = match map.get(name) {
        Some(r) => r.clone(),
        None if sealed() => {
            return Err(TrustError::Sealed {
                name: name.to_string(),
            })
        }
        None => {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let r = resolve_on(name, &path.to_string_lossy());
            map.insert(name.to_string(), r.clone());
            r
        }
    };
    drop(guard);
    let p = found?;
    p.verify()?;
    Ok(p)
}

/// [`program`]`(name)?.`[`command`](Program::command)`()`.
pub fn command(name: &str) -> Result<Command, TrustError> {
    program(name)?.command()
}

/// Resolves `name` on `path` (a `PATH` value) without caching: the rule of the crate docs.
pub fn resolve_on(name: &str, path: &str) -> Result<Program, TrustError> {
    let not_found = |reason: String| TrustError::NotFound {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(not_found("the name is empty".into()));
    }
    let candidates: Vec<PathBuf> = if name.contains('/') {
        let p = Path::new(name);
        if !p.is_absolute() {
            return Err(not_found("a path must be absolute".into()));
        }
        vec![p.to_path_buf()]
    } else {
        path.split(':')
            .filter(|d| Path::new(d).is_absolute())
            .map(|d| Path::new(d).join(name))
            .collect()
    };
    let mut refused = Vec::new();
    for c in &candidates {
        let Ok(meta) = std::fs::metadata(c) else {
            continue;
        };
        if !meta.is_file() || meta.mode() & 0o111 == 0 {
            continue;
        }
        let checked = c
            .parent()
            .map(|dir| check(dir, "directory"))
            .unwrap_or(Ok(()))
            .and_then(|()| {
                let real = std::fs::canonicalize(c).map_err(|e| e.to_string())?;
                check_file_and_dir(&real)?;
                Ok(real)
            });
        match checked {
            Ok(real) => {
                let meta =
                    std::fs::symlink_metadata(&real).map_err(|e| not_found(e.to_string()))?;
                return Ok(Program {
                    name: name.to_string(),
                    path: real,
                    identity: Identity::of(&meta),
                });
            }
            Err(why) => refused.push(format!("{} ({why})", c.display())),
        }
    }
    if !refused.is_empty() {
        return Err(TrustError::Refused {
            name: name.to_string(),
            candidates: refused.join(", "),
        });
    }
    Err(not_found(if name.contains('/') {
        "no executable file there".into()
    } else {
        "not found in an absolute directory of PATH".into()
    }))
}

/// The real file and its real directory pass [`trusted_by_owner`].
fn check_file_and_dir(real: &Path) -> Result<(), String> {
    check(real, "file")?;
    match real.parent() {
        Some(dir) => check(dir, "directory"),
        None => Ok(()),
    }
}

fn check(p: &Path, what: &str) -> Result<(), String> {
    let meta = std::fs::metadata(p).map_err(|e| format!("{what} {}: {e}", p.display()))?;
    if let Some(top) = p.ancestors().find(|a| a.join(".git").exists()) {
        return Err(format!(
            "{what} {} lies in the git worktree {}, which a case may write",
            p.display(),
            top.display()
        ));
    }
    if trusted_by_owner(meta.uid(), meta.mode()) {
        Ok(())
    } else {
        Err(format!(
            "{what} {} is owned by uid {} with mode {:o}: someone other than root can change it",
            p.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ))
    }
}

/// Only root can change a file with this owner and mode: owned by uid 0, not writable by its
/// group or others.
pub fn trusted_by_owner(uid: u32, mode: u32) -> bool {
    uid == 0 && mode & 0o022 == 0
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests run a resolved program directly
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[allow(unsafe_code)] // geteuid: the tests' one libc call.
    fn is_root() -> bool {
        // SAFETY: trivial getter.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn the_ownership_rule() {
        assert!(trusted_by_owner(0, 0o100755));
        assert!(trusted_by_owner(0, 0o040755));
        assert!(!trusted_by_owner(1000, 0o100755));
        assert!(!trusted_by_owner(0, 0o100775));
        assert!(!trusted_by_owner(0, 0o041777));
    }

    #[test]
    fn system_programs_resolve_to_absolute_real_paths() {
        let p = resolve_on("sh", "relative/dir::/usr/bin:/bin").unwrap();
        assert!(p.path().is_absolute(), "{p:?}");
        assert_eq!(p.path(), std::fs::canonicalize(p.path()).unwrap());
        let out = p
            .command()
            .unwrap()
            .args(["-c", "echo ok"])
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"ok\n");
        let e = resolve_on("kq-no-such-program", "/usr/bin:/bin").unwrap_err();
        assert!(e.is_not_found(), "{e}");
        assert!(resolve_on("bin/sh", "/").is_err());
    }

    /// A writable `PATH` directory ahead of the system's is skipped, the changed file is
    /// refused, and a sealed process does not look new names up.
    #[test]
    fn writable_directories_are_skipped_and_changes_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let planted = dir.path().join("sh");
        std::fs::write(&planted, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:/usr/bin:/bin", dir.path().display());
        let p = resolve_on("sh", &path).unwrap();
        assert!(!p.path().starts_with(dir.path()), "{p:?}");
        // Only the planted candidate: refused, by name.
        let e = resolve_on("sh", &dir.path().display().to_string()).unwrap_err();
        assert!(!e.is_not_found(), "{e}");
        assert!(
            e.to_string().contains(&planted.display().to_string()),
            "{e}"
        );

        // A program that changes after it was resolved is not started.
        let own = tempfile::tempdir().unwrap();
        std::fs::set_permissions(own.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let tool = own.path().join("kq-tool");
        std::fs::write(&tool, "#!/bin/sh\necho one\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir_ok =
            is_root() && trusted_by_owner(0, std::fs::metadata(own.path()).unwrap().mode());
        if !dir_ok {
            // Not root: the directory is ours, so the rule refuses it already.
            assert!(resolve_on("kq-tool", &own.path().display().to_string()).is_err());
            return;
        }
        let p = resolve_on("kq-tool", &own.path().display().to_string()).unwrap();
        assert!(p.command().is_ok());
        std::fs::write(&tool, "#!/bin/sh\necho two\n").unwrap();
        let e = p.command().unwrap_err();
        assert!(matches!(e, TrustError::Changed { .. }), "{e}");

        // A directory inside a git worktree is refused, whoever owns it.
        std::fs::create_dir(own.path().join(".git")).unwrap();
        let e = resolve_on("kq-tool", &own.path().display().to_string()).unwrap_err();
        assert!(e.to_string().contains("git worktree"), "{e}");
    }

    #[test]
    fn after_seal_only_names_resolved_before_are_started() {
        program("sh").unwrap();
        seal();
        assert!(program("sh").is_ok());
        let e = program("kq-never-resolved-before").unwrap_err();
        assert!(matches!(e, TrustError::Sealed { .. }), "{e}");
    }
}
