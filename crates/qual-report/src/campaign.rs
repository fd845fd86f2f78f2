//! Serving-campaign records (`kiln-qual campaign`) as report inputs: the view a report renders
//! and its sections in every format.
//!
//! This crate only *recognizes* a campaign record (by its `schema` member) while collecting;
//! reading it strictly, verifying its self-hashes and building the [`CampaignView`] belong to
//! `qual-campaign` (its record types and checks are the one home for them, and that crate
//! brings process and async dependencies this crate must not have). The CLI joins the two:
//! `qual_report::collect` lists the campaign files in [`crate::ReportSet::campaign_files`],
//! `qual_campaign::report` reads them into [`crate::ReportSet::campaigns`] or refuses them.
//!
//! Per profile the sections show one row per (concurrency, repeat): verdict, the failed gates
//! by name, request and token throughput, TTFT and ITL percentiles, the memory peak with the
//! source that measured it, the output-set hash and the row's pairing with the reference
//! engine (matched, or each mismatch kind with the first divergent byte). A report never
//! re-judges: every verdict is the record's.

use crate::junit::JunitCase;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Schema of a per-profile campaign receipt (the document table's, which pins it to
/// `qual_campaign::records::RECEIPT_SCHEMA`).
pub const RECEIPT_SCHEMA: &str = qual_documents::CAMPAIGN_RECEIPT_SCHEMA;
/// Schema of a campaign summary (the document table's).
pub const SUMMARY_SCHEMA: &str = qual_documents::CAMPAIGN_SUMMARY_SCHEMA;

/// One campaign: a summary with its receipts, or a receipt read on its own.
#[derive(Clone, Debug, PartialEq)]
pub struct CampaignView {
    /// The summary (or the lone receipt) read.
    pub path: PathBuf,
    /// Campaign id.
    pub campaign_id: String,
    /// Engine name.
    pub engine: String,
    /// The summary's verdict, or the lone receipt's.
    pub verdict: String,
    /// Whether this came from a summary (`false`: a receipt given without its summary).
    pub from_summary: bool,
    /// Profiles in the summary's order.
    pub profiles: Vec<ProfileView>,
    /// Profiles the summary lists as not run: (profile, the profile whose failure stopped it).
    pub not_run: Vec<(String, Option<String>)>,
    /// Who signed the campaign, when its attestation verified with a trusted key
    /// (`<keyid> (<comment>)`); `None` when unsigned or not checked.
    pub signed_by: Option<String>,
}

impl CampaignView {
    /// Whether the verdict is `passed`.
    pub fn passed(&self) -> bool {
        self.verdict == "passed"
    }
}

/// One per-profile receipt.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileView {
    /// Receipt path.
    pub path: PathBuf,
    /// Profile name.
    pub profile: String,
    /// Receipt verdict.
    pub verdict: String,
    /// `receipt_sha256`.
    pub receipt_sha256: String,
    /// Memory source name (`process_tree_pss`, `drm_vram_used`, …).
    pub memory_source: String,
    /// What that source measures.
    pub memory_measures: String,
    /// The pairing with the reference engine, when one was made.
    pub reference: Option<ReferenceView>,
    /// Completion failures (phase: detail), in order.
    pub failures: Vec<String>,
    /// Measured rows in order.
    pub rows: Vec<RowView>,
}

/// The receipt-level facts of a pairing.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceView {
    /// Reference engine name.
    pub engine: String,
    /// Reference receipt path as recorded.
    pub receipt: String,
    /// `matched` or `mismatched`.
    pub result: String,
    /// `exact_output` or `inputs_only`.
    pub comparison_mode: String,
    /// `required` or `evidence_only`.
    pub verdict_effect: String,
    /// Mismatches that belong to no candidate row (a run missing from the candidate).
    pub unplaced: Vec<Mismatch>,
}

/// One difference from the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// `missing_run`, `prompt_mismatch`, `prompt_token_mismatch` or `output_mismatch`.
    pub kind: String,
    /// What differs (for outputs: each request with its first divergent byte).
    pub detail: String,
}

