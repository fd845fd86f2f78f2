//! A strict reader for NumPy `.npy` logit files (format versions 1.0, 2.0 and 3.0).
//!
//! Owns: turning the bytes of one `.npy` file into a shape and `f32` values, refusing anything
//! that is not exactly a little-endian `float32` (`<f4`) or `float64` (`<f8`) C-order array of
//! one or two dimensions with no trailing bytes.
//!
//! Why hand-written: the format is a 10-byte preamble, a Python dictionary literal with three
//! keys and the raw array bytes. The Rust crates that read it (`npyz`, `ndarray-npy`) decode
//! element by element through a reader and accept every dtype, byte order and Fortran order
//! (which an oracle would then have to refuse again), and they parse the header with a
//! permissive Python-literal grammar. Here the header is matched against the one form NumPy
//! writes (`{'descr': '<f4', 'fortran_order': False, 'shape': (256, 50000), }` padded with
//! spaces and a newline), the key set is exact, and the data is converted in one bulk pass over
//! a buffer already bounded by the caller.

use thiserror::Error;

/// Why a `.npy` file was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NpyError {
    /// The magic string or version is wrong.
    #[error("read a .npy file: {0}")]
    Preamble(String),
    /// The header dictionary is not the exact NumPy form.
    #[error("read the .npy header: {0}")]
    Header(String),
    /// The dtype, order or shape is not supported for logits.
    #[error("read the .npy array: {0}")]
    Unsupported(String),
    /// The data length does not match the shape.
    #[error("read the .npy data: {0}")]
    Length(String),
}

/// A decoded `.npy` array: its shape and its values as `f32` (a `<f8` file is converted, and
/// refused if a value does not fit `f32` exactly enough to stay finite).
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    /// One or two dimensions.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f32>,
    /// `<f4` or `<f8`.
    pub descr: &'static str,
}

const MAGIC: &[u8] = b"\x93NUMPY";

/// Parses a whole `.npy` file.
pub fn parse(bytes: &[u8]) -> Result<NpyArray, NpyError> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(NpyError::Preamble(
            "the file does not start with the .npy magic string".into(),
        ));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (header_len, start): (usize, usize) = match (major, minor) {
        (1, 0) => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        (2, 0) | (3, 0) => {
            if bytes.len() < 12 {
                return Err(NpyError::Preamble(
                    "the file ends inside its preamble".into(),
                ));
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        _ => {
            return Err(NpyError::Preamble(format!(
                "format version {major}.{minor} is not 1.0, 2.0 or 3.0"
            )))
        }
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| NpyError::Preamble("the header runs past the end of the file".into()))?;
    let header = std::str::from_utf8(&bytes[start..end])
        .map_err(|_| NpyError::Header("the header is not UTF-8".into()))?;
    let (descr, shape) = parse_header(header)?;
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| NpyError::Unsupported("the shape overflows".into()))?;
    let width = if descr == "<f4" { 4 } else { 8 };
    let data_bytes = &bytes[end..];
    if Some(data_bytes.len()) != count.checked_mul(width) {
        return Err(NpyError::Length(format!(
            "shape {shape:?} needs {count} values of {width} bytes, the file holds {} bytes",
            data_bytes.len()
        )));
    }
    let data = if width == 4 {
        data_bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    } else {
        let mut out = Vec::with_capacity(count);
        for c in data_bytes.chunks_exact(8) {
            let v = f64::from_le_bytes(c.try_into().expect("8 bytes"));
            let f = v as f32;
            if v.is_finite() && !f.is_finite() {
                return Err(NpyError::Unsupported(format!(
                    "float64 value {v} does not fit float32"
                )));
            }
            out.push(f);
        }
        out
    };
    Ok(NpyArray {
        shape,
        data,
        descr: if width == 4 { "<f4" } else { "<f8" },
    })
}

