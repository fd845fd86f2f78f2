//! Model identity: the fingerprint of weights, config, tokenizer and chat template.
//!
//! The fingerprint object is `{id, path, weight_files[{path, sha256, bytes}], config_hash,
//! tokenizer_hash, chat_template_hash}` (the receipt's `model`).
//!
//! Rules:
//! - the root is the lexically absolute model path (not resolved); it must not be a symlink
//!   and must be a directory; `id` is the given id or the root's base name;
//! - every input path is relative, normalized, without `..`, `.`, backslash or NUL; each
//!   component is checked with `lstat` (no symlinks, parents are directories) and the file is
//!   opened `O_NOFOLLOW` and must be a regular file whose `fstat` identity equals the `lstat`;
//! - shards: `model.safetensors.index.json` (its `weight_map` values, unique, first-seen order)
//!   when present, else `model.safetensors`, else every `*.safetensors` entry (a bare
//!   `.safetensors` is not a shard) sorted by raw file-name bytes; two shards that are the same
//!   file (dev, inode) and empty shards are refused; `weight_files` are sorted by path;
//! - extension beyond Kiln v1 (which only knows safetensors): a directory with no safetensors
//!   at all fingerprints its `*.gguf` files instead (llama.cpp-style models), same rules;
//!   Kiln's own model directories always hold safetensors, so their fingerprints are unchanged;
//! - `config.json` and `tokenizer.json` are required; `chat_template_hash` hashes
//!   `chat_template.jinja` (must be UTF-8) or else the `chat_template` string of
//!   `tokenizer_config.json` (as UTF-8), or is null.
//!
//! # Integrity: a change check instead of a second read
//!
//! The original implementation read every input twice. This module reads each input once and
//! instead holds its identity across the read: (device, inode, file type, size, mtime in ns,
//! ctime in ns) from `fstat` right after opening must equal both `fstat` on the same
//! descriptor and `lstat` on the path after the last byte was hashed, the number of bytes read
//! must equal the size, and the root directory's identity must be unchanged at the end. Any
//! write to a file during the read moves its ctime (which user space cannot set back), so a
//! change is caught as reliably as by re-reading, at half the I/O. A failure reads
//! `<path> changed while it was being fingerprinted`.
//!
//! Inputs are hashed in parallel on up to [`HASH_THREADS`] threads, 8 MiB at a time.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use qual_json::{Object, Value};

/// Threads used to hash model inputs.
pub const HASH_THREADS: usize = 2;
/// Read chunk size.
pub const CHUNK_BYTES: usize = 8 * 1024 * 1024;
const INDEX_FILE: &str = "model.safetensors.index.json";
const METADATA_LIMIT: usize = 64 * 1024 * 1024;

/// One weight shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightFile {
    /// Path relative to the model root.
    pub path: String,
    /// `sha256:<hex>` of the content.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// The receipt's `model` object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFingerprint {
    /// Model id.
    pub id: String,
    /// Absolute (lexical) model directory.
    pub path: String,
    /// Shards sorted by path.
    pub weight_files: Vec<WeightFile>,
    /// `sha256:` of `config.json`.
    pub config_hash: String,
    /// `sha256:` of `tokenizer.json`.
    pub tokenizer_hash: String,
    /// `sha256:` of the chat template, or `None`.
    pub chat_template_hash: Option<String>,
}

impl ModelFingerprint {
    /// The fingerprint as a JSON value (the receipt's `model` shape).
    pub fn to_value(&self) -> Value {
        let mut o = Object::new();
        o.insert("id", Value::from(self.id.as_str()));
        o.insert("path", Value::from(self.path.as_str()));
        o.insert(
            "weight_files",
            Value::Array(
                self.weight_files
                    .iter()
                    .map(|w| {
                        let mut f = Object::new();
                        f.insert("path", Value::from(w.path.as_str()));
                        f.insert("sha256", Value::from(w.sha256.as_str()));
                        f.insert("bytes", Value::from(w.bytes));
                        Value::Object(f)
                    })
                    .collect(),
            ),
        );
        o.insert("config_hash", Value::from(self.config_hash.as_str()));
        o.insert("tokenizer_hash", Value::from(self.tokenizer_hash.as_str()));
        o.insert(
            "chat_template_hash",
            self.chat_template_hash
                .as_deref()
                .map(Value::from)
                .unwrap_or(Value::Null),
        );
        Value::Object(o)
    }

