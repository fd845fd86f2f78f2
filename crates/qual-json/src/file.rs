//! Opening user-given input files: the one place that decides whether a path may be read.
//!
//! Every reader of a path that came from a user or a document (workloads, receipts, artifacts
//! named by receipts, corpora, launch recipes, latency manifests, raw logs, bundles) opens it
//! through [`open_regular`] or [`read_regular_file`]. A FIFO, socket, character or block
//! device, or directory is refused *before* any blocking open: the file is opened with
//! `O_NONBLOCK` (so opening a FIFO without a writer returns at once) and checked with `fstat`
//! on the opened descriptor (so a path swapped between the check and the open is still
//! caught). Symlinks to regular files are followed, as every reader always has, except through
//! [`open_regular_nofollow`], which refuses a symlink at the final component (`O_NOFOLLOW`)
//! for callers that treat a symlink as something other than its target (tracked worktree
//! files).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a path is not a readable regular file.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The path could not be opened or inspected (missing, permissions…).
    #[error("cannot read {path}: {}", crate::show::io_error(source))]
    Io {
        /// The path as given (control characters escaped).
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The path names something other than a regular file (`symlink` only from
    /// [`open_regular_nofollow`]).
    #[error("cannot read {path}: not a regular file ({kind})")]
    NotRegular {
        /// The path as given (control characters escaped).
        path: String,
        /// `directory`, `FIFO`, `socket`, `character device` or `block device`.
        kind: &'static str,
    },
}

impl OpenError {
    /// The underlying I/O error kind (`Other` for a non-regular file).
    pub fn kind(&self) -> std::io::ErrorKind {
        match self {
            OpenError::Io { source, .. } => source.kind(),
            OpenError::NotRegular { .. } => std::io::ErrorKind::Other,
        }
    }
}

impl From<OpenError> for std::io::Error {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Io { source, .. } => source,
            e @ OpenError::NotRegular { .. } => std::io::Error::other(e.to_string()),
        }
    }
}

/// What a non-regular file type is called in messages.
fn kind_name(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Opens `path` for reading only if it is (or links to) a regular file; never blocks on a
/// FIFO and never reads from a device.
pub fn open_regular(path: &Path) -> Result<File, OpenError> {
    open_checked(path, true)
}

/// Like [`open_regular`], but a symlink at the final component is refused as
/// `not a regular file (symlink)` instead of followed (checked with `lstat` and enforced by
/// `O_NOFOLLOW`, so a link planted between the check and the open is refused too). Leading
/// components are resolved as usual.
pub fn open_regular_nofollow(path: &Path) -> Result<File, OpenError> {
    open_checked(path, false)
}

fn open_checked(path: &Path, follow: bool) -> Result<File, OpenError> {
    let shown = || crate::escape::escape_path(path);
    let io = |source| OpenError::Io {
        path: shown(),
        source,
    };
    // A cheap first refusal with a clear kind (nothing is opened for a FIFO or a device).
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    }
    .map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(OpenError::NotRegular {
            path: shown(),
            kind: kind_name(meta.file_type()),
        });
    }
    // O_NONBLOCK: if the path became a FIFO after the check, the open still returns at once.
    let flags = O_NONBLOCK | O_CLOEXEC | if follow { 0 } else { O_NOFOLLOW };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            // ELOOP: the final component became a symlink after the check.
            if !follow && e.raw_os_error() == Some(ELOOP) {
                OpenError::NotRegular {
                    path: shown(),
                    kind: "symlink",
                }
            } else {
                io(e)
            }
        })?;
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(OpenError::NotRegular {
            path: shown(),
            kind: kind_name(meta.file_type()),
        });
    }
    // O_NONBLOCK has no effect on regular files; reads behave as usual.
    Ok(file)
}

