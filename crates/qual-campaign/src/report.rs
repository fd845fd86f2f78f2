//! Campaign records as `kiln-qual report` inputs: read strictly, verified, then turned into
//! `qual_report::campaign` views.
//!
//! Nothing is rendered from a record that does not verify. A summary: its schema and
//! self-hash, then every listed receipt (file name, file hash against the summary, schema,
//! self-hash, the internal checks of [`verify::check_receipt`] — prompt-set and output-set
//! hashes regenerated, row and receipt verdicts re-derived, and [`crate::recompute`]'s
//! re-derivations, with the directory listing and campaign-wide workload for a summary). A
//! receipt found without a summary that lists it: the same receipt checks. When a receipt's pairing names a reference
//! receipt that is still there with the bytes it recorded, the pairing is recomputed and must
//! equal the recorded one; a reference that moved or changed since is noted, not refused (a
//! report may read an archived copy without the reference beside it). Any finding refuses the
//! whole file with every finding.

use crate::pairing;
use crate::recompute;
use crate::records::{
    self, Match, Mismatch, ProfileStatus, Receipt, Summary, Verdict, VerdictEffect,
};
use crate::verify;
use qual_report::campaign as view;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What reading the campaign files found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Verified campaigns, summaries first (in path order), then lone receipts.
    pub campaigns: Vec<view::CampaignView>,
    /// Files refused, with every finding.
    pub refused: Vec<qual_report::Refused>,
    /// Things not checked (a reference receipt that is gone), one line each.
    pub notes: Vec<String>,
}

/// Reads, verifies and converts every campaign file of `set`, moving the results into it.
/// With `trusted` keys, a summary's attestation, when present, must verify (else the campaign
/// is refused) and its signer is shown; an unsigned campaign is noted.
pub fn load_into(set: &mut qual_report::ReportSet, trusted: Option<&[qual_attest::TrustedKey]>) {
    let l = load(&set.campaign_files, trusted);
    set.campaigns.extend(l.campaigns);
    set.refused.extend(l.refused);
    set.refused.sort_by(|a, b| a.path.cmp(&b.path));
    set.evidence_notes.extend(l.notes);
}

fn schema_of(path: &Path) -> Option<String> {
    qual_json::read_file_limited(path, records::MAX_RECORD_BYTES)
        .ok()
        .and_then(|b| qual_json::from_slice(&b).ok())
        .and_then(|v| v.get("schema").and_then(|s| s.as_str().map(str::to_owned)))
}