    /// Total bytes hashed for the weights.
    pub fn weight_bytes(&self) -> u64 {
        self.weight_files.iter().map(|w| w.bytes).sum()
    }
}

/// Why a fingerprint could not be taken. The message reads after "model fingerprint failed: ".
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The root is unusable.
    #[error("model path {path} {reason}")]
    Root {
        /// The root as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// An input path or file is unusable.
    #[error("{path} {reason}")]
    Input {
        /// Relative input path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A shard named by the index is unusable.
    #[error("shard {} referenced by {INDEX_FILE} is invalid: {reason}", qual_json::show::quote(.shard))]
    Shard {
        /// The shard path.
        shard: String,
        /// Why.
        reason: String,
    },
    /// Any other violation.
    #[error("{0}")]
    Other(String),
}

/// Identity held across a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    mode: u32,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            mode: m.mode() & libc::S_IFMT,
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
        }
    }
}

struct Opened {
    rel: String,
    abs: PathBuf,
    file: File,
    identity: Identity,
}

/// Lexically absolute path: joins the current directory and removes `.` and `..` the way
/// Python's `os.path.abspath` does (without resolving symlinks).
pub fn lexical_absolute(p: &Path) -> std::io::Result<PathBuf> {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
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
    Ok(out)
}

fn check_relative(rel: &str) -> Result<(), String> {
    if rel.is_empty() {
        return Err("must be a non-empty relative path".into());
    }
    if rel.contains('\0') || rel.contains('\\') {
        return Err("must not contain NUL or backslash".into());
    }
    if rel.starts_with('/') {
        return Err("must stay inside the model directory (absolute path)".into());
    }
    for part in rel.split('/') {
        if part == ".." {
            return Err("must stay inside the model directory".into());
        }
        if part.is_empty() || part == "." {
            return Err("must be a normalized relative path".into());
        }
    }
    Ok(())
}

fn open_input(root: &Path, rel: &str) -> Result<Opened, ModelError> {
    let err = |reason: String| ModelError::Input {
        path: rel.to_string(),
        reason,
    };
    check_relative(rel).map_err(err)?;
    let parts: Vec<&str> = rel.split('/').collect();
    let mut cur = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        cur.push(part);
        let m = std::fs::symlink_metadata(&cur)
            .map_err(|e| err(format!("cannot be inspected: {e}")))?;
        if m.file_type().is_symlink() {
            return Err(err("must not use a symlink".into()));
        }
        let last = i + 1 == parts.len();
        if !last && !m.is_dir() {
            return Err(err("has a parent that is not a directory".into()));
        }
        if last && !m.is_file() {
            return Err(err("is not a regular file".into()));
        }
    }
    let lst =
        std::fs::symlink_metadata(&cur).map_err(|e| err(format!("cannot be inspected: {e}")))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        // O_NONBLOCK: a file swapped for a FIFO after the lstat above never blocks the open.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&cur)
        .map_err(|e| err(format!("cannot be opened: {e}")))?;
    let fm = file
        .metadata()
        .map_err(|e| err(format!("cannot be inspected: {e}")))?;
    if !fm.is_file() {
        return Err(err("is not a regular file".into()));
    }
    let identity = Identity::of(&fm);
    if Identity::of(&lst) != identity {
        return Err(err("changed while it was being fingerprinted".into()));
    }
    Ok(Opened {
        rel: rel.to_string(),
        abs: cur,
        file,
        identity,
    })
}

fn exists_nofollow(root: &Path, rel: &str) -> bool {
    std::fs::symlink_metadata(root.join(rel)).is_ok()
}