/// A row's pairing.
#[derive(Clone, Debug, PartialEq)]
pub enum RowPairing {
    /// No reference was given.
    NotPaired,
    /// Paired, no difference.
    Matched,
    /// Paired, with these differences.
    Mismatched(Vec<Mismatch>),
}

/// A failed gate.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedGate {
    /// Gate name.
    pub name: String,
    /// What was measured against what.
    pub detail: String,
}

/// TTFT or ITL percentiles, ms (`None` where no sample existed).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Pcts {
    /// Median.
    pub p50: Option<f64>,
    /// 99th.
    pub p99: Option<f64>,
    /// 99.9th.
    pub p999: Option<f64>,
}

/// One measured row.
#[derive(Clone, Debug, PartialEq)]
pub struct RowView {
    /// Requests dispatched at once.
    pub concurrency: u64,
    /// Repeat index.
    pub repeat: u64,
    /// Row verdict.
    pub verdict: String,
    /// Requests sent.
    pub request_count: u64,
    /// Requests that succeeded.
    pub success_count: u64,
    /// Gates evaluated.
    pub gate_count: usize,
    /// The gates that failed.
    pub failed_gates: Vec<FailedGate>,
    /// Requests per second.
    pub request_throughput_per_s: f64,
    /// Output tokens per second.
    pub output_token_throughput_per_s: f64,
    /// Time to first token, ms.
    pub ttft_ms: Pcts,
    /// Pooled client-visible inter-token latency, ms.
    pub itl_ms: Pcts,
    /// Memory peak in bytes and reads taken (`None`: the sampler failed).
    pub memory: Option<(u64, u64)>,
    /// `output_set_sha256`.
    pub output_set_sha256: String,
    /// Pairing with the reference row.
    pub pairing: RowPairing,
}

impl RowView {
    /// Whether the verdict is `passed`.
    pub fn passed(&self) -> bool {
        self.verdict == "passed"
    }

    fn gates_text(&self) -> String {
        if self.failed_gates.is_empty() {
            format!("{} passed", self.gate_count)
        } else {
            let names: Vec<&str> = self.failed_gates.iter().map(|g| g.name.as_str()).collect();
            format!("failed: {}", names.join(", "))
        }
    }

    fn pairing_text(&self) -> String {
        match &self.pairing {
            RowPairing::NotPaired => "not paired".into(),
            RowPairing::Matched => "paired, matched".into(),
            RowPairing::Mismatched(m) => m
                .iter()
                .map(|x| format!("{}: {}", x.kind, x.detail))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    fn pairing_status(&self) -> &'static str {
        match self.pairing {
            RowPairing::NotPaired => "not_paired",
            RowPairing::Matched => "matched",
            RowPairing::Mismatched(_) => "mismatched",
        }
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), crate::num)
}

fn pcts(p: &Pcts) -> String {
    format!("{} / {} / {}", opt(p.p50), opt(p.p99), opt(p.p999))
}

fn mib(b: u64) -> String {
    format!("{} MiB", crate::num(b as f64 / (1024.0 * 1024.0)))
}

fn memory(r: &RowView, source: &str) -> String {
    match r.memory {
        Some((peak, samples)) => format!("{} ({source}, {samples} samples)", mib(peak)),
        None => format!("not measured ({source})"),
    }
}

/// The first 16 hex digits of a `sha256:` hash.
fn short_hash(h: &str) -> &str {
    let body = h.strip_prefix("sha256:").unwrap_or(h);
    body.get(..16).unwrap_or(body)
}

fn reference_line(p: &ProfileView) -> String {
    match &p.reference {
        None => "not paired with a reference".into(),
        Some(r) => format!(
            "paired with {} ({}, {}, {}): {}",
            r.engine, r.receipt, r.comparison_mode, r.verdict_effect, r.result
        ),
    }
}