fn key(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Reads every campaign file in `files` (summaries and receipts, as `qual_report::collect`
/// found them).
pub fn load(files: &[PathBuf], trusted: Option<&[qual_attest::TrustedKey]>) -> Loaded {
    let mut out = Loaded::default();
    let (summaries, receipts): (Vec<&PathBuf>, Vec<&PathBuf>) = files
        .iter()
        .partition(|p| schema_of(p).as_deref() == Some(records::SUMMARY_SCHEMA));
    let mut covered = BTreeSet::new();
    for path in summaries {
        match summary(path, trusted, &mut out.notes) {
            Ok((v, listed)) => {
                covered.extend(listed.iter().map(|p| key(p)));
                out.campaigns.push(v);
            }
            Err((listed, reasons)) => {
                // Its receipts are refused with it, not shown on their own.
                covered.extend(listed.iter().map(|p| key(p)));
                out.refused.push(qual_report::Refused {
                    path: path.clone(),
                    reasons,
                });
            }
        }
    }
    for path in receipts {
        if covered.contains(&key(path)) {
            continue;
        }
        match receipt(path, None, None, &mut out.notes) {
            Ok((r, p)) => out.campaigns.push(view::CampaignView {
                path: path.clone(),
                campaign_id: r.campaign_id.clone(),
                engine: r.engine.name.clone(),
                verdict: verdict(r.verdict),
                from_summary: false,
                profiles: vec![p],
                not_run: Vec::new(),
                signed_by: None,
            }),
            Err(reasons) => out.refused.push(qual_report::Refused {
                path: path.clone(),
                reasons,
            }),
        }
    }
    out
}

type SummaryRead = Result<(view::CampaignView, Vec<PathBuf>), (Vec<PathBuf>, Vec<String>)>;

fn summary(
    path: &Path,
    trusted: Option<&[qual_attest::TrustedKey]>,
    notes: &mut Vec<String>,
) -> SummaryRead {
    let at = path.display().to_string();
    let (doc, s): (_, Summary) = match records::read_record(path) {
        Ok((_, d, s)) => (d, s),
        Err(e) => return Err((Vec::new(), vec![e.to_string()])),
    };
    let mut findings = Vec::new();
    if s.schema != records::SUMMARY_SCHEMA {
        findings.push(format!("{at}: /schema is not {}", records::SUMMARY_SCHEMA));
    }
    let want = records::document_hash(&doc, "summary_sha256");
    if want != s.summary_sha256 {
        findings.push(format!(
            "{at}: /summary_sha256 does not match the content (recomputed {want})"
        ));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut listed = Vec::new();
    let mut profiles = Vec::new();
    let mut not_run = Vec::new();
    let mut read: Vec<(String, Receipt)> = Vec::new();
    for (i, line) in s.profiles.iter().enumerate() {
        if line.status != ProfileStatus::Completed {
            not_run.push((
                line.profile.name().to_owned(),
                line.blocked_by_profile.map(|p| p.name().to_owned()),
            ));
            continue;
        }
        let Some(name) = &line.receipt else {
            findings.push(format!("{at}: /profiles/{i}/receipt is missing"));
            continue;
        };
        if name.contains('/') || name != &records::receipt_name(line.profile, &s.engine) {
            findings.push(format!(
                "{at}: /profiles/{i}/receipt names an unexpected file"
            ));
            continue;
        }
        let rp = dir.join(name);
        listed.push(rp.clone());
        match receipt(
            &rp,
            s.reference_dir.as_deref(),
            Some(&s.output_evidence),
            notes,
        ) {
            Ok((r, p)) => {
                let bytes = qual_json::read_file_limited(&rp, records::MAX_RECORD_BYTES)
                    .unwrap_or_default();
                if Some(qual_json::sha256_prefixed(&bytes)) != line.receipt_sha256 {
                    findings.push(format!(
                        "{at}: /profiles/{i}/receipt_sha256 does not match {}",
                        rp.display()
                    ));
                }
                if line.verdict != Some(r.verdict)
                    || r.workload.profile != line.profile
                    || r.engine.name != s.engine
                {
                    findings.push(format!(
                        "{at}: /profiles/{i} differs from {} (profile, engine or verdict)",
                        rp.display()
                    ));
                }
                profiles.push(p);
                read.push((rp.display().to_string(), r));
            }
            Err(e) => findings.extend(e),
        }
    }
    let mut signed_by = None;
    if let Some(keys) = trusted {
        if qual_attest::envelope_path(path).exists() {
            match crate::attest::verify(path, keys) {
                Ok(v) => signed_by = Some(format!("{} ({})", v.keyid, v.comment)),
                Err(e) => findings.push(format!(
                    "{}: failed to {e}",
                    qual_attest::envelope_path(path).display()
                )),
            }
        } else {
            notes.push(format!(
                "{at}: not signed (no {})",
                qual_attest::envelope_path(path).display()
            ));
        }
    }
    findings.extend(recompute::directory_findings(dir, path, &s));
    let pairs: Vec<(String, &Receipt)> = read.iter().map(|(p, r)| (p.clone(), r)).collect();
    findings.extend(recompute::shared_workload_findings(&s, &pairs));
    if !findings.is_empty() {
        return Err((listed, findings));
    }
    Ok((
        view::CampaignView {
            path: path.to_path_buf(),
            campaign_id: s.campaign_id,
            engine: s.engine,
            verdict: verdict(s.verdict),
            from_summary: true,
            profiles,
            not_run,
            signed_by,
        },
        listed,
    ))
}

fn receipt(
    path: &Path,
    reference_dir: Option<&str>,
    evidence: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<(Receipt, view::ProfileView), Vec<String>> {
    let (_, r) = pairing::read_receipt(path).map_err(|e| vec![e])?;
    let at = path.display().to_string();
    let mut findings = Vec::new();
    verify::check_receipt(&r, &mut findings, &at);
    if let Some(mode) = evidence {
        findings.extend(
            recompute::evidence_findings(&r, mode)
                .into_iter()
                .map(|m| format!("{at}: {m}")),
        );
    }
    if let Some(c) = &r.comparison {
        let reference = Path::new(&c.reference_receipt);
        match qual_json::read_file_limited(reference, records::MAX_RECORD_BYTES) {
            Ok(b) if qual_json::sha256_prefixed(&b) == c.reference_receipt_sha256 => {
                verify::compare_again(&r, reference, &b, &mut findings, &at);
                match pairing::receipt_from_bytes(reference, &b) {
                    Ok(reference) => findings.extend(
                        recompute::reference_findings(&r, &reference, &b, reference_dir)
                            .into_iter()
                            .map(|m| format!("{at}: {m}")),
                    ),
                    Err(e) => findings.push(format!("{at}: /comparison cannot be recomputed: {e}")),
                }
            }
            Ok(_) => notes.push(format!(
                "{at}: the reference receipt {} changed since the pairing; the pairing is shown as recorded",
                reference.display()
            )),
            Err(_) => notes.push(format!(
                "{at}: the reference receipt {} is not there; the pairing is shown as recorded",
                reference.display()
            )),
        }
    }
    if !findings.is_empty() {
        return Err(findings);
    }
    let p = profile_view(path, &r);
    Ok((r, p))
}

fn verdict(v: Verdict) -> String {
    match v {
        Verdict::Passed => "passed",
        Verdict::Failed => "failed",
    }
    .to_owned()
}

fn enum_text<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "-".to_owned(),
    }
}

fn mismatch_view(m: &Mismatch) -> view::Mismatch {
    let (kind, detail) = match m {
        Mismatch::MissingRun { missing_from, .. } => {
            ("missing_run", format!("missing from the {missing_from}"))
        }
        Mismatch::PromptMismatch {
            expected, actual, ..
        } => (
            "prompt_mismatch",
            format!("prompt set {actual}, reference {expected}"),
        ),
        Mismatch::PromptTokenMismatch {
            expected, actual, ..
        } => (
            "prompt_token_mismatch",
            format!("prompt tokens {actual:?}, reference {expected:?}"),
        ),
        Mismatch::OutputMismatch {
            request_mismatches, ..
        } => {
            let parts: Vec<String> = request_mismatches
                .iter()
                .map(|q| {
                    let mut at = Vec::new();
                    if let Some(b) = q.content_first_divergent_utf8_byte {
                        at.push(format!("content from byte {b}"));
                    }
                    if let Some(b) = q.reasoning_first_divergent_utf8_byte {
                        at.push(format!("reasoning from byte {b}"));
                    }
                    if at.is_empty() {
                        at.push(format!(
                            "{} differ{}",
                            q.fields.join(", "),
                            if q.exact_output_compared {
                                ""
                            } else {
                                " (hashes only)"
                            }
                        ));
                    }
                    format!("request {}: {}", q.index, at.join(", "))
                })
                .collect();
            ("output_mismatch", parts.join("; "))
        }
    };
    view::Mismatch {
        kind: kind.to_owned(),
        detail,
    }
}

fn run_of(m: &Mismatch) -> (u64, u64) {
    match m {
        Mismatch::MissingRun {
            concurrency,
            repeat,
            ..
        }
        | Mismatch::PromptMismatch {
            concurrency,
            repeat,
            ..
        }
        | Mismatch::PromptTokenMismatch {
            concurrency,
            repeat,
            ..
        }
        | Mismatch::OutputMismatch {
            concurrency,
            repeat,
            ..
        } => (*concurrency, *repeat),
    }
}

fn profile_view(path: &Path, r: &Receipt) -> view::ProfileView {
    let rows: Vec<view::RowView> = r
        .runs
        .iter()
        .map(|row| {
            let pairing = match &r.comparison {
                None => view::RowPairing::NotPaired,
                Some(c) => {
                    let mine: Vec<view::Mismatch> = c
                        .mismatches
                        .iter()
                        .filter(|m| run_of(m) == (row.concurrency, row.repeat))
                        .map(mismatch_view)
                        .collect();
                    if mine.is_empty() {
                        view::RowPairing::Matched
                    } else {
                        view::RowPairing::Mismatched(mine)
                    }
                }
            };
            let failed_gates = row
                .gates
                .iter()
                .filter(|g| g.outcome != Verdict::Passed)
                .map(|g| view::FailedGate {
                    name: g.name.clone(),
                    detail: g.detail.clone(),
                })
                .collect();
            let pcts = |p: &records::Percentiles| view::Pcts {
                p50: p.p50,
                p99: p.p99,
                p999: p.p999,
            };
            view::RowView {
                concurrency: row.concurrency,
                repeat: row.repeat,
                verdict: verdict(row.verdict),
                request_count: row.request_count,
                success_count: row.success_count,
                gate_count: row.gates.len(),
                failed_gates,
                request_throughput_per_s: row.request_throughput_per_s,
                output_token_throughput_per_s: row.output_token_throughput_per_s,
                ttft_ms: pcts(&row.ttft_ms),
                itl_ms: pcts(&row.client_visible_itl_ms),
                memory: row.memory.map(|m| (m.peak_bytes, m.samples)),
                output_set_sha256: row.output_set_sha256.clone(),
                pairing,
            }
        })
        .collect();
    let reference = r.comparison.as_ref().map(|c| {
        let present: BTreeSet<(u64, u64)> =
            r.runs.iter().map(|x| (x.concurrency, x.repeat)).collect();
        view::ReferenceView {
            engine: c.reference_engine.clone(),
            receipt: c.reference_receipt.clone(),
            result: match c.result {
                Match::Matched => "matched",
                Match::Mismatched => "mismatched",
            }
            .to_owned(),
            comparison_mode: enum_text(&c.comparison_mode),
            verdict_effect: match c.verdict_effect {
                VerdictEffect::Required => "required",
                VerdictEffect::EvidenceOnly => "evidence_only",
            }
            .to_owned(),
            unplaced: c
                .mismatches
                .iter()
                .filter(|m| !present.contains(&run_of(m)))
                .map(|m| {
                    let (cc, rr) = run_of(m);
                    let mut v = mismatch_view(m);
                    v.detail = format!("c={cc} r={rr}: {}", v.detail);
                    v
                })
                .collect(),
        }
    });
    view::ProfileView {
        path: path.to_path_buf(),
        profile: r.workload.profile.name().to_owned(),
        verdict: verdict(r.verdict),
        receipt_sha256: r.receipt_sha256.clone(),
        memory_source: r.memory_sampler.source.clone(),
        memory_measures: r.memory_sampler.measures.clone(),
        reference,
        failures: r
            .completion
            .failures
            .iter()
            .map(|f| format!("{}: {}", f.phase, f.detail))
            .collect(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RequestMismatch;

    #[test]
    fn mismatches_name_their_kind_and_first_divergent_byte() {
        let m = Mismatch::OutputMismatch {
            concurrency: 4,
            repeat: 1,
            mismatch_count: 2,
            mismatched_request_indices: vec![0, 3],
            request_mismatches: vec![
                RequestMismatch {
                    index: 0,
                    fields: vec!["content_sha256".into(), "output_sha256".into()],
                    expected_output_sha256: None,
                    actual_output_sha256: None,
                    exact_output_compared: true,
                    reasoning_first_divergent_utf8_byte: None,
                    content_first_divergent_utf8_byte: Some(17),
                },
                RequestMismatch {
                    index: 3,
                    fields: vec!["output_sha256".into()],
                    expected_output_sha256: None,
                    actual_output_sha256: None,
                    exact_output_compared: false,
                    reasoning_first_divergent_utf8_byte: None,
                    content_first_divergent_utf8_byte: None,
                },
            ],
        };
        assert_eq!(run_of(&m), (4, 1));
        let v = mismatch_view(&m);
        assert_eq!(v.kind, "output_mismatch");
        assert_eq!(
            v.detail,
            "request 0: content from byte 17; request 3: output_sha256 differ (hashes only)"
        );
        let v = mismatch_view(&Mismatch::MissingRun {
            concurrency: 8,
            repeat: 0,
            missing_from: "candidate".into(),
        });
        assert_eq!(
            (v.kind.as_str(), v.detail.as_str()),
            ("missing_run", "missing from the candidate")
        );
    }

    #[test]
    fn report_recognizes_the_schemas_written_here() {
        assert_eq!(
            qual_report::campaign::RECEIPT_SCHEMA,
            crate::records::RECEIPT_SCHEMA
        );
        assert_eq!(
            qual_report::campaign::SUMMARY_SCHEMA,
            crate::records::SUMMARY_SCHEMA
        );
    }
}
