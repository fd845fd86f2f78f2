//! Which kiln-qual document a file holds, decided once for every command that accepts more
//! than one kind.
//!
//! [`read`] reads a file once (regular files only, at most [`MAX_DOCUMENT_BYTES`], through
//! `qual_json::read_file_limited`) and parses it strictly; [`Source::kind`] looks the result up
//! in one table ([`KINDS`]) from its top-level `schema` member, or for the kinds that have none
//! (receipt v1, `compare --json` documents) from its shape. [`Source::into_document`] gives a
//! [`Document`] or an [`DocumentError::Unknown`] naming the schema it saw and the kinds it
//! knows. The bytes travel with the kind, so a command hands them to the owner of that kind
//! (`qual-receipt`, `qual-campaign`, `qual-oracle`, `qual-report` for bench results) and
//! never reads the file a second time or looks at a `schema` member itself. A new document kind is a row here plus its owner's rules.
//!
//! The crate depends on `qual-json` alone, so that every owner (and `qual-report`, which must
//! not depend on the serving crates) can use the table; its tests check that each schema
//! string here is its owner's.
//!
//! Read errors (missing file, not a regular file, too large) are returned as they are; a
//! parse failure is kept in the [`Source`] so that each owner still reports it in its own words
//! ([`Source::load_error`] gives the layer's).

use qual_json::{LoadError, ParseError, Value};
use std::path::{Path, PathBuf};

/// `qual_campaign::records::RECEIPT_SCHEMA`.
pub const CAMPAIGN_RECEIPT_SCHEMA: &str = "kiln-qual.serving-campaign-receipt.v1";
/// `qual_campaign::records::SUMMARY_SCHEMA`.
pub const CAMPAIGN_SUMMARY_SCHEMA: &str = "kiln-qual.serving-campaign.v1";
/// `qual_oracle::result::RESULT_SCHEMA`.
pub const ORACLE_RESULT_SCHEMA: &str = "kiln-qual.oracle-result.v1";
/// `qual_oracle::check::KILN_V2_SCHEMA`.
pub const KILN_ORACLE_V2_SCHEMA: &str = "kiln.rocm-hf-next-token-oracle.v2";
/// `qual_oracle::attribution::ATTRIBUTION_SCHEMA`.
pub const ORACLE_ATTRIBUTION_SCHEMA: &str = "kiln-qual.oracle-attribution.v1";
/// `qual_bench::run::RESULT_SCHEMA`.
pub const BENCH_RESULT_SCHEMA: &str = "kiln-qual.bench-result.v1";

/// The largest document read: every owner's limit is 64 MiB.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024 * 1024;

/// A document kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A qualification receipt v1 (`schema_version`, no `schema`; `qual-receipt`).
    Receipt,
    /// A serving-campaign receipt (`qual-campaign`).
    CampaignReceipt,
    /// A serving-campaign summary (`qual-campaign`).
    CampaignSummary,
    /// An oracle result of ours or Kiln's v2, or an attribution (`qual-oracle`).
    OracleResult,
    /// A `kiln-qual compare --json` document (`qual-report`'s comparison input).
    Comparison,
    /// A `kiln-qual bench` result document (`qual-bench` writes it, `qual-report` renders it).
    BenchResult,
}

