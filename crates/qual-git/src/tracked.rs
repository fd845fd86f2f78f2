//! Reading tracked worktree files: the one place that opens a file the index tracks, for the
//! worktree comparison ([`crate::status`]) and for the source-tree digest (`qual-probe`).
//!
//! A qualification case has just had write access to the worktree, so a tracked path may now
//! be a FIFO (an open would block forever), a symlink to `/dev/zero` (a read never ends), a
//! socket, a directory, or a sparse file of a terabyte. Every tracked file is therefore read
//! under these rules, and anything else is refused with a reason that reads after
//! `cannot read <path>: `:
//! - it is opened with `O_NONBLOCK` and checked with `fstat` on the opened descriptor (through
//!   [`qual_json::file`], the home of that check): only a regular file is read, never a FIFO,
//!   socket, device or directory;
//! - a symlink at the path is refused (`O_NOFOLLOW`) unless the caller follows it on purpose
//!   (the source-tree digest reads a mode-`120000` entry through its link, as the original
//!   does); a followed link must still end at a regular file;
//! - bytes are bounded: a file larger than [`MAX_FILE_BYTES`] is refused from its size alone,
//!   without reading, and every file read under one [`Budget`] shares [`MAX_TOTAL_BYTES`];
//!   a file that grows while it is read is cut off at the same limits;
//! - time is bounded: reading stops with an error once the budget's deadline
//!   ([`DEFAULT_DEADLINE`]) has passed, checked before every read.
//!
//! The limits are far above any source tree (the largest file of a real checkout is a few
//! megabytes; a repository that tracks a file above 1 GiB cannot be qualified).

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use qual_json::file::OpenError;

/// The largest tracked file that is read (1 GiB).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The most bytes read under one [`Budget`] (8 GiB).
pub const MAX_TOTAL_BYTES: u64 = 8 << 30;

/// How long one [`Budget`] lasts: every tracked file of one comparison or digest must have
/// been read by then.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);

/// Why a tracked file was not read; displays as the reason after `cannot read <path>: `.
#[derive(Debug, thiserror::Error)]
pub enum TrackedError {
    /// Not a regular file (or, unfollowed, a symlink).
    #[error("not a regular file ({kind})")]
    NotRegular {
        /// `directory`, `symlink`, `FIFO`, `socket`, `character device`, `block device`.
        kind: &'static str,
    },
    /// Larger than [`MAX_FILE_BYTES`] (or the budget's file limit).
    #[error("{bytes} bytes, more than the {limit}-byte limit for one tracked file")]
    TooLarge {
        /// The size seen (at least; a growing file is cut off).
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The files read under one budget exceed its total.
    #[error("the tracked files together exceed the {limit}-byte limit")]
    TreeTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The budget's deadline passed.
    #[error("tracked files were not read within the {seconds} s deadline")]
    Timeout {
        /// The deadline.
        seconds: u64,
    },
    /// Opening or reading failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Limits shared by every file read for one comparison or digest (safe to share between
/// threads).
#[derive(Debug)]
pub struct Budget {
    max_file: u64,
    max_total: u64,
    left: AtomicU64,
    deadline: Duration,
    until: Instant,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(MAX_FILE_BYTES, MAX_TOTAL_BYTES, DEFAULT_DEADLINE)
    }
}

impl Budget {
    /// A budget that starts now.
    pub fn new(max_file: u64, max_total: u64, deadline: Duration) -> Budget {
        Budget {
            max_file,
            max_total,
            left: AtomicU64::new(max_total),
            deadline,
            until: Instant::now() + deadline,
        }
    }

    fn check_time(&self) -> Result<(), TrackedError> {
        if Instant::now() >= self.until {
            return Err(TrackedError::Timeout {
                seconds: self.deadline.as_secs(),
            });
        }
        Ok(())
    }

