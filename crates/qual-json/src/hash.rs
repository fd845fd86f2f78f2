//! Streaming SHA-256 of files and readers: the one hasher behind every `sha256:<hex>` of
//! content that is too large (or too untrusted) to read into memory first.
//!
//! [`sha256_file`] opens the path through [`crate::file::open_regular`] (a FIFO, socket or
//! device is refused, never read), streams it in 1 MiB blocks and, with a limit, stops as soon
//! as the file is larger than the limit. [`Sha256Stream`] is the incremental form for callers
//! that feed bytes themselves (a header first, a bounded reader's callback…).

use crate::file::{open_regular, OpenError};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// Incremental SHA-256 whose result is spelled `sha256:<hex>` ([`Sha256Stream::finish`]) or
/// bare hex ([`Sha256Stream::finish_hex`]).
#[derive(Clone, Default)]
pub struct Sha256Stream(Sha256);

impl Sha256Stream {
    /// A fresh hash.
    pub fn new() -> Sha256Stream {
        Sha256Stream(Sha256::new())
    }

    /// Feeds bytes.
    pub fn update(&mut self, bytes: impl AsRef<[u8]>) {
        self.0.update(bytes.as_ref());
    }

    /// `sha256:<64 lowercase hex digits>`.
    pub fn finish(self) -> String {
        format!("sha256:{}", self.finish_hex())
    }

    /// The 64 lowercase hex digits alone.
    pub fn finish_hex(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// A file's content digest and the number of bytes hashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHash {
    /// `sha256:<hex>` of the bytes.
    pub sha256: String,
    /// How many bytes were read.
    pub bytes: u64,
}

/// Why a file could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    /// The path is not a readable regular file.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Reading failed part way.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path as given (control characters escaped).
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than the limit (nothing past the limit was read).
    #[error("cannot hash {path}: file is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The path as given (control characters escaped).
        path: String,
        /// The byte limit in force.
        limit: u64,
    },
}

impl From<HashError> for std::io::Error {
    fn from(e: HashError) -> Self {
        match e {
            HashError::Open(e) => e.into(),
            HashError::Read { source, .. } => source,
            e @ HashError::TooLarge { .. } => std::io::Error::other(e.to_string()),
        }
    }
}

/// Streams `r` through SHA-256 using `buf` (retrying interrupted reads). With `max_bytes`,
/// stops after `max_bytes + 1` bytes and returns `Ok(None)` when there were more than
/// `max_bytes`.
pub fn sha256_reader(
    mut r: impl Read,
    buf: &mut [u8],
    max_bytes: Option<u64>,
) -> std::io::Result<Option<FileHash>> {
    let mut h = Sha256Stream::new();
    let mut total = 0u64;
    loop {
        let want = match max_bytes {
            Some(max) => (max + 1 - total.min(max + 1)).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        if want == 0 {
            return Ok(None);
        }
        let n = match r.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
        total += n as u64;
    }
    if max_bytes.is_some_and(|max| total > max) {
        return Ok(None);
    }
    Ok(Some(FileHash {
        sha256: h.finish(),
        bytes: total,
    }))
}

/// Streams the regular file at `path` through SHA-256 (see the module docs); `max_bytes`
/// bounds how much is read.
pub fn sha256_file(path: &Path, max_bytes: Option<u64>) -> Result<FileHash, HashError> {
    let f = open_regular(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let shown = || crate::escape::escape_path(path);
    match sha256_reader(f, &mut buf, max_bytes) {
        Ok(Some(h)) => Ok(h),
        Ok(None) => Err(HashError::TooLarge {
            path: shown(),
            limit: max_bytes.unwrap_or(u64::MAX),
        }),
        Err(source) => Err(HashError::Read {
            path: shown(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_match_the_one_shot_digest_and_honour_the_limit() {
        let data = vec![7u8; 3000];
        let mut buf = vec![0u8; 256];
        let h = sha256_reader(&data[..], &mut buf, None).unwrap().unwrap();
        assert_eq!(h.sha256, crate::sha256_prefixed(&data));
        assert_eq!(h.bytes, 3000);
        let at = sha256_reader(&data[..], &mut buf, Some(3000)).unwrap();
        assert_eq!(at, Some(h));
        assert_eq!(
            sha256_reader(&data[..], &mut buf, Some(2999)).unwrap(),
            None
        );
        assert_eq!(
            sha256_reader(&data[..0], &mut buf, Some(0))
                .unwrap()
                .unwrap()
                .bytes,
            0
        );
        let mut s = Sha256Stream::new();
        s.update(b"ab");
        s.update("c");
        assert_eq!(s.finish(), crate::sha256_prefixed(b"abc"));
    }

    #[test]
    fn files_are_hashed_and_devices_refused() {
        let p = std::env::temp_dir().join(format!("qual-json-hash-{}", std::process::id()));
        std::fs::write(&p, b"abc").unwrap();
        let h = sha256_file(&p, None).unwrap();
        assert_eq!(h.sha256, crate::sha256_prefixed(b"abc"));
        let e = sha256_file(&p, Some(2)).unwrap_err();
        assert!(
            e.to_string().contains("larger than the limit of 2 bytes"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
        let e = sha256_file(Path::new("/dev/zero"), None).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
    }
}