/// How a kind is recognized.
#[derive(Clone, Copy, Debug)]
pub enum Mark {
    /// By the value of the top-level `schema` member.
    Schema(&'static str),
    /// By shape (kinds without a `schema` member).
    Shape(fn(&Value) -> bool),
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct KindEntry {
    /// The kind.
    pub kind: Kind,
    /// How it is named in messages.
    pub name: &'static str,
    /// How it is recognized.
    pub mark: Mark,
}

fn is_receipt_v1(v: &Value) -> bool {
    v.get("schema").is_none() && v.get("schema_version").is_some() && v.get("receipt_id").is_some()
}

fn is_comparison(v: &Value) -> bool {
    v.get("metric_evaluations").is_some() && v.get("result_status_changes").is_some()
}

/// The table from `schema` / shape to kind, in lookup order.
pub const KINDS: &[KindEntry] = &[
    KindEntry {
        kind: Kind::CampaignReceipt,
        name: "serving-campaign receipt",
        mark: Mark::Schema(CAMPAIGN_RECEIPT_SCHEMA),
    },
    KindEntry {
        kind: Kind::CampaignSummary,
        name: "serving-campaign summary",
        mark: Mark::Schema(CAMPAIGN_SUMMARY_SCHEMA),
    },
    KindEntry {
        kind: Kind::OracleResult,
        name: "oracle result",
        mark: Mark::Schema(ORACLE_RESULT_SCHEMA),
    },
    KindEntry {
        kind: Kind::OracleResult,
        name: "Kiln oracle result v2",
        mark: Mark::Schema(KILN_ORACLE_V2_SCHEMA),
    },
    KindEntry {
        kind: Kind::OracleResult,
        name: "oracle attribution",
        mark: Mark::Schema(ORACLE_ATTRIBUTION_SCHEMA),
    },
    KindEntry {
        kind: Kind::BenchResult,
        name: "bench result",
        mark: Mark::Schema(BENCH_RESULT_SCHEMA),
    },
    KindEntry {
        kind: Kind::Receipt,
        name: "qualification receipt v1",
        mark: Mark::Shape(is_receipt_v1),
    },
    KindEntry {
        kind: Kind::Comparison,
        name: "receipt comparison",
        mark: Mark::Shape(is_comparison),
    },
];

/// A file read once: its exact bytes and their strict parse (or why they do not parse).
#[derive(Debug)]
pub struct Source {
    /// The path as given.
    pub path: PathBuf,
    /// The exact bytes.
    pub bytes: Vec<u8>,
    /// The strict parse of the bytes.
    pub parsed: Result<Value, ParseError>,
}

/// Reads `path` once (see the module docs). Only read errors are errors here.
pub fn read(path: &Path) -> Result<Source, LoadError> {
    read_limited(path, MAX_DOCUMENT_BYTES)
}

/// [`read`] with an owner's smaller byte limit.
pub fn read_limited(path: &Path, max_bytes: usize) -> Result<Source, LoadError> {
    let bytes = qual_json::read_file_limited(path, max_bytes)?;
    let limits = qual_json::Limits {
        max_bytes,
        ..qual_json::Limits::default()
    };
    let parsed = qual_json::from_slice_with(&bytes, limits);
    Ok(Source {
        path: path.to_path_buf(),
        bytes,
        parsed,
    })
}

impl Source {
    /// The top-level `schema` string, if the bytes parse and have one.
    pub fn schema(&self) -> Option<&str> {
        self.parsed.as_ref().ok()?.get("schema")?.as_str()
    }

    /// The table's row for this document (`None`: not strict JSON, or no row matches).
    pub fn entry(&self) -> Option<&'static KindEntry> {
        let v = self.parsed.as_ref().ok()?;
        let schema = self.schema();
        KINDS.iter().find(|e| match e.mark {
            Mark::Schema(s) => schema == Some(s),
            Mark::Shape(f) => f(v),
        })
    }

    /// The document's kind (`None`: not strict JSON, or no row matches).
    pub fn kind(&self) -> Option<Kind> {
        self.entry().map(|e| e.kind)
    }

    /// Whether the document is of kind `k`.
    pub fn is(&self, k: Kind) -> bool {
        self.kind() == Some(k)
    }

    /// The layer's load error for bytes that are not strict JSON (`None` when they parse).
    pub fn load_error(&self) -> Option<LoadError> {
        self.value().err()
    }

    /// The parsed value, or the layer's load error for bytes that are not strict JSON.
    pub fn value(&self) -> Result<&Value, LoadError> {
        match &self.parsed {
            Ok(v) => Ok(v),
            Err(error) => Err(LoadError::Parse {
                path: qual_json::escape_path(&self.path),
                error: error.clone(),
            }),
        }
    }

    /// [`Source::value`], by value.
    pub fn into_value(self) -> Result<Value, LoadError> {
        self.parsed.map_err(|error| LoadError::Parse {
            path: qual_json::escape_path(&self.path),
            error,
        })
    }

    /// The typed document, or why it is none of the known kinds.
    pub fn into_document(self) -> Result<Document, DocumentError> {
        if let Some(e) = self.load_error() {
            return Err(DocumentError::Load(e));
        }
        Ok(match self.kind() {
            Some(Kind::Receipt) => Document::Receipt(self),
            Some(Kind::CampaignReceipt) => Document::CampaignReceipt(self),
            Some(Kind::CampaignSummary) => Document::CampaignSummary(self),
            Some(Kind::OracleResult) => Document::OracleResult(self),
            Some(Kind::Comparison) => Document::Comparison(self),
            Some(Kind::BenchResult) => Document::BenchResult(self),
            None => {
                return Err(DocumentError::Unknown {
                    path: qual_json::escape_path(&self.path),
                    schema: self.schema().map(qual_json::show::quote),
                    known: known_kinds(),
                })
            }
        })
    }
}

/// The kinds the table knows, for messages: `serving-campaign receipt ("kiln-qual…"), …`.
pub fn known_kinds() -> String {
    let names: Vec<String> = KINDS
        .iter()
        .map(|e| match e.mark {
            Mark::Schema(s) => format!("{} ({})", e.name, qual_json::show::quote(s)),
            Mark::Shape(_) => format!("{} (by shape)", e.name),
        })
        .collect();
    names.join(", ")
}

/// A document of a known kind, with the bytes it was read from.
#[derive(Debug)]
pub enum Document {
    /// A qualification receipt v1.
    Receipt(Source),
    /// A serving-campaign receipt.
    CampaignReceipt(Source),
    /// A serving-campaign summary.
    CampaignSummary(Source),
    /// An oracle result (ours or Kiln's v2).
    OracleResult(Source),
    /// A `compare --json` document.
    Comparison(Source),
    /// A `bench` result document.
    BenchResult(Source),
}

/// Why a file is not a known document.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// Unreadable, too large, or not strict JSON.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Strict JSON, but no kind matches.
    #[error(
        "cannot read {path}: not a known document (schema {}; known: {known})",
        schema.as_deref().unwrap_or("absent")
    )]
    Unknown {
        /// The path as given (control characters escaped).
        path: String,
        /// The `schema` it declares, as a JSON string (`None` when absent).
        schema: Option<String>,
        /// The kinds the table knows.
        known: String,
    },
}

