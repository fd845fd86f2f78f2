//! The exclusive writer for runner evidence (receipts, `environment.json`, `run-config.json`,
//! `case-result.json`).
//!
//! Text: [`to_pretty_json`] is, byte for byte, Python's
//! `json.dumps(v, indent=2, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n"`.
//!
//! Creation: [`create_exclusive`] writes the bytes to a temporary file `.<name>.<unique>.tmp`
//! in the target directory, `fsync`s it, hard-links it to the final name (the link fails when
//! the name exists: nothing is ever replaced), removes the temporary name and `fsync`s the
//! directory. A reader therefore sees either no file or the complete file; a crash at any
//! point leaves at most a hidden `.tmp` file, never a partial final file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use qual_json::{python_float_repr, write_ascii_string, Number, Value};

/// Why a file could not be created.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The final name already exists.
    #[error("refusing to overwrite existing file: {}", .0.display())]
    Exists(PathBuf),
    /// The path has no parent directory or file name.
    #[error("invalid output path: {}", .0.display())]
    BadPath(PathBuf),
    /// An I/O step failed.
    #[error("cannot write {}: {source}", .path.display())]
    Io {
        /// The final path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Python-compatible pretty JSON (indent 2, sorted keys, ASCII) with a trailing newline.
pub fn to_pretty_json(v: &Value) -> String {
    let mut out = String::new();
    write_pretty(v, 0, &mut out);
    out.push('\n');
    out
}

fn indent(n: usize, out: &mut String) {
    out.push('\n');
    for _ in 0..n {
        out.push_str("  ");
    }
}

fn write_pretty(v: &Value, depth: usize, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(Number::Int(i)) => out.push_str(&i.to_string()),
        Value::Number(Number::Float(f)) => out.push_str(&python_float_repr(*f)),
        Value::String(s) => write_ascii_string(s, out),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(depth + 1, out);
                write_pretty(item, depth + 1, out);
            }
            indent(depth, out);
            out.push(']');
        }
        Value::Object(o) => {
            if o.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut entries: Vec<(&String, &Value)> = o.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(depth + 1, out);
                write_ascii_string(k, out);
                out.push_str(": ");
                write_pretty(val, depth + 1, out);
            }
            indent(depth, out);
            out.push('}');
        }
    }
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

/// Creates `path` with exactly `bytes`, never replacing an existing file (see module docs).
pub fn create_exclusive(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| WriteError::BadPath(path.to_path_buf()))?;
    let io = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(WriteError::Exists(path.to_path_buf()));
    }
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        unique_suffix()
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(WriteError::Exists(path.to_path_buf()))
            }
            Err(e) => Err(io(e)),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    result?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(())
}

/// Serializes `v` with [`to_pretty_json`] and creates `path` exclusively; returns the bytes.
pub fn write_json_exclusive(path: &Path, v: &Value) -> Result<Vec<u8>, WriteError> {
    let bytes = to_pretty_json(v).into_bytes();
    create_exclusive(path, &bytes)?;
    Ok(bytes)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests read back what they wrote
mod tests {
    use super::*;

    #[test]
    fn pretty_text_matches_python_json_dumps_indent_2() {
        let v = qual_json::from_str(
            r#"{"b":[1,2.5,{"z":null,"a":"\u00e9"}],"a":{},"c":[],"d":1e-05,"e":1.0,"f":true}"#,
        )
        .unwrap();
        let expected = "{\n  \"a\": {},\n  \"b\": [\n    1,\n    2.5,\n    {\n      \"a\": \"\\u00e9\",\n      \"z\": null\n    }\n  ],\n  \"c\": [],\n  \"d\": 1e-05,\n  \"e\": 1.0,\n  \"f\": true\n}\n";
        assert_eq!(to_pretty_json(&v), expected);
    }

    #[test]
    fn real_receipts_reserialize_byte_identically() {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kiln-corpus/receipts");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("skipping: {} is absent", dir.display());
            return;
        };
        let mut n = 0;
        for e in entries {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            let v = qual_json::from_slice(&bytes).unwrap();
            assert_eq!(to_pretty_json(&v).as_bytes(), &bytes[..], "{}", p.display());
            n += 1;
        }
        assert!(n > 0);
    }

    #[test]
    fn exclusive_creation_never_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        create_exclusive(&p, b"one").unwrap();
        let e = create_exclusive(&p, b"two").unwrap_err();
        assert!(matches!(e, WriteError::Exists(_)));
        assert!(e
            .to_string()
            .starts_with("refusing to overwrite existing file"));
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1);
        // A dangling symlink at the final name also counts as existing.
        let l = d.path().join("l.json");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &l).unwrap();
        assert!(matches!(
            create_exclusive(&l, b"x"),
            Err(WriteError::Exists(_))
        ));
        assert!(!d.path().join("nowhere").exists());
    }

    #[test]
    fn missing_directory_is_an_io_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("no/such/dir/r.json");
        assert!(matches!(
            create_exclusive(&p, b"x"),
            Err(WriteError::Io { .. })
        ));
    }
}
