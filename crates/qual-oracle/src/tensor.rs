//! Logit tensor files: safetensors (what the reference worker writes, read with the
//! `safetensors` crate) and NumPy `.npy` (see [`crate::npy`]).
//!
//! Owns the one in-memory form every comparison uses, [`Logits`]: `positions × vocab` row-major
//! `f32` values, plus the input token ids when the file carries them. A safetensors file must
//! hold a `logits` tensor (`F32` or `F64`, shape `[vocab]`, `[positions, vocab]` or
//! `[1, positions, vocab]`) and may hold `input_ids` (`I64`/`I32`, shape `[n]` or `[1, n]`);
//! any other tensor is refused, and so is a header with a duplicate key (read strictly by
//! `qual_json` first), so a file cannot smuggle a second set of logits. Files are
//! read as regular files only, under a byte limit, and digested (`sha256:` of the exact bytes).

use crate::npy;
use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Largest logit file read (4 GiB: 256 positions × 250 000 vocabulary × 8 bytes fits twice).
pub const MAX_TENSOR_FILE_BYTES: usize = 4 << 30;

/// Why a tensor file could not be used.
#[derive(Debug, Error)]
pub enum TensorError {
    /// The file could not be read.
    #[error("read {path}: {source}")]
    Read {
        /// The path (escaped).
        path: String,
        /// The cause.
        source: qual_json::LoadError,
    },
    /// The safetensors container is malformed.
    #[error("read {path} as safetensors: {reason}")]
    SafeTensors {
        /// The path (escaped).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The `.npy` file is malformed or unsupported.
    #[error("read {path} as .npy: {source}")]
    Npy {
        /// The path (escaped).
        path: String,
        /// What is wrong.
        source: npy::NpyError,
    },
    /// The extension names no supported format.
    #[error("read {path}: unknown tensor format (expected a .safetensors or .npy file)")]
    Format {
        /// The path (escaped).
        path: String,
    },
}

/// The container a tensor came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorFormat {
    /// A safetensors file.
    Safetensors,
    /// A NumPy `.npy` file.
    Npy,
    /// Built in memory (tests, the llama-server top-k route).
    Memory,
}

/// `positions × vocab` logits, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Logits {
    /// Number of rows (next-token positions).
    pub positions: usize,
    /// Vocabulary size (row length).
    pub vocab: usize,
    /// The values, `positions * vocab` of them.
    pub data: Vec<f32>,
}

impl Logits {
    /// Builds logits from rows of equal length; `None` when empty or ragged.
    pub fn from_rows(rows: &[Vec<f32>]) -> Option<Logits> {
        let vocab = rows.first()?.len();
        if vocab == 0 || rows.iter().any(|r| r.len() != vocab) {
            return None;
        }
        Some(Logits {
            positions: rows.len(),
            vocab,
            data: rows.concat(),
        })
    }

    /// Row `p`.
    pub fn row(&self, p: usize) -> &[f32] {
        &self.data[p * self.vocab..(p + 1) * self.vocab]
    }
}

/// A logit file as read.
#[derive(Debug, Clone)]
pub struct TensorFile {
    /// The path read.
    pub path: PathBuf,
    /// Its container.
    pub format: TensorFormat,
    /// `sha256:` of the exact file bytes.
    pub file_sha256: String,
    /// File size.
    pub bytes: u64,
    /// The logits.
    pub logits: Logits,
    /// The input token ids, when the file carries them.
    pub input_ids: Option<Vec<i64>>,
    /// The safetensors `__metadata__` (empty for `.npy`).
    pub metadata: BTreeMap<String, String>,
}

/// Reads a logit file, choosing the reader by extension (`.safetensors`, `.npy`).
pub fn read_tensor_file(path: &Path) -> Result<TensorFile, TensorError> {
    let shown = qual_json::escape_path(path);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ext != "safetensors" && ext != "npy" {
        return Err(TensorError::Format { path: shown });
    }
    let bytes = qual_json::read_file_limited(path, MAX_TENSOR_FILE_BYTES).map_err(|source| {
        TensorError::Read {
            path: shown.clone(),
            source,
        }
    })?;
    let file_sha256 = qual_json::sha256_prefixed(&bytes);
    let (format, logits, input_ids, metadata) = if ext == "npy" {
        let a = npy::parse(&bytes).map_err(|source| TensorError::Npy {
            path: shown.clone(),
            source,
        })?;
        let (positions, vocab) = match a.shape[..] {
            [v] => (1, v),
            [p, v] => (p, v),
            _ => unreachable!("npy::parse admits one or two dimensions"),
        };
        if positions == 0 || vocab == 0 {
            return Err(TensorError::Npy {
                path: shown,
                source: npy::NpyError::Unsupported("the array is empty".into()),
            });
        }
        let logits = Logits {
            positions,
            vocab,
            data: a.data,
        };
        (TensorFormat::Npy, logits, None, BTreeMap::new())
    } else {
        let (l, ids, meta) =
            parse_safetensors(&bytes).map_err(|reason| TensorError::SafeTensors {
                path: shown.clone(),
                reason,
            })?;
        (TensorFormat::Safetensors, l, ids, meta)
    };
    Ok(TensorFile {
        path: path.to_path_buf(),
        format,
        file_sha256,
        bytes: bytes.len() as u64,
        logits,
        input_ids,
        metadata,
    })
}

type Parsed = (Logits, Option<Vec<i64>>, BTreeMap<String, String>);