/// Matches `{'descr': '<f4', 'fortran_order': False, 'shape': (A, B), }` (keys in NumPy's
/// order, optional trailing comma), then spaces and one final newline.
fn parse_header(h: &str) -> Result<(&'static str, Vec<usize>), NpyError> {
    let bad = |why: &str| NpyError::Header(format!("{why} (header {:?})", h.trim_end()));
    let body = h
        .strip_suffix('\n')
        .ok_or_else(|| bad("the header does not end with a newline"))?
        .trim_end_matches(' ');
    let body = body
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .ok_or_else(|| bad("the header is not a dictionary"))?;
    let rest = body
        .strip_prefix("'descr': '")
        .ok_or_else(|| bad("the first key is not 'descr'"))?;
    let q = rest.find('\'').ok_or_else(|| bad("unterminated descr"))?;
    let descr = match &rest[..q] {
        "<f4" => "<f4",
        "<f8" => "<f8",
        other => {
            return Err(NpyError::Unsupported(format!(
                "dtype {other:?} is not little-endian float32 (\"<f4\") or float64 (\"<f8\")"
            )))
        }
    };
    let rest = rest[q + 1..]
        .strip_prefix(", 'fortran_order': ")
        .ok_or_else(|| bad("the second key is not 'fortran_order'"))?;
    let rest = if let Some(r) = rest.strip_prefix("False") {
        r
    } else if rest.starts_with("True") {
        return Err(NpyError::Unsupported(
            "Fortran-order arrays are not supported".into(),
        ));
    } else {
        return Err(bad("the value of fortran_order is neither of the two header literals (C order or Fortran order)"));
    };
    let rest = rest
        .strip_prefix(", 'shape': (")
        .ok_or_else(|| bad("the third key is not 'shape'"))?;
    let close = rest.find(')').ok_or_else(|| bad("unterminated shape"))?;
    let tail = rest[close + 1..].trim_end_matches(' ');
    if !(tail.is_empty() || tail == ",") {
        return Err(bad("unexpected text after the shape"));
    }
    let dims: Vec<&str> = rest[..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let mut shape = Vec::new();
    for d in dims {
        if d.is_empty()
            || !d.bytes().all(|b| b.is_ascii_digit())
            || (d.len() > 1 && d.starts_with('0'))
        {
            return Err(bad("a dimension is not a decimal integer"));
        }
        shape.push(
            d.parse::<usize>()
                .map_err(|_| bad("a dimension is too large"))?,
        );
    }
    if !(1..=2).contains(&shape.len()) {
        return Err(NpyError::Unsupported(format!(
            "logits must have one or two dimensions, this array has {}",
            shape.len()
        )));
    }
    Ok((descr, shape))
}

/// Encodes `f32` values as a version 1.0 `.npy` file (tests, benchmarks and tools that hand
/// logits to other programs).
pub fn encode_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let dims = match shape {
        [a] => format!("({a},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {dims}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_one_and_two_dimensions() {
        let a = encode_f32(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, -0.5]);
        assert_eq!((a.len() - 24) % 64, 0, "preamble and header padded to 64");
        let p = parse(&a).unwrap();
        assert_eq!(p.shape, vec![2, 3]);
        assert_eq!(p.data[5], -0.5);
        let b = parse(&encode_f32(&[4], &[0.0; 4])).unwrap();
        assert_eq!(b.shape, vec![4]);
    }

    #[test]
    fn refuses_other_dtypes_orders_and_lengths() {
        let good = encode_f32(&[2], &[1.0, 2.0]);
        let swap = |from: &str, to: &str| {
            let at = good
                .windows(from.len())
                .position(|w| w == from.as_bytes())
                .expect("present");
            let mut b = good.clone();
            b[at..at + to.len()].copy_from_slice(to.as_bytes());
            b
        };
        assert!(matches!(
            parse(&swap("<f4", ">f4")),
            Err(NpyError::Unsupported(_))
        ));
        assert!(matches!(
            parse(&swap("<f4", "<i4")),
            Err(NpyError::Unsupported(_))
        ));
        assert!(matches!(
            parse(&swap("False", "True ")),
            Err(NpyError::Unsupported(_))
        ));
        assert!(matches!(
            parse(&swap("'descr'", "'descx'")),
            Err(NpyError::Header(_))
        ));
        let mut short = good.clone();
        short.pop();
        assert!(matches!(parse(&short), Err(NpyError::Length(_))));
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(parse(&long), Err(NpyError::Length(_))));
        assert!(matches!(parse(b"NUMPY"), Err(NpyError::Preamble(_))));
        let three = encode_f32(&[1, 1, 2], &[1.0, 2.0]);
        assert!(matches!(parse(&three), Err(NpyError::Unsupported(_))));
    }
}
