//! The exclusive writer for runner evidence (receipts, `environment.json`, `run-config.json`,
//! `case-result.json`): thin names over the document layer in `qual-json`.
//!
//! Text: [`to_pretty_json`] (`qual_json::pretty`) is, byte for byte, Python's
//! `json.dumps(v, indent=2, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n"`.
//!
//! Creation: [`create_exclusive`] (`qual_json::publish`, mode `0o644`) writes the bytes to a
//! temporary file `.<name>.<unique>.tmp` in the target directory, `fsync`s it, hard-links it to the final name (the link fails when
//! the name exists: nothing is ever replaced), removes the temporary name and `fsync`s the
//! directory. A reader therefore sees either no file or the complete file; a crash at any
//! point leaves at most a hidden `.tmp` file, never a partial final file.

use std::path::Path;

pub use qual_json::to_pretty_json;
/// Why a file could not be created (the layer's [`qual_json::PublishError`]).
pub use qual_json::PublishError as WriteError;
use qual_json::Value;

/// Creates `path` with exactly `bytes`, never replacing an existing file (see module docs).
pub fn create_exclusive(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    qual_json::publish_exclusive(path, bytes, qual_json::PublishOptions::default())
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