/// Parses safetensors bytes into logits, optional input ids and metadata.
pub fn parse_safetensors(bytes: &[u8]) -> Result<Parsed, String> {
    strict_header(bytes)?;
    let st = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(|e| e.to_string())?;
    let metadata: BTreeMap<String, String> = meta
        .metadata()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    for n in &names {
        if n != "logits" && n != "input_ids" {
            return Err(format!(
                "unexpected tensor {} (only \"logits\" and \"input_ids\" are read)",
                qual_json::show::quote(n)
            ));
        }
    }
    let t = st
        .tensor("logits")
        .map_err(|_| "no \"logits\" tensor".to_string())?;
    let (positions, vocab) = match t.shape() {
        [v] => (1, *v),
        [p, v] => (*p, *v),
        [1, p, v] => (*p, *v),
        s => {
            return Err(format!(
                "logits shape {s:?} is not [vocab], [positions, vocab] or [1, positions, vocab]"
            ))
        }
    };
    if positions == 0 || vocab == 0 {
        return Err("the logits tensor is empty".into());
    }
    let data: Vec<f32> = match t.dtype() {
        Dtype::F32 => t
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::F64 => t
            .data()
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32)
            .collect(),
        d => return Err(format!("logits dtype {d:?} is not F32 or F64")),
    };
    let input_ids = match st.tensor("input_ids") {
        Err(_) => None,
        Ok(t) => {
            let n = match t.shape() {
                [n] | [1, n] => *n,
                s => return Err(format!("input_ids shape {s:?} is not [n] or [1, n]")),
            };
            let ids: Vec<i64> = match t.dtype() {
                Dtype::I64 => t
                    .data()
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
                Dtype::I32 => t
                    .data()
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")) as i64)
                    .collect(),
                d => return Err(format!("input_ids dtype {d:?} is not I64 or I32")),
            };
            debug_assert_eq!(ids.len(), n);
            Some(ids)
        }
    };
    Ok((
        Logits {
            positions,
            vocab,
            data,
        },
        input_ids,
        metadata,
    ))
}

/// Reads the JSON header (8-byte little-endian length, then the JSON) with the workspace's
/// strict reader first: the `safetensors` crate keeps the last of two equal keys, so a header
/// naming `logits` twice would be read as whichever came last; here it is refused.
fn strict_header(bytes: &[u8]) -> Result<(), String> {
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or("the file is shorter than the 8-byte header length")?;
    let header = usize::try_from(n)
        .ok()
        .and_then(|n| bytes.get(8..8usize.checked_add(n)?))
        .ok_or(format!("the header length {n} exceeds the file"))?;
    qual_json::from_slice(header).map_err(|e| format!("header: {e}"))?;
    Ok(())
}

/// Encodes logits (and optional input ids) as safetensors bytes (tests, benchmarks, tools).
pub fn encode_safetensors(
    logits: &Logits,
    input_ids: Option<&[i64]>,
    metadata: &BTreeMap<String, String>,
) -> Vec<u8> {
    use safetensors::tensor::TensorView;
    let lb: Vec<u8> = logits.data.iter().flat_map(|v| v.to_le_bytes()).collect();
    let ib: Vec<u8> = input_ids
        .unwrap_or(&[])
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut views = vec![(
        "logits".to_string(),
        TensorView::new(Dtype::F32, vec![logits.positions, logits.vocab], &lb)
            .expect("shape matches data"),
    )];
    if let Some(ids) = input_ids {
        views.push((
            "input_ids".to_string(),
            TensorView::new(Dtype::I64, vec![1, ids.len()], &ib).expect("shape matches data"),
        ));
    }
    let meta: std::collections::HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    safetensors::serialize(views, Some(meta)).expect("serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safetensors_round_trip_with_ids_and_metadata() {
        let l = Logits::from_rows(&[vec![1.0, 2.0, 3.0], vec![0.5, -1.0, 2.0]]).unwrap();
        let meta = BTreeMap::from([("schema".to_string(), "x".to_string())]);
        let b = encode_safetensors(&l, Some(&[7, 8]), &meta);
        let (got, ids, m) = parse_safetensors(&b).unwrap();
        assert_eq!(got, l);
        assert_eq!(ids, Some(vec![7, 8]));
        assert_eq!(m, meta);
    }

    #[test]
    fn a_header_naming_logits_twice_is_refused() {
        let entry = |shape: &str| {
            format!(r#""logits":{{"dtype":"F32","shape":{shape},"data_offsets":[0,12]}}"#)
        };
        let header = format!("{{{},{}}}", entry("[3,1]"), entry("[1,3]"));
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header.as_bytes());
        for v in [1.0f32, 2.0, 3.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        // The crate alone reads it, taking the second `logits`.
        let st = SafeTensors::deserialize(&b).unwrap();
        assert_eq!(st.tensor("logits").unwrap().shape(), [1, 3]);
        let e = parse_safetensors(&b).unwrap_err();
        assert!(e.contains("duplicate") && e.contains("logits"), "{e}");
        // A header length beyond the file is refused by name, not a panic.
        let mut short = u64::MAX.to_le_bytes().to_vec();
        short.extend_from_slice(b"{}");
        let e = parse_safetensors(&short).unwrap_err();
        assert!(e.contains("exceeds the file"), "{e}");
        assert!(parse_safetensors(b"abc").unwrap_err().contains("shorter"));
    }

    #[test]
    fn ragged_rows_are_refused() {
        assert!(Logits::from_rows(&[vec![1.0], vec![1.0, 2.0]]).is_none());
        assert!(Logits::from_rows(&[]).is_none());
    }
}