    /// Takes `n` bytes from the total.
    fn take(&self, n: u64) -> Result<(), TrackedError> {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .map(|_| ())
            .map_err(|_| TrackedError::TreeTooLarge {
                limit: self.max_total,
            })
    }
}

/// A tracked file opened for reading, with the size `fstat` gave.
#[derive(Debug)]
pub struct Opened {
    file: File,
    /// The size of the opened file.
    pub len: u64,
}

/// Opens the tracked file at `path` under the rules of the module docs: a regular file of at
/// most the budget's file limit; a symlink only when `follow_symlink`.
pub fn open(path: &Path, follow_symlink: bool, budget: &Budget) -> Result<Opened, TrackedError> {
    budget.check_time()?;
    let opened = if follow_symlink {
        qual_json::file::open_regular(path)
    } else {
        qual_json::file::open_regular_nofollow(path)
    };
    let file = opened.map_err(|e| match e {
        OpenError::NotRegular { kind, .. } => TrackedError::NotRegular { kind },
        OpenError::Io { source, .. } => TrackedError::Io(source),
    })?;
    let len = file.metadata()?.len();
    if len > budget.max_file {
        return Err(TrackedError::TooLarge {
            bytes: len,
            limit: budget.max_file,
        });
    }
    Ok(Opened { file, len })
}

impl Opened {
    /// Reads the file to its end through `buf`, handing every chunk to `sink`, and returns the
    /// number of bytes read (which differs from [`Opened::len`] when the file changed size).
    pub fn read_all(
        mut self,
        budget: &Budget,
        buf: &mut [u8],
        mut sink: impl FnMut(&[u8]),
    ) -> Result<u64, TrackedError> {
        budget.take(self.len)?;
        let mut total = 0u64;
        loop {
            budget.check_time()?;
            let n = match self.file.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            total += n as u64;
            if total > budget.max_file {
                return Err(TrackedError::TooLarge {
                    bytes: total,
                    limit: budget.max_file,
                });
            }
            if total > self.len {
                budget.take(n as u64)?;
            }
            sink(&buf[..n]);
        }
        Ok(total)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make a FIFO with mkfifo
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_everything_else_refused_by_kind() {
        let d = tempfile::tempdir().unwrap();
        let b = Budget::default();
        let mut buf = vec![0u8; 4];
        std::fs::write(d.path().join("f"), b"0123456789").unwrap();
        let mut seen = Vec::new();
        let o = open(&d.path().join("f"), false, &b).unwrap();
        assert_eq!(o.len, 10);
        assert_eq!(
            o.read_all(&b, &mut buf, |c| seen.extend_from_slice(c))
                .unwrap(),
            10
        );
        assert_eq!(seen, b"0123456789");

        std::os::unix::fs::symlink("/dev/zero", d.path().join("zero")).unwrap();
        std::os::unix::fs::symlink(d.path().join("f"), d.path().join("to-f")).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(d.path().join("fifo"))
            .status()
            .unwrap()
            .success());
        let kind = |name: &str, follow: bool| match open(&d.path().join(name), follow, &b) {
            Err(TrackedError::NotRegular { kind }) => kind,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(kind("zero", false), "symlink");
        assert_eq!(kind("zero", true), "character device");
        assert_eq!(kind("to-f", false), "symlink");
        assert_eq!(kind("fifo", false), "FIFO");
        assert_eq!(kind("fifo", true), "FIFO");
        assert!(open(&d.path().join("to-f"), true, &b).is_ok());
    }

    #[test]
    fn sizes_totals_and_the_deadline_are_bounded() {
        let d = tempfile::tempdir().unwrap();
        let sparse = d.path().join("sparse");
        File::create(&sparse)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let b = Budget::default();
        let e = open(&sparse, false, &b).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} bytes, more than the {MAX_FILE_BYTES}-byte limit for one tracked file",
                MAX_FILE_BYTES + 1
            )
        );

        std::fs::write(d.path().join("a"), b"12345").unwrap();
        let small = Budget::new(100, 8, Duration::from_secs(60));
        let mut buf = vec![0u8; 16];
        let read = |b: &Budget, buf: &mut [u8]| {
            open(&d.path().join("a"), false, b).and_then(|o| o.read_all(b, buf, |_| {}))
        };
        assert_eq!(read(&small, &mut buf).unwrap(), 5);
        assert!(matches!(
            read(&small, &mut buf),
            Err(TrackedError::TreeTooLarge { limit: 8 })
        ));

        let expired = Budget::new(100, 100, Duration::ZERO);
        assert!(matches!(
            read(&expired, &mut buf),
            Err(TrackedError::Timeout { seconds: 0 })
        ));
    }
}