fn read_small(o: &mut Opened) -> Result<Vec<u8>, ModelError> {
    if o.identity.size as usize > METADATA_LIMIT {
        return Err(ModelError::Input {
            path: o.rel.clone(),
            reason: format!("exceeds the {METADATA_LIMIT} byte metadata limit"),
        });
    }
    let mut buf = Vec::with_capacity(o.identity.size as usize);
    (&o.file)
        .take(METADATA_LIMIT as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ModelError::Input {
            path: o.rel.clone(),
            reason: format!("cannot be read: {e}"),
        })?;
    verify_unchanged(o, buf.len() as u64)?;
    Ok(buf)
}

fn verify_unchanged(o: &Opened, read: u64) -> Result<(), ModelError> {
    let changed = || ModelError::Input {
        path: o.rel.clone(),
        reason: "changed while it was being fingerprinted".into(),
    };
    let fd_now = o.file.metadata().map_err(|_| changed())?;
    let path_now = std::fs::symlink_metadata(&o.abs).map_err(|_| changed())?;
    if Identity::of(&fd_now) != o.identity
        || Identity::of(&path_now) != o.identity
        || read != o.identity.size
    {
        return Err(changed());
    }
    Ok(())
}

fn discover_shards(root: &Path) -> Result<Vec<String>, ModelError> {
    if exists_nofollow(root, INDEX_FILE) {
        let mut idx = open_input(root, INDEX_FILE)?;
        let bytes = read_small(&mut idx)?;
        let v = qual_json::from_slice(&bytes).map_err(|e| ModelError::Input {
            path: INDEX_FILE.into(),
            reason: format!("is not strict JSON: {e}"),
        })?;
        let Some(map) = v.get("weight_map").and_then(Value::as_object) else {
            return Err(ModelError::Input {
                path: INDEX_FILE.into(),
                reason: "weight_map must be an object".into(),
            });
        };
        let mut shards: Vec<String> = Vec::new();
        for (_, target) in map.iter() {
            let Some(s) = target.as_str() else {
                return Err(ModelError::Input {
                    path: INDEX_FILE.into(),
                    reason: "weight_map values must be strings".into(),
                });
            };
            if !shards.iter().any(|x| x == s) {
                shards.push(s.to_string());
            }
        }
        if shards.is_empty() {
            return Err(ModelError::Input {
                path: INDEX_FILE.into(),
                reason: "weight_map names no shards".into(),
            });
        }
        return Ok(shards);
    }
    if exists_nofollow(root, "model.safetensors") {
        return Ok(vec!["model.safetensors".into()]);
    }
    let mut names: Vec<Vec<u8>> = std::fs::read_dir(root)
        .map_err(|e| ModelError::Root {
            path: root.display().to_string(),
            reason: format!("cannot be listed: {e}"),
        })?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().as_bytes().to_vec())
        .filter(|n| n.len() > ".safetensors".len() && n.ends_with(b".safetensors"))
        .collect();
    names.sort();
    if names.is_empty() {
        names = std::fs::read_dir(root)
            .map_err(|e| ModelError::Root {
                path: root.display().to_string(),
                reason: format!("cannot be listed: {e}"),
            })?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().as_bytes().to_vec())
            .filter(|n| n.len() > ".gguf".len() && n.ends_with(b".gguf"))
            .collect();
        names.sort();
    }
    if names.is_empty() {
        return Err(ModelError::Other(format!(
            "no .safetensors (or .gguf) files found in {}",
            root.display()
        )));
    }
    names
        .into_iter()
        .map(|n| {
            String::from_utf8(n).map_err(|_| ModelError::Other("shard name is not UTF-8".into()))
        })
        .collect()
}

/// Hashes opened files in parallel; returns `(bytes, sha256)` per file in input order.
fn hash_opened(files: &[Opened]) -> Result<Vec<(u64, String)>, ModelError> {
    let next = AtomicUsize::new(0);
    type Slot = Mutex<Option<Result<(u64, String), ModelError>>>;
    let slots: Vec<Slot> = files.iter().map(|_| Mutex::new(None)).collect();
    // Largest first so the two threads finish close together.
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(files[i].identity.size));
    let threads = HASH_THREADS.min(files.len()).max(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut buf = vec![0u8; CHUNK_BYTES];
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= order.len() {
                        break;
                    }
                    let i = order[k];
                    let r = hash_one(&files[i], &mut buf);
                    *slots[i].lock().expect("slot lock") = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .expect("slot lock")
                .expect("every file hashed")
        })
        .collect()
}