/// Reads a regular file of at most `max_bytes` bytes (checked while reading, so a growing
/// file cannot exhaust memory). `Ok(None)` means the file is larger than the limit.
pub fn read_regular_file(path: &Path, max_bytes: usize) -> Result<Option<Vec<u8>>, OpenError> {
    read_opened(open_regular(path)?, path, max_bytes)
}

/// [`read_regular_file`] for callers that report plain I/O errors: the OS error unchanged, a
/// non-regular file as kind `Other`, a file over `max_bytes` as kind `InvalidData`.
pub fn read_regular_bytes(path: &Path, max_bytes: usize) -> std::io::Result<Vec<u8>> {
    read_regular_file(path, max_bytes)?.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than the limit of {max_bytes} bytes"),
        )
    })
}

/// [`read_regular_bytes`] as text (invalid UTF-8 is an `InvalidData` error, as with
/// `std::fs::read_to_string`).
pub fn read_regular_string(path: &Path, max_bytes: usize) -> std::io::Result<String> {
    String::from_utf8(read_regular_bytes(path, max_bytes)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// Reads a file opened by [`open_regular`] up to `max_bytes` (`Ok(None)` past the limit);
/// `path` only names it in errors.
pub fn read_opened(
    file: File,
    path: &Path,
    max_bytes: usize,
) -> Result<Option<Vec<u8>>, OpenError> {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = Vec::with_capacity((len as usize).min(max_bytes) + 1);
    file.take(max_bytes as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| OpenError::Io {
            path: crate::escape::escape_path(path),
            source,
        })?;
    Ok((bytes.len() <= max_bytes).then_some(bytes))
}

// Linux's generic open(2) flag values (x86_64, aarch64, riscv64 and arm share them; mips,
// sparc and powerpc differ and are not supported), written here because this crate must not
// depend on libc (scripts/check-boundaries).
const O_NONBLOCK: i32 = 0o4000;
const O_CLOEXEC: i32 = 0o2000000;
// O_NOFOLLOW is where arm and aarch64 differ from the generic value.
#[cfg(any(target_arch = "aarch64", target_arch = "arm"))]
const O_NOFOLLOW: i32 = 0o100000;
#[cfg(not(any(target_arch = "aarch64", target_arch = "arm")))]
const O_NOFOLLOW: i32 = 0o400000;
const ELOOP: i32 = 40;

/// `p` as shown in evidence: relative to `root` when below it, else as given (lossy UTF-8).
pub fn display_relative(root: &std::path::Path, p: &std::path::Path) -> String {
    p.strip_prefix(root)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_else(|_| p.to_string_lossy().into_owned())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make a FIFO with mkfifo
mod tests {
    use super::*;

    #[test]
    fn refuses_directories_and_fifos_without_blocking() {
        let d = tempfile_dir();
        let e = open_regular(&d).unwrap_err();
        assert!(
            e.to_string().contains("not a regular file (directory)"),
            "{e}"
        );
        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = read_regular_file(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("not a regular file (FIFO)"), "{e}");
        let e = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        std::fs::write(d.join("f"), b"abc").unwrap();
        assert_eq!(read_regular_file(&d.join("f"), 3).unwrap().unwrap(), b"abc");
        assert!(read_regular_file(&d.join("f"), 2).unwrap().is_none());
        // Without following: a symlink to a regular file or to a device is refused as a
        // symlink; the regular file itself still opens.
        std::os::unix::fs::symlink(d.join("f"), d.join("to-f")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join("to-zero")).unwrap();
        assert!(open_regular(&d.join("to-f")).is_ok());
        for l in ["to-f", "to-zero"] {
            let e = open_regular_nofollow(&d.join(l)).unwrap_err();
            assert!(
                e.to_string().contains("not a regular file (symlink)"),
                "{e}"
            );
        }
        assert!(open_regular_nofollow(&d.join("f")).is_ok());
        let e = open_regular_nofollow(&fifo).unwrap_err();
        assert!(e.to_string().contains("not a regular file (FIFO)"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("qual-json-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        d
    }
}
