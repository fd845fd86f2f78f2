//! Writing below a root: the one place that decides whether a path may be written by the
//! commands that write into a repository on the operator's behalf (`init`'s scaffold, serve
//! logs, latency artifacts).
//!
//! A path is confined to `root` when, walked component by component from `root`, every
//! component is a plain name or `..` that does not climb above `root` (never an absolute
//! path), and every component that exists is a real directory — never a symlink (a committed
//! or planted `qualification -> /elsewhere` is refused, not followed), never a file. Missing
//! directories are created one by one ([`create_dirs`]); the final file is created with
//! `O_CREAT | O_EXCL` ([`create_file`]), which never follows a symlink at the final name and
//! never replaces anything. `root` itself is taken as given (callers pass a repository top
//! level, which git reports with its symlinks resolved).
//!
//! The walk checks before it opens, so it relies on nothing else writing the repository while
//! one of these commands creates its files (no case runs then); it is not a defence against a
//! concurrent writer.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// Why a path may not be written. Messages read after "failed to …: ".
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The path leaves the root (absolute elsewhere, or `..` above it).
    #[error("refusing to write {path}: it is outside {root}")]
    Outside {
        /// The path as given.
        path: String,
        /// The root.
        root: String,
    },
    /// A component is a symlink.
    #[error("refusing to write {path}: {component} is a symlink")]
    Symlink {
        /// The path as given.
        path: String,
        /// The offending component (below the root).
        component: String,
    },
    /// A component that must be a directory is something else.
    #[error("refusing to write {path}: {component} is not a directory")]
    NotDirectory {
        /// The path as given.
        path: String,
        /// The offending component (below the root).
        component: String,
    },
    /// The final name exists already.
    #[error("refusing to overwrite existing {path}")]
    Exists {
        /// The path as given.
        path: String,
    },
    /// An I/O step failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn shown(p: &Path) -> String {
    crate::escape::escape_path(p)
}

/// The components of `path` below `root` (`path` absolute and starting with `root`, or
/// relative to `root`), with `.` dropped and `..` kept.
fn below<'a>(root: &Path, path: &'a Path) -> Result<Vec<Component<'a>>, ConfineError> {
    let outside = || ConfineError::Outside {
        path: shown(path),
        root: shown(root),
    };
    let rel = if path.is_absolute() {
        path.strip_prefix(root).map_err(|_| outside())?
    } else {
        path
    };
    let mut out = Vec::new();
    let mut depth = 0usize;
    for c in rel.components() {
        match c {
            Component::Normal(_) => {
                depth += 1;
                out.push(c);
            }
            Component::ParentDir => {
                depth = depth.checked_sub(1).ok_or_else(outside)?;
                out.push(c);
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(outside()),
        }
    }
    Ok(out)
}

/// Walks `components` from `root`, checking (and with `create`, making, mode `mode`) each
/// directory; returns the directory reached.
fn walk(
    root: &Path,
    given: &Path,
    components: &[Component<'_>],
    create: Option<u32>,
) -> Result<PathBuf, ConfineError> {
    let mut at = root.to_path_buf();
    for c in components {
        match c {
            Component::ParentDir => {
                at.pop();
                continue;
            }
            Component::Normal(name) => at.push(name),
            _ => continue,
        }
        let component = || shown(&below_root(root, &at));
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(ConfineError::Symlink {
                    path: shown(given),
                    component: component(),
                })
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(ConfineError::NotDirectory {
                    path: shown(given),
                    component: component(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create.is_some() => {
                let mut b = std::fs::DirBuilder::new();
                b.mode(create.unwrap_or(0o755));
                if let Err(e) = b.create(&at) {
                    // Raced with another creator: the re-check below decides.
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(ConfineError::Io {
                            path: shown(given),
                            source: e,
                        });
                    }
                }
                let m = std::fs::symlink_metadata(&at).map_err(|source| ConfineError::Io {
                    path: shown(given),
                    source,
                })?;
                if !m.is_dir() {
                    return Err(ConfineError::NotDirectory {
                        path: shown(given),
                        component: component(),
                    });
                }
            }
            Err(source) => {
                return Err(ConfineError::Io {
                    path: shown(given),
                    source,
                })
            }
        }
    }
    Ok(at)
}

/// Checks that `path` is confined to `root` without creating anything: every existing
/// component a real directory (the final one may be missing or a file, never a symlink).
pub fn check(root: &Path, path: &Path) -> Result<(), ConfineError> {
    let comps = below(root, path)?;
    let Some((last, dirs)) = comps.split_last() else {
        return Ok(());
    };
    let parent = match walk(root, path, dirs, None) {
        Ok(p) => p,
        Err(ConfineError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(())
        }
        Err(e) => return Err(e),
    };
    if let Component::Normal(name) = last {
        if std::fs::symlink_metadata(parent.join(name)).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(ConfineError::Symlink {
                path: shown(path),
                component: shown(&below_root(root, &parent.join(name))),
            });
        }
    }
    Ok(())
}

fn below_root(root: &Path, p: &Path) -> PathBuf {
    p.strip_prefix(root).unwrap_or(p).to_path_buf()
}

/// Creates every missing directory of `path` (a directory confined to `root`), each with
/// `mode`, and returns the directory's path.
pub fn create_dirs(root: &Path, path: &Path, mode: u32) -> Result<PathBuf, ConfineError> {
    let comps = below(root, path)?;
    walk(root, path, &comps, Some(mode))
}

/// Creates the directory `path` (confined to `root`) itself with `mode`, exclusively (it must
/// not exist), after creating its missing parents with mode `0o755`; returns its path.
pub fn create_dir_new(root: &Path, path: &Path, mode: u32) -> Result<PathBuf, ConfineError> {
    let comps = below(root, path)?;
    let Some((Component::Normal(name), dirs)) = comps.split_last() else {
        return Err(ConfineError::Outside {
            path: shown(path),
            root: shown(root),
        });
    };
    let dir = walk(root, path, dirs, Some(0o755))?.join(name);
    let mut b = std::fs::DirBuilder::new();
    b.mode(mode);
    b.create(&dir).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            ConfineError::Exists { path: shown(path) }
        } else {
            ConfineError::Io {
                path: shown(path),
                source,
            }
        }
    })?;
    Ok(dir)
}