fn hash_one(o: &Opened, buf: &mut [u8]) -> Result<(u64, String), ModelError> {
    let h = qual_json::sha256_reader(&o.file, buf, None)
        .map_err(|e| ModelError::Input {
            path: o.rel.clone(),
            reason: format!("cannot be read: {e}"),
        })?
        .expect("no limit");
    verify_unchanged(o, h.bytes)?;
    Ok((h.bytes, h.sha256))
}

fn root_identity(root: &Path) -> Result<Identity, ModelError> {
    let shown = root.display().to_string();
    let m = std::fs::symlink_metadata(root).map_err(|e| ModelError::Root {
        path: shown.clone(),
        reason: format!("cannot be inspected: {e}"),
    })?;
    if m.file_type().is_symlink() {
        return Err(ModelError::Root {
            path: shown,
            reason: "must not be a symlink".into(),
        });
    }
    if !m.is_dir() {
        return Err(ModelError::Root {
            path: shown,
            reason: "is not a directory".into(),
        });
    }
    // Open it O_DIRECTORY|O_NOFOLLOW to prove it is a real directory at this moment.
    let c = CString::new(root.as_os_str().as_bytes()).map_err(|_| ModelError::Root {
        path: shown.clone(),
        reason: "contains NUL".into(),
    })?;
    // SAFETY: `c` is a valid NUL-terminated path; the descriptor is closed right away.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        )
    };
    if fd < 0 {
        return Err(ModelError::Root {
            path: shown,
            reason: format!("cannot be opened: {}", std::io::Error::last_os_error()),
        });
    }
    // SAFETY: `fd` was returned by `open` above and is owned here.
    unsafe { libc::close(fd) };
    Ok(Identity::of(&m))
}

/// The weight shards, opened and held: none empty, no two the same file.
fn open_shards(root: &Path) -> Result<Vec<Opened>, ModelError> {
    let shard_names = discover_shards(root)?;
    let from_index = exists_nofollow(root, INDEX_FILE);
    let mut shards = Vec::with_capacity(shard_names.len());
    for name in &shard_names {
        let o = open_input(root, name).map_err(|e| {
            if from_index {
                ModelError::Shard {
                    shard: name.clone(),
                    reason: e.to_string(),
                }
            } else {
                e
            }
        })?;
        if o.identity.size == 0 {
            return Err(ModelError::Input {
                path: name.clone(),
                reason: "weight file is empty".into(),
            });
        }
        if let Some(prev) = shards.iter().find(|p: &&Opened| {
            p.identity.dev == o.identity.dev && p.identity.ino == o.identity.ino
        }) {
            return Err(ModelError::Other(format!(
                "weight paths {} and {} reference the same file",
                qual_json::show::quote(&prev.rel),
                qual_json::show::quote(&o.rel)
            )));
        }
        shards.push(o);
    }
    Ok(shards)
}

/// The chat template's source: the standalone file (opened and held), else the digest of
/// `tokenizer_config.json`'s `chat_template` string (`Some(None)`: that file has none).
#[allow(clippy::type_complexity)]
fn chat_template_source(
    root: &Path,
) -> Result<(Option<Opened>, Option<Option<String>>), ModelError> {
    let mut template_file = None;
    let mut template_from_config: Option<Option<String>> = None;
    if exists_nofollow(root, "chat_template.jinja") {
        template_file = Some(open_input(root, "chat_template.jinja")?);
    } else if exists_nofollow(root, "tokenizer_config.json") {
        let mut tc = open_input(root, "tokenizer_config.json")?;
        let bytes = read_small(&mut tc)?;
        let v = qual_json::from_slice(&bytes).map_err(|e| ModelError::Input {
            path: "tokenizer_config.json".into(),
            reason: format!("is not strict JSON: {e}"),
        })?;
        let Some(obj) = v.as_object() else {
            return Err(ModelError::Input {
                path: "tokenizer_config.json".into(),
                reason: "must be a JSON object".into(),
            });
        };
        template_from_config = Some(match obj.get("chat_template") {
            None => None,
            Some(Value::String(s)) => Some(qual_json::sha256_prefixed(s.as_bytes())),
            Some(_) => {
                return Err(ModelError::Input {
                    path: "tokenizer_config.json".into(),
                    reason: "chat_template must be a string".into(),
                })
            }
        });
    }
    Ok((template_file, template_from_config))
}

