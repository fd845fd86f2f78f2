//! Exclusive creation of output files: the one place that decides how a document is written
//! without ever replacing a file.
//!
//! Two ways, chosen by what a reader may see:
//! - [`create_new`] / [`write_new`]: `O_CREAT | O_EXCL` on the final name (an existing file,
//!   or a dangling symlink there, is refused). A reader may see the file while it is being
//!   written; used for logs, gates and documents whose readers wait for the writer.
//! - [`publish_exclusive`]: the bytes go to a temporary file `.<name>.<unique>.tmp` in the
//!   target directory, which is `fsync`ed and hard-linked to the final name (the link fails
//!   when the name exists: nothing is ever replaced); the temporary name is removed and the
//!   directory `fsync`ed. A reader sees either no file or the complete file; a crash at any
//!   point leaves at most a hidden `.tmp` file, never a partial final file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why [`publish_exclusive`] did not publish.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The final name already exists (a dangling symlink counts).
    #[error("refusing to overwrite existing file: {}", .0.display())]
    Exists(PathBuf),
    /// The path has no file name.
    #[error("invalid output path: {}", .0.display())]
    BadPath(PathBuf),
    /// An I/O step failed.
    #[error("cannot write {}: {source}", .path.display())]
    Io {
        /// The final path.
        path: PathBuf,
        /// The file or directory the failed step acted on (the temporary file, the final
        /// name or the directory).
        at: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// How [`publish_exclusive`] creates the file.
#[derive(Clone, Copy, Debug)]
pub struct PublishOptions {
    /// The permission bits of the new file (before the umask); `None` is the default `0o666`.
    pub mode: Option<u32>,
    /// Whether a failure to `fsync` the directory after the link is an error (`false`: the
    /// file is published and the directory sync is best effort).
    pub require_dir_sync: bool,
}

impl Default for PublishOptions {
    /// Mode `0o644`, directory sync required (the runner's evidence).
    fn default() -> Self {
        PublishOptions {
            mode: Some(0o644),
            require_dir_sync: true,
        }
    }
}

/// Opens `path` for writing, creating it; fails with `AlreadyExists` if anything is there.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Creates `path` exclusively (as [`create_new`]) with exactly `bytes`, then `fsync`s it.
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = create_new(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Publishes `bytes` as `path`, never replacing an existing file (see the module docs).
pub fn publish_exclusive(
    path: &Path,
    bytes: &[u8],
    opts: PublishOptions,
) -> Result<(), PublishError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| PublishError::BadPath(path.to_path_buf()))?;
    let io = |at: &Path| {
        let at = at.to_path_buf();
        move |source| PublishError::Io {
            path: path.to_path_buf(),
            at,
            source,
        }
    };
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(PublishError::Exists(path.to_path_buf()));
    }
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        unique_suffix()
    ));
    let result = write_temp(&tmp, bytes, opts.mode)
        .map_err(io(&tmp))
        .and_then(|()| match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(PublishError::Exists(path.to_path_buf()))
            }
            Err(e) => Err(io(path)(e)),
        });
    let _ = std::fs::remove_file(&tmp);
    result?;
    let synced = File::open(dir).and_then(|d| d.sync_all());
    if opts.require_dir_sync {
        synced.map_err(io(dir))?;
    }
    Ok(())
}

fn write_temp(tmp: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    if let Some(mode) = mode {
        o.mode(mode);
    }
    let mut f = o.open(tmp)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests read back what they published
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "qual-json-publish-{}-{}",
            std::process::id(),
            unique_suffix()
        ));
        std::fs::create_dir(&d).unwrap();
        d
    }

    #[test]
    fn publishing_never_replaces_and_leaves_no_temp() {
        let d = dir();
        let p = d.join("r.json");
        publish_exclusive(&p, b"one", PublishOptions::default()).unwrap();
        let e = publish_exclusive(&p, b"two", PublishOptions::default()).unwrap_err();
        assert!(matches!(e, PublishError::Exists(_)));
        assert!(e
            .to_string()
            .starts_with("refusing to overwrite existing file"));
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        // A dangling symlink at the final name also counts as existing.
        let l = d.join("l.json");
        std::os::unix::fs::symlink(d.join("nowhere"), &l).unwrap();
        assert!(matches!(
            publish_exclusive(&l, b"x", PublishOptions::default()),
            Err(PublishError::Exists(_))
        ));
        assert!(!d.join("nowhere").exists());
        let missing = d.join("no/such/r.json");
        assert!(matches!(
            publish_exclusive(&missing, b"x", PublishOptions::default()),
            Err(PublishError::Io { .. })
        ));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn create_new_refuses_an_existing_name() {
        let d = dir();
        let p = d.join("f");
        write_new(&p, b"a").unwrap();
        let e = write_new(&p, b"b").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&p).unwrap(), b"a");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
