//! `kiln-qual triage RECEIPT|RUN_DIR`: the seeds' failure triage of one finished run, the
//! first failure with the evidence file that shows it, the rest briefly.
//!
//! Thin wiring: the rules are `qual_runner::triage` (over the receipt validator and verifier).
//! A receipt is read with `qual_receipt::validate::load`; for a run directory, the receipt that
//! names it is looked for below the repository's receipt directories.
//!
//! Exit codes: 0 no failure found, 1 a failure found (or the input unreadable), 2 usage.

use crate::exit;
use crate::output::{errln, esc, esc_path, outln};
use clap::Args;
use qual_runner::triage::{Evidence, Triage, STAGES};
use std::path::{Path, PathBuf};

/// The JSON document's schema.
pub const SCHEMA: &str = "kiln-qual.triage.v1";

/// `--json`: the schema tag, then the triage (`receipt`, `run_dir`, `verdict`, `failures` in
/// stage order, each `{stage, case_id, repetition, message, evidence: {path, pointer, line,
/// text}}`).
#[derive(serde::Serialize)]
struct Document<'a> {
    schema: &'static str,
    #[serde(flatten)]
    triage: &'a Triage,
}

/// Arguments of `kiln-qual triage`.
#[derive(Args, Debug)]
pub struct TriageArgs {
    /// A receipt, or a run directory (`.qualification/runs/<receipt-id>`).
    #[arg(value_parser = super::args::Path, value_name = "RECEIPT|RUN_DIR")]
    pub target: PathBuf,
    /// Repository root (default: the git top level of the receipt's or run directory's
    /// location).
    #[arg(long, value_parser = super::args::Path, value_name = "R")]
    pub root: Option<PathBuf>,
    /// Print the triage as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

fn discover(near: &Path) -> PathBuf {
    let start = if near.is_dir() {
        near.to_path_buf()
    } else {
        near.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    };
    qual_probe::git::Repo::discover(&start)
        .map(|r| r.root().to_path_buf())
        .unwrap_or(start)
}

/// Runs `kiln-qual triage`.
pub fn run(a: TriageArgs) -> i32 {
    if std::fs::symlink_metadata(&a.target).is_err() {
        errln!(
            "kiln-qual: failed to triage {}: no such receipt or run directory (a run refused by preflight, exit 3, creates nothing: its one stderr line is the whole evidence)",
            esc_path(&a.target)
        );
        return exit::FAILED;
    }
    let root = a.root.clone().unwrap_or_else(|| discover(&a.target));
    let (receipt_path, run_dir) = if a.target.is_dir() {
        let id = a
            .target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let found = qual_runner::triage::find_receipt(&root, &id);
        (found, a.target.clone())
    } else {
        (Some(a.target.clone()), PathBuf::new())
    };
    let receipt = match &receipt_path {
        Some(p) => match qual_receipt::validate::load(p) {
            Ok((v, _)) => Some((p.clone(), v)),
            Err(e) => {
                errln!(
                    "kiln-qual: failed to triage {}: the receipt cannot be read: {} (pass a receipt or its run directory)",
                    esc_path(p),
                    esc(&e.to_string())
                );
                return exit::FAILED;
            }
        },
        None => None,
    };
    let run_dir = match &receipt {
        Some((_, v)) if run_dir.as_os_str().is_empty() => {
            let id = v
                .get("receipt_id")
                .and_then(|i| i.as_str())
                .unwrap_or_default();
            root.join(".qualification/runs").join(id)
        }
        _ => run_dir,
    };
    let t = qual_runner::triage::triage(
        &root,
        receipt.as_ref().map(|(p, v)| (p.as_path(), v)),
        &run_dir,
    );
    if a.json {
        crate::output::print_json(&Document {
            schema: SCHEMA,
            triage: &t,
        });
    } else {
        print_text(&t);
    }
    if t.failures.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    }
}

fn evidence(e: &Evidence) -> String {
    let mut s = esc(&e.path).into_owned();
    if let Some(p) = &e.pointer {
        s.push('#');
        s.push_str(&esc(p));
    }
    if let Some(l) = e.line {
        s.push_str(&format!(":{l}"));
    }
    if let Some(t) = &e.text {
        s.push_str(&format!("  {}", esc(t)));
    }
    s
}

fn print_text(t: &Triage) {
    match &t.receipt {
        Some(r) => outln!("receipt: {}", esc(r)),
        None => outln!("receipt: none found"),
    }
    outln!("run directory: {}", esc(&t.run_dir));
    if let Some(v) = &t.verdict {
        outln!("verdict: {}", esc(v));
    }
    let Some(first) = t.failures.first() else {
        outln!("no failure found in any stage");
        return;
    };
    let case = match (&first.case_id, first.repetition) {
        (Some(c), Some(r)) => format!(" (case {}, repetition {r})", esc(c)),
        (Some(c), None) => format!(" (case {})", esc(c)),
        _ => String::new(),
    };
    outln!("\nfirst failure: {}{case}", first.stage.title());
    outln!("  {}", esc(&first.message));
    outln!("  evidence: {}", evidence(&first.evidence));
    outln!("\nstages:");
    for s in STAGES {
        let n = t.failures.iter().filter(|f| f.stage == s).count();
        let state = if n == 0 {
            "ok".to_string()
        } else {
            format!("{n} failure{}", if n == 1 { "" } else { "s" })
        };
        outln!("  {:<18} {state}", s.title());
    }
    if t.failures.len() > 1 {
        outln!("\nthe rest:");
        for f in &t.failures[1..] {
            let case = f
                .case_id
                .as_deref()
                .map(|c| format!(" [{}]", esc(c)))
                .unwrap_or_default();
            outln!("  {}{case}: {}", f.stage.title(), esc(&f.message));
            outln!("      {}", evidence(&f.evidence));
        }
    }
}