/// The standalone template's digest `hash`, once its bytes are known to be UTF-8 and
/// unchanged (re-read: templates are small, checked against the same held identity).
fn checked_template_hash(t: &Opened, hash: &str) -> Result<String, ModelError> {
    let mut text = Vec::new();
    qual_json::open_regular(&t.abs)
        .map_err(std::io::Error::from)
        .and_then(|mut f| f.read_to_end(&mut text))
        .map_err(|e| ModelError::Input {
            path: t.rel.clone(),
            reason: format!("cannot be read: {e}"),
        })?;
    verify_unchanged(t, text.len() as u64)?;
    if std::str::from_utf8(&text).is_err() {
        return Err(ModelError::Input {
            path: t.rel.clone(),
            reason: "must be valid UTF-8".into(),
        });
    }
    if qual_json::sha256_prefixed(&text) != hash {
        return Err(ModelError::Input {
            path: t.rel.clone(),
            reason: "changed while it was being fingerprinted".into(),
        });
    }
    Ok(hash.to_string())
}

/// Fingerprints the model directory at `model_path`.
pub fn fingerprint(
    model_path: &Path,
    model_id: Option<&str>,
) -> Result<ModelFingerprint, ModelError> {
    let root = lexical_absolute(model_path).map_err(|e| ModelError::Root {
        path: model_path.display().to_string(),
        reason: format!("cannot be made absolute: {e}"),
    })?;
    let root_before = root_identity(&root)?;
    let id = match model_id {
        Some(id) => id.to_string(),
        None => root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    if id.is_empty() {
        return Err(ModelError::Other("model id must be non-empty".into()));
    }
    let path = root
        .to_str()
        .ok_or_else(|| ModelError::Root {
            path: root.display().to_string(),
            reason: "is not UTF-8".into(),
        })?
        .to_string();

    let shards = open_shards(&root)?;
    let config = open_input(&root, "config.json")?;
    let tokenizer = open_input(&root, "tokenizer.json")?;

    let (template_file, template_from_config) = chat_template_source(&root)?;

    let mut all: Vec<Opened> = shards;
    let n_shards = all.len();
    all.push(config);
    all.push(tokenizer);
    let has_template_file = template_file.is_some();
    if let Some(t) = template_file {
        all.push(t);
    }
    let hashes = hash_opened(&all)?;

    let mut weight_files: Vec<WeightFile> = all[..n_shards]
        .iter()
        .zip(&hashes[..n_shards])
        .map(|(o, (bytes, sha))| WeightFile {
            path: o.rel.clone(),
            sha256: sha.clone(),
            bytes: *bytes,
        })
        .collect();
    weight_files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let config_hash = hashes[n_shards].1.clone();
    let tokenizer_hash = hashes[n_shards + 1].1.clone();
    let chat_template_hash = if has_template_file {
        Some(checked_template_hash(
            &all[n_shards + 2],
            &hashes[n_shards + 2].1,
        )?)
    } else {
        template_from_config.flatten()
    };
    if root_identity(&root)? != root_before {
        return Err(ModelError::Root {
            path: path.clone(),
            reason: "changed while it was being fingerprinted".into(),
        });
    }
    Ok(ModelFingerprint {
        id,
        path,
        weight_files,
        config_hash,
        tokenizer_hash,
        chat_template_hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("config.json"), b"{\"a\":1}").unwrap();
        std::fs::write(d.path().join("tokenizer.json"), b"{\"t\":2}").unwrap();
        std::fs::write(d.path().join("model.safetensors"), b"weights").unwrap();
        d
    }

    #[test]
    fn single_file_fingerprint_has_the_receipt_shape() {
        let d = model_dir();
        std::fs::write(d.path().join("chat_template.jinja"), "{{ x }}").unwrap();
        let f = fingerprint(d.path(), None).unwrap();
        assert_eq!(f.id, d.path().file_name().unwrap().to_str().unwrap());
        assert_eq!(f.path, d.path().to_str().unwrap());
        assert_eq!(f.weight_files.len(), 1);
        assert_eq!(f.weight_files[0].path, "model.safetensors");
        assert_eq!(f.weight_files[0].bytes, 7);
        assert_eq!(
            f.weight_files[0].sha256,
            qual_json::sha256_prefixed(b"weights")
        );
        assert_eq!(f.config_hash, qual_json::sha256_prefixed(b"{\"a\":1}"));
        assert_eq!(f.tokenizer_hash, qual_json::sha256_prefixed(b"{\"t\":2}"));
        assert_eq!(
            f.chat_template_hash,
            Some(qual_json::sha256_prefixed(b"{{ x }}"))
        );
        assert_eq!(f.to_value().as_object().unwrap().len(), 6);
    }

    #[test]
    fn index_deduplicates_and_sorts_and_ignores_unreferenced() {
        let d = model_dir();
        std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
        std::fs::write(d.path().join("b.safetensors"), b"bb").unwrap();
        std::fs::write(d.path().join("a.safetensors"), b"aa").unwrap();
        std::fs::write(d.path().join("z.safetensors"), b"zz").unwrap();
        std::fs::write(
            d.path().join(INDEX_FILE),
            r#"{"weight_map":{"x":"b.safetensors","y":"a.safetensors","w":"b.safetensors"}}"#,
        )
        .unwrap();
        let f = fingerprint(d.path(), Some("m")).unwrap();
        let paths: Vec<_> = f.weight_files.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["a.safetensors", "b.safetensors"]);
        assert_eq!(f.id, "m");
        std::fs::write(
            d.path().join(INDEX_FILE),
            r#"{"weight_map":{"x":"../a.safetensors"}}"#,
        )
        .unwrap();
        let e = fingerprint(d.path(), None).unwrap_err().to_string();
        assert!(e.contains("must stay inside the model directory"), "{e}");
    }

    #[test]
    fn gguf_only_directories_fingerprint_their_gguf_files() {
        let d = model_dir();
        std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
        std::fs::write(d.path().join("b.gguf"), b"GGUFb").unwrap();
        std::fs::write(d.path().join("a.gguf"), b"GGUFa").unwrap();
        let f = fingerprint(d.path(), None).unwrap();
        let paths: Vec<&str> = f.weight_files.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["a.gguf", "b.gguf"]);
        // Safetensors win when both are present (Kiln's rule is unchanged).
        std::fs::write(d.path().join("model.safetensors"), b"weights").unwrap();
        let f = fingerprint(d.path(), None).unwrap();
        assert_eq!(f.weight_files[0].path, "model.safetensors");
        assert_eq!(f.weight_files.len(), 1);
    }

    #[test]
    fn glob_fallback_is_sorted_and_hidden_suffix_is_not_a_shard() {
        let d = model_dir();
        std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
        std::fs::write(d.path().join(".safetensors"), b"x").unwrap();
        let e = fingerprint(d.path(), None).unwrap_err().to_string();
        assert!(e.contains("no .safetensors (or .gguf) files found"), "{e}");
        std::fs::write(d.path().join("b.safetensors"), b"b").unwrap();
        std::fs::write(d.path().join("a.safetensors"), b"a").unwrap();
        let f = fingerprint(d.path(), None).unwrap();
        assert_eq!(f.weight_files.len(), 2);
    }

    #[test]
    fn symlinks_hard_links_missing_and_empty_inputs_are_refused() {
        let d = model_dir();
        std::fs::remove_file(d.path().join("config.json")).unwrap();
        let e = fingerprint(d.path(), None).unwrap_err().to_string();
        assert!(e.contains("config.json cannot be inspected"), "{e}");
        std::fs::write(d.path().join("real.json"), b"{}").unwrap();
        std::os::unix::fs::symlink("real.json", d.path().join("config.json")).unwrap();
        let e = fingerprint(d.path(), None).unwrap_err().to_string();
        assert!(e.contains("must not use a symlink"), "{e}");
        std::fs::remove_file(d.path().join("config.json")).unwrap();
        std::fs::write(d.path().join("config.json"), b"{}").unwrap();
        std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
        std::fs::write(d.path().join("a.safetensors"), b"a").unwrap();
        std::fs::hard_link(
            d.path().join("a.safetensors"),
            d.path().join("b.safetensors"),
        )
        .unwrap();
        let e = fingerprint(d.path(), None).unwrap_err().to_string();
        assert!(e.contains("reference the same file"), "{e}");
        std::fs::remove_file(d.path().join("b.safetensors")).unwrap();
        std::fs::write(d.path().join("a.safetensors"), b"").unwrap();
        let e = fingerprint(d.path(), None).unwrap_err().to_string();
        assert!(e.contains("weight file is empty"), "{e}");
    }

    #[test]
    fn tokenizer_config_template_and_its_refusals() {
        let d = model_dir();
        std::fs::write(
            d.path().join("tokenizer_config.json"),
            r#"{"chat_template":"caf\u00e9"}"#,
        )
        .unwrap();
        let f = fingerprint(d.path(), None).unwrap();
        assert_eq!(
            f.chat_template_hash,
            Some(qual_json::sha256_prefixed("café".as_bytes()))
        );
        std::fs::write(
            d.path().join("tokenizer_config.json"),
            r#"{"chat_template":1}"#,
        )
        .unwrap();
        assert!(fingerprint(d.path(), None).is_err());
        std::fs::write(
            d.path().join("tokenizer_config.json"),
            r#"{"chat_template":"a","chat_template":"b"}"#,
        )
        .unwrap();
        assert!(fingerprint(d.path(), None).is_err());
        // A standalone template wins over an invalid fallback.
        std::fs::write(d.path().join("chat_template.jinja"), "t").unwrap();
        assert!(fingerprint(d.path(), None).is_ok());
        std::fs::write(d.path().join("tokenizer_config.json"), r#"{}"#).unwrap();
        std::fs::remove_file(d.path().join("chat_template.jinja")).unwrap();
        assert_eq!(
            fingerprint(d.path(), None).unwrap().chat_template_hash,
            None
        );
    }

    #[test]
    fn each_content_input_changes_its_hash_and_root_must_not_be_a_symlink() {
        let d = model_dir();
        let a = fingerprint(d.path(), None).unwrap();
        std::fs::write(d.path().join("config.json"), b"{\"a\":2}").unwrap();
        let b = fingerprint(d.path(), None).unwrap();
        assert_ne!(a.config_hash, b.config_hash);
        assert_eq!(a.weight_files, b.weight_files);
        let link = d.path().with_extension("link");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        let e = fingerprint(&link, None).unwrap_err().to_string();
        std::fs::remove_file(&link).unwrap();
        assert!(e.contains("must not be a symlink"), "{e}");
    }

    #[test]
    fn a_change_during_the_read_is_detected() {
        let d = model_dir();
        let o = open_input(d.path(), "config.json").unwrap();
        // Rewrite with identical size after the open until the ctime has moved (timestamps
        // advance in clock ticks; poll rather than guess how long a tick is here).
        use std::os::unix::fs::MetadataExt;
        let path = d.path().join("config.json");
        let ctime = |m: &std::fs::Metadata| (m.ctime(), m.ctime_nsec());
        let before = ctime(&std::fs::metadata(&path).unwrap());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            std::fs::write(&path, b"{\"a\":9}").unwrap();
            if ctime(&std::fs::metadata(&path).unwrap()) != before {
                break;
            }
            assert!(std::time::Instant::now() < until, "ctime never moved");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut buf = vec![0u8; 64];
        let e = hash_one(&o, &mut buf).unwrap_err().to_string();
        assert!(
            e.contains("changed while it was being fingerprinted"),
            "{e}"
        );
    }
}