/// The Markdown section.
pub fn markdown(o: &mut String, campaigns: &[CampaignView]) {
    if campaigns.is_empty() {
        return;
    }
    let md = crate::md;
    let _ = writeln!(o, "### Serving campaigns\n");
    for c in campaigns {
        let _ = writeln!(
            o,
            "**{}** engine `{}`: {} ({}{})\n",
            md(&c.campaign_id),
            md(&c.engine),
            if c.passed() {
                "✅ passed".to_owned()
            } else {
                format!("❌ **{}**", md(&c.verdict))
            },
            md(&c.path.to_string_lossy()),
            match (&c.signed_by, c.from_summary) {
                (Some(by), _) => format!(", signed by {}", md(by)),
                (None, true) => String::new(),
                (None, false) => ", a receipt without its summary".to_owned(),
            }
        );
        for p in &c.profiles {
            let _ = writeln!(
                o,
                "#### {} — {}\n\nMemory: `{}` ({}). Reference: {}.\n",
                md(&p.profile),
                md(&p.verdict),
                md(&p.memory_source),
                md(&p.memory_measures),
                md(&reference_line(p))
            );
            for f in &p.failures {
                let _ = writeln!(o, "- failure: {}", md(f));
            }
            if let Some(r) = &p.reference {
                for m in &r.unplaced {
                    let _ = writeln!(o, "- {}: {}", md(&m.kind), md(&m.detail));
                }
            }
            if !p.failures.is_empty()
                || p.reference.as_ref().is_some_and(|r| !r.unplaced.is_empty())
            {
                o.push('\n');
            }
            if p.rows.is_empty() {
                o.push_str("No rows measured.\n\n");
                continue;
            }
            o.push_str("| c | repeat | verdict | gates | req/s | tok/s | TTFT p50/p99/p99.9 ms | ITL p50/p99/p99.9 ms | memory peak | output set | reference |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
            for r in &p.rows {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | `{}` | {} |",
                    r.concurrency,
                    r.repeat,
                    if r.passed() {
                        "passed".to_owned()
                    } else {
                        format!("**{}**", md(&r.verdict))
                    },
                    md(&r.gates_text()),
                    crate::num(r.request_throughput_per_s),
                    crate::num(r.output_token_throughput_per_s),
                    pcts(&r.ttft_ms),
                    pcts(&r.itl_ms),
                    md(&memory(r, &p.memory_source)),
                    md(short_hash(&r.output_set_sha256)),
                    md(&r.pairing_text())
                );
            }
            o.push('\n');
        }
        for (name, by) in &c.not_run {
            let _ = writeln!(
                o,
                "- {}: not run after the failure of {}",
                md(name),
                md(by.as_deref().unwrap_or("an earlier profile"))
            );
        }
        if !c.not_run.is_empty() {
            o.push('\n');
        }
    }
}