/// Creates the file `path` (confined to `root`) exclusively with `mode`, after creating its
/// missing parent directories (mode `0o755`), and returns it open for writing.
pub fn create_file(root: &Path, path: &Path, mode: u32) -> Result<File, ConfineError> {
    let comps = below(root, path)?;
    let Some((Component::Normal(name), dirs)) = comps.split_last() else {
        return Err(ConfineError::Outside {
            path: shown(path),
            root: shown(root),
        });
    };
    let target = walk(root, path, dirs, Some(0o755))?.join(name);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&target)
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                ConfineError::Exists { path: shown(path) }
            } else {
                ConfineError::Io {
                    path: shown(path),
                    source,
                }
            }
        })
}

/// Writes `bytes` to the file `path` (confined to `root`), replacing a file that is there:
/// the bytes go to a fresh hidden temporary file beside it (created as by [`create_file`]),
/// which is then renamed over the final name (a rename replaces a symlink there instead of
/// writing through it; a directory there is refused).
pub fn replace_file(root: &Path, path: &Path, bytes: &[u8], mode: u32) -> Result<(), ConfineError> {
    let io = |source| ConfineError::Io {
        path: shown(path),
        source,
    };
    let name = path.file_name().ok_or_else(|| ConfineError::Outside {
        path: shown(path),
        root: shown(root),
    })?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    // Refusals name the final path, not the temporary one.
    check(root, path)?;
    let mut f = create_file(root, &tmp, mode)?;
    let written = std::io::Write::write_all(&mut f, bytes).and_then(|()| f.sync_all());
    drop(f);
    let target = root.join(below_root(root, path));
    let tmp_full = root.join(below_root(root, &tmp));
    let done = written.and_then(|()| {
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
            return Err(std::io::Error::other("a directory is in the way"));
        }
        std::fs::rename(&tmp_full, &target)
    });
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp_full);
    }
    done.map_err(io)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests read back what they wrote
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("qual-json-confine-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        d
    }

    #[test]
    fn files_and_directories_are_created_inside_the_root_only() {
        let d = tempdir("inside");
        let root = d.join("repo");
        std::fs::create_dir(&root).unwrap();
        std::io::Write::write_all(
            &mut create_file(&root, Path::new("a/b/c.txt"), 0o644).unwrap(),
            b"x",
        )
        .unwrap();
        assert_eq!(std::fs::read(root.join("a/b/c.txt")).unwrap(), b"x");
        assert!(matches!(
            create_file(&root, &root.join("a/b/c.txt"), 0o644),
            Err(ConfineError::Exists { .. })
        ));
        assert_eq!(
            create_dirs(&root, Path::new("a/./x/../y"), 0o755).unwrap(),
            root.join("a/y")
        );
        assert!(root.join("a/x").is_dir());
        let private = create_dir_new(&root, Path::new("a/y/run"), 0o700).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&private).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(matches!(
            create_dir_new(&root, Path::new("a/y/run"), 0o700),
            Err(ConfineError::Exists { .. })
        ));
        for p in ["../x", "a/../../x", "/etc/x"] {
            let e = create_file(&root, Path::new(p), 0o644).unwrap_err();
            assert!(matches!(e, ConfineError::Outside { .. }), "{p}: {e}");
        }
        assert!(!d.join("x").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn symlinked_components_and_files_in_the_way_are_refused() {
        let d = tempdir("links");
        let root = d.join("repo");
        let outside = d.join("outside");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("q")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("real/last")).unwrap();
        std::fs::write(root.join("file"), "").unwrap();
        let e = create_file(&root, Path::new("q/w/f.json"), 0o644).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("refusing to write q/w/f.json: q is a symlink")
        );
        assert!(create_dirs(&root, &root.join("real/last/x"), 0o755).is_err());
        assert!(matches!(
            check(&root, Path::new("real/last")),
            Err(ConfineError::Symlink { .. })
        ));
        assert!(matches!(
            check(&root, Path::new("q/missing/x")),
            Err(ConfineError::Symlink { .. })
        ));
        assert!(check(&root, Path::new("real/missing/x")).is_ok());
        assert!(matches!(
            create_file(&root, Path::new("file/x"), 0o644),
            Err(ConfineError::NotDirectory { .. })
        ));
        // A dangling symlink at the final name is never followed.
        std::os::unix::fs::symlink(outside.join("made"), root.join("real/dangling")).unwrap();
        assert!(matches!(
            create_file(&root, Path::new("real/dangling"), 0o644),
            Err(ConfineError::Exists { .. })
        ));
        // Replacing is refused too (symlinks are refused by name, never replaced or
        // followed), and nothing appears where the link points.
        assert!(matches!(
            replace_file(&root, Path::new("real/dangling"), b"new", 0o644),
            Err(ConfineError::Symlink { .. })
        ));
        assert!(!outside.join("made").exists());
        // A regular file is replaced whole.
        replace_file(&root, Path::new("real/plain"), b"new", 0o644).unwrap();
        replace_file(&root, Path::new("real/plain"), b"newer", 0o644).unwrap();
        assert_eq!(std::fs::read(root.join("real/plain")).unwrap(), b"newer");
        assert!(replace_file(&root, Path::new("q/x.json"), b"x", 0o644).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
