//! `kiln-qual campaign verify DIR`: re-checks a published campaign from its files alone.
//!
//! Checks: the summary's schema and self-hash; every listed receipt's file hash, schema and
//! self-hash; per row, the prompt-set hash (prompts regenerated from the workload), the
//! output-set hash, the row verdict against its gates and counts; each receipt's verdict
//! against its content; the pairing, recomputed against the reference receipt it names
//! (whose file hash must still match); and the summary's verdict; then everything
//! [`crate::recompute`] re-derives from the records' own numbers (run plan, campaign-wide
//! workload, counts, throughputs, gates, evidence mode, directory listing, the reference's
//! provenance). Every finding is reported. The attestation is [`crate::attest`]'s.

use crate::campaign::{receipt_verdict, workload_fingerprint};
use crate::pairing::{self, ReferenceRole};
use crate::prompts::{self, measured_phase};
use crate::recompute;
use crate::records::{self, ProfileStatus, Receipt, Summary, Verdict, VerdictEffect};
use crate::row;
use std::path::{Path, PathBuf};

/// What verification found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The summary checked.
    pub summary: Option<PathBuf>,
    /// Receipts checked.
    pub receipts: Vec<PathBuf>,
    /// Every problem, lowercase.
    pub findings: Vec<String>,
}

/// Finds the single `campaign.<engine>.json` in `dir` (or the named engine's).
pub fn find_summary(dir: &Path, engine: Option<&str>) -> Result<PathBuf, String> {
    if let Some(e) = engine {
        return Ok(dir.join(records::summary_name(e)));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("read {}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("campaign.") && n.ends_with(".json"))
        })
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(format!("no campaign.<engine>.json in {}", dir.display())),
        n => Err(format!(
            "{n} campaign summaries in {}; name the engine with --engine",
            dir.display()
        )),
    }
}

