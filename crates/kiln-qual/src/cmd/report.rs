//! `kiln-qual report PATH... [--markdown [OUT]] [--junit OUT] [--csv DIR] [--html OUT]`, and
//! `kiln-qual report --fleet PLAN DIR` (the fleet report of `cmd::fleet`).
//!
//! Thin wiring: `qual_report` finds, reads and renders, `qual_campaign::report` reads and
//! verifies the serving-campaign records found (summaries and per-profile receipts, recognized
//! by their `schema`; a record that does not verify is refused, never rendered), and
//! `qual_report::bench` reads `bench` result documents strictly (a bad one is refused with every
//! violation); this module writes the files and prints. With no format flag the Markdown
//! summary goes to stdout. Files are replaced atomically (a temporary file and a rename).
//!
//! Exit codes: 0 every file given or found was a valid receipt and every report was written
//! (whatever the verdicts); 1 a file was refused (the reports are still written, listing it)
//! or a report could not be written; 2 usage.

use crate::exit;
use crate::output::{errln, esc, esc_path, out};
use clap::Args;
use std::path::PathBuf;

/// Arguments of `kiln-qual report`.
///
/// PATH may also be a campaign directory, a campaign summary (`campaign.<engine>.json`), a
/// per-profile campaign receipt or a `kiln-qual bench` result document (`--output`/`--json`).
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Receipt files, or directories searched recursively for them.
    #[arg(value_parser = super::args::Path, required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// A Markdown summary (GitHub job summary / PR comment): to stdout, or to OUT.md.
    #[arg(long, value_name = "OUT.md", num_args = 0..=1, default_missing_value = "-", value_parser = super::args::Path)]
    pub markdown: Option<PathBuf>,
    /// JUnit XML: one testcase per case × repetition.
    #[arg(long, value_name = "OUT.xml", value_parser = super::args::Path)]
    pub junit: Option<PathBuf>,
    /// CSV: `DIR/metrics.csv`, one row per metric observation, with campaigns
    /// `DIR/campaign-rows.csv`, one row per campaign row, and with bench results
    /// `DIR/bench-rows.csv`, one row per metric of each load point × run (DIR is created).
    #[arg(long, value_name = "DIR", value_parser = super::args::Path)]
    pub csv: Option<PathBuf>,
    /// One self-contained offline HTML page with the verdict matrix and plots.
    #[arg(long, value_name = "OUT.html", value_parser = super::args::Path)]
    pub html: Option<PathBuf>,
    /// Check the attestations of campaigns against these keys (OpenSSH public key lines): a
    /// signed campaign shows its signer, a bad signature refuses it, an unsigned one is noted.
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    pub trusted_keys: Option<PathBuf>,
    /// PATH is the evidence directory of this fleet plan: the fleet report (every planned
    /// target verified again; host × workload/variant, failures first, the missing targets,
    /// who signed) in Markdown on stdout, as `kiln-qual fleet report`.
    #[arg(long, value_parser = super::args::Path, value_name = "PLAN",
          conflicts_with_all = ["markdown", "junit", "csv", "html", "trusted_keys"])]
    pub fleet: Option<PathBuf>,
}

/// Runs `kiln-qual report`.
pub fn run(a: ReportArgs) -> i32 {
    if let Some(plan) = a.fleet {
        let mut paths = a.paths;
        if paths.len() != 1 {
            errln!("kiln-qual: failed to report a fleet: give exactly one evidence directory");
            return exit::USAGE;
        }
        let evidence = paths.remove(0);
        return super::fleet::report(super::fleet::TreeArgs {
            plan,
            evidence,
            root: None,
        });
    }
    let trusted = match super::trusted_keys(a.trusted_keys.as_deref()) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let mut set = qual_report::collect(&a.paths);
    qual_campaign::report::load_into(&mut set, trusted.as_deref());
    let mut code = exit::OK;
    for f in &set.refused {
        errln!(
            "kiln-qual: refused {}: {}",
            esc_path(&f.path),
            esc(f.reasons.first().map(String::as_str).unwrap_or(""))
        );
        for r in f.reasons.iter().skip(1) {
            errln!("  {}", esc(r));
        }
        code = exit::FAILED;
    }
    for n in &set.evidence_notes {
        errln!("kiln-qual: note: {}", esc(n));
    }
    let markdown = match (&a.markdown, &a.junit, &a.csv, &a.html) {
        (None, None, None, None) => Some(PathBuf::from("-")),
        (m, ..) => m.clone(),
    };
    let mut outputs: Vec<(PathBuf, String)> = Vec::new();
    if let Some(p) = markdown {
        let text = qual_report::markdown::render(&set);
        if p.as_os_str() == "-" {
            out!("{text}");
        } else {
            outputs.push((p, text));
        }
    }
    if let Some(p) = &a.junit {
        outputs.push((p.clone(), qual_report::junit::render(&set)));
    }
    if let Some(dir) = &a.csv {
        if let Err(e) = std::fs::create_dir_all(dir) {
            errln!("kiln-qual: failed to create {}: {e}", esc_path(dir));
            return exit::FAILED;
        }
        outputs.push((dir.join("metrics.csv"), qual_report::csv::render(&set)));
        if !set.campaigns.is_empty() {
            outputs.push((
                dir.join("campaign-rows.csv"),
                qual_report::campaign::csv(&set.campaigns),
            ));
        }
        if !set.benches.is_empty() {
            outputs.push((
                dir.join("bench-rows.csv"),
                qual_report::bench::csv(&set.benches),
            ));
        }
    }
    if let Some(p) = &a.html {
        outputs.push((p.clone(), qual_report::html::render(&set)));
    }
    for (path, text) in outputs {
        match qual_report::write_file(&path, text.as_bytes()) {
            Ok(()) => errln!("wrote {}", esc_path(&path)),
            Err(e) => {
                errln!("kiln-qual: failed to {}", esc(&e.to_string()));
                code = exit::FAILED;
            }
        }
    }
    let (n, passed, failed) = count(&set);
    errln!(
        "report: {} ({passed} passed, {failed} failed), {}{}{} refused{}",
        if n == 1 {
            "1 receipt".to_owned()
        } else {
            format!("{n} receipts")
        },
        campaigns(&set),
        benches(&set),
        set.refused.len(),
        if set.skipped > 0 {
            format!(", {} other JSON files skipped", set.skipped)
        } else {
            String::new()
        }
    );
    code
}

fn campaigns(set: &qual_report::ReportSet) -> String {
    let passed = set.campaigns.iter().filter(|c| c.passed()).count();
    tally(set.campaigns.len(), passed, "campaign", "failed")
}

fn benches(set: &qual_report::ReportSet) -> String {
    let passed = set.benches.iter().filter(|b| b.passed()).count();
    tally(set.benches.len(), passed, "bench result", "not passed")
}

/// `N things (P passed, F <rest>), ` for the summary line; empty without any.
fn tally(n: usize, passed: usize, thing: &str, rest: &str) -> String {
    if n == 0 {
        return String::new();
    }
    format!(
        "{n} {thing}{} ({passed} passed, {} {rest}), ",
        if n == 1 { "" } else { "s" },
        n - passed
    )
}

fn count(set: &qual_report::ReportSet) -> (usize, usize, usize) {
    let passed = set.receipts.iter().filter(|r| r.passed()).count();
    (set.receipts.len(), passed, set.receipts.len() - passed)
}
