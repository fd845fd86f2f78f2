//! Reports over receipts and their evidence, for people and for CI systems.
//!
//! - [`collect`]: finds receipts (files, or directories searched recursively), reads each one
//!   strictly and validates it (`qual_receipt::validate`), then reads the retained run evidence
//!   where it is present: each repetition's `case-result.json` (only when its bytes match the
//!   digest and size the receipt records) and the serving evidence
//!   (`*.serve-evidence.json`, with the per-request records) next to it;
//! - [`campaign`]: serving-campaign records (`kiln-qual campaign`), recognized here and read
//!   by `qual-campaign` into [`campaign::CampaignView`]s, rendered per profile and row;
//! - [`bench`]: `kiln-qual bench` result documents among the inputs, read strictly into
//!   [`bench::BenchView`]s and rendered per load point (CDFs, sweep charts, the SLA search's
//!   bracket, a request timeline, failure reasons, the verdict as written);
//! - [`comparison`]: `kiln-qual compare --json` documents among the inputs, rendered side by
//!   side (rule, tolerance, baseline, candidate, change, status);
//! - [`markdown`]: a GitHub job summary: verdict matrix, failures with reasons;
//! - [`junit`]: JUnit XML, one `testcase` per case × repetition (the shape of
//!   `schemas/junit.xsd`);
//! - [`csv`]: one tidy row per metric observation;
//! - [`html`]: one self-contained offline page with SVG plots ([`svg`]).
//!
//! The generated receipt sets its tests and benchmarks read are `qual_test_fixtures::synth`.
//!
//! Invariants: a report never judges (verdicts and statuses are the receipts'); failed rows are
//! always shown and never averaged into passes; every string taken from a document is escaped
//! for the format it lands in (control characters first, as `qual_json::escape_text` does for
//! terminals, then the format's own markup); this crate touches no network and starts no
//! process.

#![forbid(unsafe_code)]

pub mod bench;
pub mod bounds;
pub mod campaign;
pub mod collect;
pub mod comparison;
pub mod csv;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod matrix;
pub mod svg;

pub use collect::{
    collect, CaseView, MetricObs, ReceiptView, Refused, Repetition, ReportSet, ServeView,
};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An output file or directory could not be written.
    #[error("write {path}: {source}")]
    Write {
        /// The path (control characters escaped).
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// reader never sees half a report.
pub fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), ReportError> {
    let err = |source| ReportError::Write {
        path: qual_json::escape_path(path),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| err(std::io::Error::other("not a file name")))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

/// Text from a document with control and bidirectional characters escaped (the first step of
/// every format's escaping).
pub(crate) fn plain(s: &str) -> std::borrow::Cow<'_, str> {
    qual_json::escape_text(s)
}

/// Text escaped for Markdown (inline, also inside a GFM table cell): `plain`, then each
/// character Markdown or a GFM table reads as markup behind a backslash. Shared by the
/// Markdown summary and the sections other modules add to it.
pub fn md(s: &str) -> String {
    let plain = plain(s);
    let mut out = String::with_capacity(plain.len());
    for c in plain.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '#' | '!' | '&'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The first 12 characters of a commit (or the whole text when shorter).
pub(crate) fn short_commit(c: &str) -> &str {
    c.get(..12).unwrap_or(c)
}

/// `1 host`, `2 hosts`.
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A number as a short human text (`12.3`, `0.000123`, `1.2e9`).
pub(crate) fn num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-4..1e9).contains(&a) {
        return format!("{v:.3e}");
    }
    let digits = if a >= 100.0 {
        1
    } else if a >= 1.0 {
        3
    } else {
        6
    };
    let s = format!("{v:.digits$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_short() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.0), "1");
        assert_eq!(num(20.1972365), "20.197");
        assert_eq!(num(700.53), "700.5");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(2e10), "2.000e10");
    }
}