/// Reads `path` once and returns its document (see the module docs).
pub fn read_document(path: &Path) -> Result<Document, DocumentError> {
    read(path)?.into_document()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("qual-documents-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn schemas_are_their_owners() {
        assert_eq!(
            CAMPAIGN_RECEIPT_SCHEMA,
            qual_campaign::records::RECEIPT_SCHEMA
        );
        assert_eq!(
            CAMPAIGN_SUMMARY_SCHEMA,
            qual_campaign::records::SUMMARY_SCHEMA
        );
        assert_eq!(ORACLE_RESULT_SCHEMA, qual_oracle::result::RESULT_SCHEMA);
        assert_eq!(KILN_ORACLE_V2_SCHEMA, qual_oracle::check::KILN_V2_SCHEMA);
        assert_eq!(
            ORACLE_ATTRIBUTION_SCHEMA,
            qual_oracle::attribution::ATTRIBUTION_SCHEMA
        );
        assert_eq!(BENCH_RESULT_SCHEMA, qual_bench::run::RESULT_SCHEMA);
    }

    #[test]
    fn kinds_come_from_the_table() {
        let campaign = write(
            "c.json",
            r#"{"schema":"kiln-qual.serving-campaign-receipt.v1"}"#,
        );
        assert_eq!(read(&campaign).unwrap().kind(), Some(Kind::CampaignReceipt));
        let receipt = write("r.json", r#"{"schema_version":1,"receipt_id":"x"}"#);
        assert!(read(&receipt).unwrap().is(Kind::Receipt));
        let cmp = write(
            "cmp.json",
            r#"{"metric_evaluations":[],"result_status_changes":[]}"#,
        );
        assert!(matches!(read_document(&cmp), Ok(Document::Comparison(_))));
        let other = write("o.json", r#"{"schema":"something.v9"}"#);
        let e = read_document(&other).unwrap_err().to_string();
        assert!(e.contains("schema \"something.v9\""), "{e}");
        assert!(
            e.contains("serving-campaign receipt (\"kiln-qual.serving-campaign-receipt.v1\")"),
            "{e}"
        );
        let bad = write("b.json", "{\"a\":1,\"a\":2}");
        let s = read(&bad).unwrap();
        assert_eq!(s.kind(), None);
        assert!(s
            .load_error()
            .unwrap()
            .to_string()
            .starts_with("cannot load "));
        for p in [campaign, receipt, cmp, other, bad] {
            std::fs::remove_file(p).unwrap();
        }
    }
}