/// Checks one receipt's internal consistency (everything but the pairing).
pub fn check_receipt(r: &Receipt, findings: &mut Vec<String>, at: &str) {
    let mut f = |m: String| findings.push(format!("{at}: {m}"));
    if workload_fingerprint(&r.workload) != r.workload_fingerprint {
        f("/workload_fingerprint does not match the workload".into());
    }
    let contract = r.workload.profile.contract();
    for (i, row) in r.runs.iter().enumerate() {
        let phase = measured_phase(row.concurrency as usize, row.repeat as usize);
        if row.phase != phase {
            f(format!(
                "/runs/{i}/phase: expected {}",
                qual_json::show::quote(&phase)
            ));
        }
        match prompts::row_prompts(
            &r.workload.prompt_set_id,
            &phase,
            row.concurrency as usize,
            contract.prompt_profile,
            r.workload.long_prompt_repetitions as usize,
        ) {
            Ok(p) if prompts::prompt_set_sha256(&p) == row.prompt_set_sha256 => {}
            _ => f(format!(
                "/runs/{i}/prompt_set_sha256 does not match the regenerated prompts"
            )),
        }
        if row::output_set_sha256(&row.outputs) != row.output_set_sha256 {
            f(format!(
                "/runs/{i}/output_set_sha256 does not match the outputs"
            ));
        }
        for (k, o) in row.outputs.iter().enumerate() {
            if let Some(x) = &o.exact_output {
                let mut joined = x.reasoning.as_bytes().to_vec();
                joined.push(0x1e);
                joined.extend_from_slice(x.content.as_bytes());
                if x.reasoning.len() as u64 != o.reasoning_utf8_bytes
                    || x.content.len() as u64 != o.content_utf8_bytes
                {
                    f(format!(
                        "/runs/{i}/outputs/{k}: exact output does not match its byte counts"
                    ));
                }
                if qual_json::sha256_prefixed(&joined) != o.output_sha256
                    || qual_json::sha256_prefixed(x.content.as_bytes()) != o.content_sha256
                    || qual_json::sha256_prefixed(x.reasoning.as_bytes()) != o.reasoning_sha256
                {
                    f(format!(
                        "/runs/{i}/outputs/{k}: exact output does not match its hashes"
                    ));
                }
            }
        }
        let gates_ok = row.gates.iter().all(|g| g.outcome == Verdict::Passed);
        let want = Verdict::of(
            row.success_count == row.request_count
                && row.errors.is_empty()
                && row.completion_tokens == row.request_count * r.workload.max_tokens
                && gates_ok,
        );
        if want != row.verdict {
            f(format!(
                "/runs/{i}/verdict does not follow from its gates and counts"
            ));
        }
        let mut names: Vec<&str> = row.gates.iter().map(|g| g.name.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        if names.len() != n {
            f(format!("/runs/{i}/gates: gate names repeat"));
        }
    }
    for m in recompute::receipt_findings(r) {
        f(m);
    }
    if receipt_verdict(r) != r.verdict {
        f("/verdict does not follow from the receipt's content".into());
    }
    if let Some(c) = &r.comparison {
        let want = match r.reference_role.as_str() {
            "qualification_gate" => VerdictEffect::Required,
            _ => VerdictEffect::EvidenceOnly,
        };
        if c.verdict_effect != want {
            f("/comparison/verdict_effect does not follow from the reference role".into());
        }
    }
}

/// Recomputes the pairing against the reference receipt it names and checks where that
/// reference comes from ([`recompute::reference_findings`]); `reference_dir` is the summary's.
pub fn check_pairing(
    r: &Receipt,
    reference_dir: Option<&str>,
    findings: &mut Vec<String>,
    at: &str,
) {
    let Some(c) = &r.comparison else {
        return;
    };
    let path = Path::new(&c.reference_receipt);
    let (bytes, reference) = match pairing::read_receipt(path) {
        Ok(x) => x,
        Err(e) => {
            findings.push(format!("{at}: /comparison cannot be recomputed: {e}"));
            return;
        }
    };
    compare_again(r, path, &bytes, findings, at);
    for m in recompute::reference_findings(r, &reference, &bytes, reference_dir) {
        findings.push(format!("{at}: {m}"));
    }
}

/// The pairing recomputed against `bytes` (read from `path`) must equal the recorded one.
pub fn compare_again(r: &Receipt, path: &Path, bytes: &[u8], findings: &mut Vec<String>, at: &str) {
    let Some(c) = &r.comparison else {
        return;
    };
    let role = if r.reference_role == "qualification_gate" {
        ReferenceRole::QualificationGate
    } else {
        ReferenceRole::Evidence
    };
    match pairing::compare_bytes(r, path, bytes, role) {
        Ok(again) if again == *c => {}
        Ok(_) => findings.push(format!(
            "{at}: /comparison differs from the pairing recomputed against {}",
            path.display()
        )),
        Err(e) => findings.push(format!("{at}: /comparison cannot be recomputed: {e}")),
    }
}

/// Verifies the campaign in `dir`.
pub fn verify(dir: &Path, engine: Option<&str>) -> Report {
    let mut rep = Report::default();
    let path = match find_summary(dir, engine) {
        Ok(p) => p,
        Err(e) => {
            rep.findings.push(e);
            return rep;
        }
    };
    rep.summary = Some(path.clone());
    let at = path.display().to_string();
    let (doc, s): (_, Summary) = match records::read_record(&path) {
        Ok((_, d, s)) => (d, s),
        Err(e) => {
            rep.findings.push(e.to_string());
            return rep;
        }
    };
    if s.schema != records::SUMMARY_SCHEMA {
        rep.findings
            .push(format!("{at}: /schema is not {}", records::SUMMARY_SCHEMA));
    }
    if records::document_hash(&doc, "summary_sha256") != s.summary_sha256 {
        rep.findings
            .push(format!("{at}: /summary_sha256 does not match the content"));
    }
    let mut all_passed = true;
    let mut read: Vec<(String, Receipt)> = Vec::new();
    for (i, line) in s.profiles.iter().enumerate() {
        if line.status != ProfileStatus::Completed {
            all_passed = false;
            continue;
        }
        let Some(name) = &line.receipt else {
            rep.findings
                .push(format!("{at}: /profiles/{i}/receipt is missing"));
            all_passed = false;
            continue;
        };
        if name.contains('/') || name != &records::receipt_name(line.profile, &s.engine) {
            rep.findings.push(format!(
                "{at}: /profiles/{i}/receipt names an unexpected file"
            ));
            continue;
        }
        let rp = path.parent().unwrap_or(Path::new(".")).join(name);
        rep.receipts.push(rp.clone());
        match pairing::read_receipt(&rp) {
            Ok((bytes, r)) => {
                let shown = rp.display().to_string();
                if Some(qual_json::sha256_prefixed(&bytes)) != line.receipt_sha256 {
                    rep.findings.push(format!(
                        "{at}: /profiles/{i}/receipt_sha256 does not match {shown}"
                    ));
                }
                if line.verdict != Some(r.verdict) {
                    rep.findings.push(format!(
                        "{at}: /profiles/{i}/verdict differs from the receipt"
                    ));
                }
                if r.workload.profile != line.profile || r.engine.name != s.engine {
                    rep.findings.push(format!(
                        "{shown}: profile or engine differs from the summary"
                    ));
                }
                check_receipt(&r, &mut rep.findings, &shown);
                for m in recompute::evidence_findings(&r, &s.output_evidence) {
                    rep.findings.push(format!("{shown}: {m}"));
                }
                check_pairing(&r, s.reference_dir.as_deref(), &mut rep.findings, &shown);
                all_passed &= r.verdict == Verdict::Passed;
                read.push((shown, r));
            }
            Err(e) => {
                rep.findings.push(e);
                all_passed = false;
            }
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    rep.findings
        .extend(recompute::directory_findings(dir, &path, &s));
    let pairs: Vec<(String, &Receipt)> = read.iter().map(|(p, r)| (p.clone(), r)).collect();
    rep.findings
        .extend(recompute::shared_workload_findings(&s, &pairs));
    if Verdict::of(all_passed) != s.verdict {
        rep.findings
            .push(format!("{at}: /verdict does not follow from the profiles"));
    }
    rep
}

/// Whether a file declares the campaign receipt schema (a cheap peek: strict parse, `schema`).
pub fn is_campaign_receipt(path: &Path) -> bool {
    qual_json::read_file_limited(path, records::MAX_RECORD_BYTES)
        .ok()
        .and_then(|b| qual_json::from_slice(&b).ok())
        .and_then(|v| v.get("schema").and_then(|s| s.as_str().map(str::to_owned)))
        .is_some_and(|s| s == records::RECEIPT_SCHEMA)
}

/// Checks one campaign receipt file on its own: schema, self-hash, internal consistency and
/// its pairing. `Err` when it cannot be read at all; otherwise the findings (empty = valid).
pub fn check_receipt_file(path: &Path) -> Result<Vec<String>, String> {
    let (_, r) = pairing::read_receipt(path)?;
    Ok(receipt_findings(path, &r))
}

/// [`check_receipt_file`] over bytes already read from `path` (which names it in findings).
pub fn check_receipt_bytes(path: &Path, bytes: &[u8]) -> Result<Vec<String>, String> {
    let r = pairing::receipt_from_bytes(path, bytes)?;
    Ok(receipt_findings(path, &r))
}

fn receipt_findings(path: &Path, r: &Receipt) -> Vec<String> {
    let mut findings = Vec::new();
    let at = path.display().to_string();
    check_receipt(r, &mut findings, &at);
    check_pairing(r, None, &mut findings, &at);
    findings
}