/// The HTML section.
pub fn html(o: &mut String, campaigns: &[CampaignView]) {
    if campaigns.is_empty() {
        return;
    }
    let esc = crate::svg::esc;
    o.push_str("<h2 id=\"campaigns\">Serving campaigns</h2>\n<p>One row per concurrency × repeat, as the campaign record holds it; the memory source says what the peak measures.</p>\n");
    for c in campaigns {
        let _ = writeln!(
            o,
            "<h3>{} <code>{}</code> <span class=\"{}\">{}</span></h3>\n<p><code>{}</code>{}</p>",
            esc(&c.campaign_id),
            esc(&c.engine),
            if c.passed() { "good" } else { "bad" },
            esc(&c.verdict),
            esc(&c.path.to_string_lossy()),
            match (&c.signed_by, c.from_summary) {
                (Some(by), _) => format!(" (signed by {})", esc(by)),
                (None, true) => String::new(),
                (None, false) => " (a receipt without its summary)".to_owned(),
            }
        );
        for p in &c.profiles {
            let _ = writeln!(
                o,
                "<h4>{} <span class=\"{}\">{}</span></h4>\n<p>memory <code>{}</code>: {}. Reference: {}.</p>",
                esc(&p.profile),
                if p.verdict == "passed" { "good" } else { "bad" },
                esc(&p.verdict),
                esc(&p.memory_source),
                esc(&p.memory_measures),
                esc(&reference_line(p))
            );
            let mut notes: Vec<String> =
                p.failures.iter().map(|f| format!("failure: {f}")).collect();
            if let Some(r) = &p.reference {
                notes.extend(
                    r.unplaced
                        .iter()
                        .map(|m| format!("{}: {}", m.kind, m.detail)),
                );
            }
            if !notes.is_empty() {
                o.push_str("<ul>");
                for n in &notes {
                    let _ = write!(o, "<li class=\"bad\">{}</li>", esc(n));
                }
                o.push_str("</ul>\n");
            }
            if p.rows.is_empty() {
                o.push_str("<p>No rows measured.</p>\n");
                continue;
            }
            o.push_str("<div class=\"wrap\"><table class=\"stack\"><thead><tr><th scope=\"col\">c</th><th scope=\"col\">repeat</th><th scope=\"col\">verdict</th><th scope=\"col\">gates</th><th scope=\"col\">req/s</th><th scope=\"col\">tok/s</th><th scope=\"col\">TTFT p50/p99/p99.9 ms</th><th scope=\"col\">ITL p50/p99/p99.9 ms</th><th scope=\"col\">memory peak</th><th scope=\"col\">output set</th><th scope=\"col\">reference</th></tr></thead><tbody>\n");
            for r in &p.rows {
                let gates = if r.failed_gates.is_empty() {
                    esc(&r.gates_text())
                } else {
                    r.failed_gates
                        .iter()
                        .map(|g| format!("<code>{}</code>: {}", esc(&g.name), esc(&g.detail)))
                        .collect::<Vec<_>>()
                        .join("<br>")
                };
                let _ = writeln!(
                    o,
                    "<tr><td data-label=\"c\" class=\"n\">{}</td><td data-label=\"repeat\" class=\"n\">{}</td><td data-label=\"verdict\" class=\"{}\">{}</td><td data-label=\"gates\">{gates}</td><td data-label=\"req/s\" class=\"n\">{}</td><td data-label=\"tok/s\" class=\"n\">{}</td><td data-label=\"TTFT ms\">{}</td><td data-label=\"ITL ms\">{}</td><td data-label=\"memory\">{}</td><td data-label=\"output set\"><code title=\"{}\">{}</code></td><td data-label=\"reference\" class=\"{}\">{}</td></tr>",
                    r.concurrency,
                    r.repeat,
                    if r.passed() { "good" } else { "bad" },
                    esc(&r.verdict),
                    crate::num(r.request_throughput_per_s),
                    crate::num(r.output_token_throughput_per_s),
                    esc(&pcts(&r.ttft_ms)),
                    esc(&pcts(&r.itl_ms)),
                    esc(&memory(r, &p.memory_source)),
                    esc(&r.output_set_sha256),
                    esc(short_hash(&r.output_set_sha256)),
                    match r.pairing {
                        RowPairing::Mismatched(_) => "bad",
                        RowPairing::Matched => "good",
                        RowPairing::NotPaired => "",
                    },
                    esc(&r.pairing_text())
                );
            }
            o.push_str("</tbody></table></div>\n");
        }
        if !c.not_run.is_empty() {
            o.push_str("<ul>");
            for (name, by) in &c.not_run {
                let _ = write!(
                    o,
                    "<li>{}: not run after the failure of {}</li>",
                    esc(name),
                    esc(by.as_deref().unwrap_or("an earlier profile"))
                );
            }
            o.push_str("</ul>\n");
        }
    }
}

/// One JUnit suite per profile: (suite name, classname, receipt path, verdict, cases).
pub(crate) fn junit_suites(
    c: &CampaignView,
) -> Vec<(String, String, String, String, Vec<JunitCase>)> {
    let mut out = Vec::new();
    for p in &c.profiles {
        let mut cases = Vec::new();
        for r in &p.rows {
            let mut failure = None;
            if !r.failed_gates.is_empty() || !r.passed() {
                let names: Vec<&str> = r.failed_gates.iter().map(|g| g.name.as_str()).collect();
                let mut body: Vec<String> = r
                    .failed_gates
                    .iter()
                    .map(|g| format!("{}: {}", g.name, g.detail))
                    .collect();
                if let RowPairing::Mismatched(m) = &r.pairing {
                    body.extend(
                        m.iter()
                            .map(|x| format!("reference {}: {}", x.kind, x.detail)),
                    );
                }
                failure = Some((
                    "gate".to_owned(),
                    if names.is_empty() {
                        format!(
                            "{} of {} requests succeeded",
                            r.success_count, r.request_count
                        )
                    } else {
                        format!("failed gates: {}", names.join(", "))
                    },
                    body.join("\n"),
                ));
            } else if let (RowPairing::Mismatched(m), Some(rf)) = (&r.pairing, &p.reference) {
                if rf.verdict_effect == "required" {
                    failure = Some((
                        "reference_mismatch".to_owned(),
                        format!("differs from the reference {}", rf.engine),
                        m.iter()
                            .map(|x| format!("{}: {}", x.kind, x.detail))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    ));
                }
            }
            cases.push(JunitCase {
                name: format!("c{} r{}", r.concurrency, r.repeat),
                time: 0.0,
                failure,
                skipped: None,
            });
        }
        let mut extra: Vec<String> = p.failures.clone();
        if let Some(rf) = &p.reference {
            if rf.verdict_effect == "required" {
                extra.extend(
                    rf.unplaced
                        .iter()
                        .map(|m| format!("{}: {}", m.kind, m.detail)),
                );
            }
        }
        if !extra.is_empty() || (p.verdict != "passed" && cases.iter().all(|k| k.failure.is_none()))
        {
            cases.push(JunitCase {
                name: format!("{} (receipt)", p.profile),
                time: 0.0,
                failure: Some((
                    "receipt".to_owned(),
                    extra
                        .first()
                        .cloned()
                        .unwrap_or_else(|| format!("receipt verdict {}", p.verdict)),
                    extra.join("\n"),
                )),
                skipped: None,
            });
        }
        out.push((
            format!("campaign {}/{}/{}", c.campaign_id, c.engine, p.profile),
            format!("campaign.{}.{}.{}", c.campaign_id, c.engine, p.profile),
            p.path.to_string_lossy().into_owned(),
            p.verdict.clone(),
            cases,
        ));
    }
    for (name, by) in &c.not_run {
        out.push((
            format!("campaign {}/{}/{name}", c.campaign_id, c.engine),
            format!("campaign.{}.{}.{name}", c.campaign_id, c.engine),
            c.path.to_string_lossy().into_owned(),
            "not_run_after_failure".to_owned(),
            vec![JunitCase {
                name: name.clone(),
                time: 0.0,
                failure: None,
                skipped: Some(format!(
                    "not run after the failure of {}",
                    by.as_deref().unwrap_or("an earlier profile")
                )),
            }],
        ));
    }
    out
}

/// The header of `campaign-rows.csv`.
pub const CSV_HEADER: &str = "campaign_id,engine,profile,receipt_verdict,concurrency,repeat,verdict,request_count,success_count,failed_gates,request_throughput_per_s,output_token_throughput_per_s,ttft_ms_p50,ttft_ms_p99,ttft_ms_p999,itl_ms_p50,itl_ms_p99,itl_ms_p999,memory_peak_bytes,memory_samples,memory_source,output_set_sha256,reference_engine,reference_pairing,reference_mismatches";

/// `campaign-rows.csv`: one row per campaign row (numbers as Rust writes the shortest exact
/// form; empty where absent).
pub fn csv(campaigns: &[CampaignView]) -> String {
    let cell = crate::csv::cell;
    let n = |v: Option<f64>| v.map_or_else(String::new, |x| x.to_string());
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for c in campaigns {
        for p in &c.profiles {
            for r in &p.rows {
                let failed: Vec<&str> = r.failed_gates.iter().map(|g| g.name.as_str()).collect();
                let mismatches = match &r.pairing {
                    RowPairing::Mismatched(m) => m
                        .iter()
                        .map(|x| format!("{}: {}", x.kind, x.detail))
                        .collect::<Vec<_>>()
                        .join("; "),
                    _ => String::new(),
                };
                let cells = [
                    cell(&c.campaign_id),
                    cell(&c.engine),
                    cell(&p.profile),
                    cell(&p.verdict),
                    r.concurrency.to_string(),
                    r.repeat.to_string(),
                    cell(&r.verdict),
                    r.request_count.to_string(),
                    r.success_count.to_string(),
                    cell(&failed.join(";")),
                    r.request_throughput_per_s.to_string(),
                    r.output_token_throughput_per_s.to_string(),
                    n(r.ttft_ms.p50),
                    n(r.ttft_ms.p99),
                    n(r.ttft_ms.p999),
                    n(r.itl_ms.p50),
                    n(r.itl_ms.p99),
                    n(r.itl_ms.p999),
                    r.memory.map_or_else(String::new, |m| m.0.to_string()),
                    r.memory.map_or_else(String::new, |m| m.1.to_string()),
                    cell(&p.memory_source),
                    cell(&r.output_set_sha256),
                    cell(p.reference.as_ref().map_or("", |x| x.engine.as_str())),
                    r.pairing_status().to_owned(),
                    cell(&mismatches),
                ];
                out.push_str(&cells.join(","));
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hostile() -> CampaignView {
        let evil = "<script>alert(1)</script>|*x*\u{1b}[31m";
        CampaignView {
            path: PathBuf::from("out/campaign.e.json"),
            campaign_id: evil.into(),
            engine: "e".into(),
            verdict: "failed".into(),
            from_summary: true,
            signed_by: None,
            profiles: vec![ProfileView {
                path: PathBuf::from("out/greedy-short.e.json"),
                profile: "greedy-short".into(),
                verdict: "failed".into(),
                receipt_sha256: "sha256:00".into(),
                memory_source: "process_tree_pss".into(),
                memory_measures: "host memory".into(),
                reference: Some(ReferenceView {
                    engine: "ref".into(),
                    receipt: "ref/greedy-short.ref.json".into(),
                    result: "mismatched".into(),
                    comparison_mode: "exact_output".into(),
                    verdict_effect: "required".into(),
                    unplaced: vec![],
                }),
                failures: vec![format!("measurement: {evil}")],
                rows: vec![RowView {
                    concurrency: 4,
                    repeat: 0,
                    verdict: "failed".into(),
                    request_count: 4,
                    success_count: 4,
                    gate_count: 7,
                    failed_gates: vec![FailedGate {
                        name: "dispatch_spread".into(),
                        detail: evil.into(),
                    }],
                    request_throughput_per_s: 1.5,
                    output_token_throughput_per_s: 24.0,
                    ttft_ms: Pcts {
                        p50: Some(3.0),
                        p99: Some(4.0),
                        p999: None,
                    },
                    itl_ms: Pcts::default(),
                    memory: Some((3 * 1024 * 1024, 5)),
                    output_set_sha256: "sha256:abcdef0123456789abcdef".into(),
                    pairing: RowPairing::Mismatched(vec![Mismatch {
                        kind: "output_mismatch".into(),
                        detail: "request 1: content from byte 7".into(),
                    }]),
                }],
            }],
            not_run: vec![("mixed".into(), Some("greedy-short".into()))],
        }
    }

    #[test]
    fn untrusted_text_is_escaped_in_every_format() {
        let c = vec![hostile()];
        let mut h = String::new();
        html(&mut h, &c);
        assert!(!h.contains("<script>"), "{h}");
        assert!(h.contains("&lt;script&gt;"));
        assert!(!h.contains('\u{1b}'));
        let mut m = String::new();
        markdown(&mut m, &c);
        assert!(m.contains("\\<script\\>"), "{m}");
        assert!(!m.contains('\u{1b}'));
        assert!(m.contains("failed: dispatch\\_spread"));
        assert!(m.contains("output\\_mismatch: request 1: content from byte 7"));
        assert!(m.contains("3 MiB (process\\_tree\\_pss, 5 samples)"));
        assert!(m.contains("not run after the failure of greedy-short"));
        let s = csv(&c);
        assert_eq!(s.lines().count(), 2);
        assert!(s.contains(",dispatch_spread,1.5,24,3,4,,,,,3145728,5,process_tree_pss,"));
        assert!(s.contains(",ref,mismatched,output_mismatch: request 1: content from byte 7"));
        let suites = junit_suites(&c[0]);
        assert_eq!(suites.len(), 2);
        let cases = &suites[0].4;
        assert_eq!(cases[0].name, "c4 r0");
        assert_eq!(
            cases[0].failure.as_ref().unwrap().1,
            "failed gates: dispatch_spread"
        );
        assert_eq!(cases[1].name, "greedy-short (receipt)");
        assert!(suites[1].4[0].skipped.is_some());
    }
}
