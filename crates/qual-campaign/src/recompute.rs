//! Re-derivation of a campaign's records from their own recorded numbers: what `campaign
//! verify` and `kiln-qual report` check beyond the self-hashes.
//!
//! A self-hash proves only that whoever wrote the file ran the hash function; anyone can edit
//! a receipt and recompute it. What an edit cannot keep is the agreement between the numbers
//! a row records and what follows from them, so this module recomputes, per receipt:
//!
//! - the run plan: exactly one row per (size, repeat) of the workload, in the order the
//!   campaign runs them (a shorter list only with a recorded failure), and the completion
//!   counts; the fields the profile owns (sampling, prompt-token shape, comparison mode); the
//!   run id;
//! - per row: the counts (requests, successes, errors, outputs, completion tokens, prompt-token
//!   vector and its extremes), the throughputs from the counts and the window, percentile
//!   order and the window's bound on end-to-end latency, the memory snapshot's arithmetic,
//!   and every gate — name, order, outcome and detail — with the gate functions the row was
//!   measured with ([`crate::row`]), fed from the row's evidence instead of the live records;
//! - per summary: every receipt file of the summary's engine in its directory is listed;
//! - per pairing: the reference is another engine's receipt of the same profile, in the
//!   summary's reference directory, listed with the same bytes by its own campaign summary,
//!   and itself internally consistent.
//!
//! What it cannot establish: numbers that were rewritten consistently (a window and every
//! throughput scaled together, a peak and its gate detail lowered together) agree with
//! themselves; only a signature by a trusted key ([`crate::attest`]) ties the bytes to who
//! measured them.

use crate::campaign::workload_fingerprint;
use crate::prompts::measured_phase;
use crate::records::{self, Gate, Receipt, Row, Summary, Verdict};
use crate::row::{self, Served};
use std::path::Path;

/// Relative tolerance for recomputed floating-point values (the file holds the shortest
/// round-trip spelling, so the recomputation is normally exact).
const REL_TOL: f64 = 1e-9;

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= REL_TOL * a.abs().max(b.abs())
}

fn at_most(a: f64, b: f64) -> bool {
    a <= b || close(a, b)
}

fn show(v: f64) -> String {
    // Rust's shortest round-trip spelling.
    format!("{v}")
}

/// Every finding of the run plan and of each row of `r`, as `<pointer> …` messages.
pub fn receipt_findings(r: &Receipt) -> Vec<String> {
    let mut f = Vec::new();
    plan_findings(r, &mut f);
    for (i, row) in r.runs.iter().enumerate() {
        row_findings(i, row, &mut f);
        gate_findings(r, i, row, &mut f);
    }
    f
}

fn plan_findings(r: &Receipt, f: &mut Vec<String>) {
    let w = &r.workload;
    let contract = w.profile.contract();
    let want_run_id = format!("{}-{}-{}", r.campaign_id, r.engine.name, w.profile.name());
    if w.run_id != want_run_id {
        f.push(format!(
            "/workload/run_id is {}, the campaign, engine and profile give {}",
            qual_json::show::quote(&w.run_id),
            qual_json::show::quote(&want_run_id)
        ));
    }
    if w.sampling.temperature != contract.temperature
        || w.sampling.top_p != contract.top_p
        || w.prompt_tokens != contract.prompt_tokens
        || w.comparison_mode != contract.comparison_mode
    {
        f.push(format!(
            "/workload: sampling, prompt_tokens or comparison_mode differ from what profile {} owns",
            w.profile.name()
        ));
    }
    if w.sizes.is_empty() || w.sizes.windows(2).any(|x| x[0] >= x[1]) || w.repeats == 0 {
        f.push("/workload/sizes must be strictly increasing and /workload/repeats positive".into());
    }
    let plan: Vec<(u64, u64)> = w
        .sizes
        .iter()
        .flat_map(|&c| (0..w.repeats).map(move |k| (c, k)))
        .collect();
    let expected = plan.len() as u64;
    if r.completion.expected_run_count != expected {
        f.push(format!(
            "/completion/expected_run_count is {}, sizes × repeats give {expected}",
            r.completion.expected_run_count
        ));
    }
    if r.completion.completed_run_count != r.runs.len() as u64 {
        f.push(format!(
            "/completion/completed_run_count is {}, the receipt holds {} rows",
            r.completion.completed_run_count,
            r.runs.len()
        ));
    }
    if r.runs.len() > plan.len() {
        f.push(format!(
            "/runs holds {} rows, sizes × repeats give {expected}",
            r.runs.len()
        ));
    }
    for (i, (row, (c, k))) in r.runs.iter().zip(&plan).enumerate() {
        if (row.concurrency, row.repeat) != (*c, *k) {
            f.push(format!(
                "/runs/{i} is concurrency {} repeat {}, the plan gives concurrency {c} repeat {k} (a row is missing, added or moved)",
                row.concurrency, row.repeat
            ));
        }
    }
    if r.runs.len() < plan.len() && r.completion.failures.is_empty() {
        let (c, k) = plan[r.runs.len()];
        f.push(format!(
            "/runs lacks {} ({} of {expected} rows) and /completion/failures records no reason",
            measured_phase(c as usize, k as usize),
            r.runs.len()
        ));
    }
}

/// Checks of one row's own arithmetic (counts, throughputs, latency order, memory).
fn row_findings(i: usize, row: &Row, f: &mut Vec<String>) {
    let mut push = |m: String| f.push(format!("/runs/{i}/{m}"));
    let n = row.request_count;
    if n != row.concurrency {
        push(format!(
            "request_count is {n}, the row's concurrency is {}",
            row.concurrency
        ));
    }
    if row.success_count > n || row.error_count != n - row.success_count.min(n) {
        push(format!(
            "error_count is {}, request_count − success_count gives {}",
            row.error_count,
            n.saturating_sub(row.success_count)
        ));
    }
    if row.errors.len() as u64 != row.error_count {
        push(format!(
            "errors lists {} requests, error_count is {}",
            row.errors.len(),
            row.error_count
        ));
    }
    if row.outputs.len() as u64 != row.success_count {
        push(format!(
            "outputs lists {} requests, success_count is {}",
            row.outputs.len(),
            row.success_count
        ));
    }
    let mut indices: Vec<u64> = row.errors.iter().map(|e| e.index).collect();
    indices.extend(row.outputs.iter().map(|o| o.index));
    indices.sort_unstable();
    if indices != (0..n).collect::<Vec<_>>() {
        push("outputs and errors do not name each request index once".into());
    }
    let tokens: u64 = row.outputs.iter().map(|o| o.completion_tokens).sum();
    if tokens != row.completion_tokens {
        push(format!(
            "completion_tokens is {}, the outputs sum to {tokens}",
            row.completion_tokens
        ));
    }
    prompt_token_findings(row, &mut push);
    throughput_findings(row, &mut push);
    if let Some(m) = row.memory {
        if m.peak_bytes < m.baseline_bytes
            || m.peak_delta_bytes != m.peak_bytes - m.baseline_bytes.min(m.peak_bytes)
        {
            push(format!(
                "memory/peak_delta_bytes is {}, peak {} − baseline {} gives {}",
                m.peak_delta_bytes,
                m.peak_bytes,
                m.baseline_bytes,
                m.peak_bytes.saturating_sub(m.baseline_bytes)
            ));
        }
    }
}

fn prompt_token_findings(row: &Row, push: &mut impl FnMut(String)) {
    let counts = &row.prompt_token_counts;
    if counts.len() as u64 != row.request_count {
        push(format!(
            "prompt_token_counts holds {} values for {} requests",
            counts.len(),
            row.request_count
        ));
        return;
    }
    for e in &row.errors {
        if counts.get(e.index as usize).is_some_and(|&c| c != 0) {
            push(format!(
                "prompt_token_counts/{} is not 0 for a failed request",
                e.index
            ));
        }
    }
    let (lo, hi) = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    if (row.prompt_tokens_min, row.prompt_tokens_max) != (lo, hi) {
        push(format!(
            "prompt_tokens_min/max are {}/{}, prompt_token_counts give {lo}/{hi}",
            row.prompt_tokens_min, row.prompt_tokens_max
        ));
    }
}

fn throughput_findings(row: &Row, push: &mut impl FnMut(String)) {
    let w = row.elapsed_s;
    if !(w.is_finite() && w >= 0.0) {
        push(format!("elapsed_s is {}, not a duration", show(w)));
        return;
    }
    let per_s = |x: f64| if w > 0.0 { x / w } else { 0.0 };
    for (name, got, want) in [
        (
            "request_throughput_per_s",
            row.request_throughput_per_s,
            per_s(row.success_count as f64),
        ),
        (
            "output_token_throughput_per_s",
            row.output_token_throughput_per_s,
            per_s(row.completion_tokens as f64),
        ),
        (
            "slo_goodput_requests_per_s",
            row.slo_goodput_requests_per_s,
            per_s(row.slo_good_request_count as f64),
        ),
    ] {
        if !close(got, want) {
            push(format!(
                "{name} is {}, the row's counts over elapsed_s {} give {}",
                show(got),
                show(w),
                show(want)
            ));
        }
    }
    if row.slo_good_request_count > row.success_count {
        push(format!(
            "slo_good_request_count {} exceeds success_count {}",
            row.slo_good_request_count, row.success_count
        ));
    }
    if !at_most(
        row.slo_goodput_tokens_per_s,
        row.output_token_throughput_per_s,
    ) {
        push(format!(
            "slo_goodput_tokens_per_s {} exceeds output_token_throughput_per_s {}",
            show(row.slo_goodput_tokens_per_s),
            show(row.output_token_throughput_per_s)
        ));
    }
    let window_ms = w * 1e3;
    for (name, p) in [
        ("ttft_ms", row.ttft_ms),
        ("client_visible_itl_ms", row.client_visible_itl_ms),
        ("e2e_ms", row.e2e_ms),
    ] {
        let v = [p.p50, p.p99, p.p999];
        let present: Vec<f64> = v.iter().flatten().copied().collect();
        if !(present.is_empty() || present.len() == 3)
            || present.windows(2).any(|x| !at_most(x[0], x[1]))
            || present.iter().any(|&x| x < 0.0 || !at_most(x, window_ms))
        {
            push(format!(
                "{name}: percentiles out of order or beyond the row's window of {} ms",
                show(window_ms)
            ));
        }
    }
    if row.success_count > 0 && row.e2e_ms.p50.is_none() {
        push("e2e_ms is null although requests succeeded".into());
    }
}

/// The gates the row's own numbers give, compared one by one with the recorded gates.
fn gate_findings(r: &Receipt, i: usize, row: &Row, f: &mut Vec<String>) {
    let w = &r.workload;
    let n = row.request_count as usize;
    let served: Vec<Served> = row
        .outputs
        .iter()
        .map(|o| Served {
            index: o.index as usize,
            completion_tokens: Some(o.completion_tokens),
            prompt_tokens: row.prompt_token_counts.get(o.index as usize).copied(),
            finish_reason: o.finish_reason.as_deref(),
        })
        .collect();
    let mut want: Vec<(Gate, Derived)> = Vec::new();
    let push_all = |g: Vec<Gate>, d: Derived, want: &mut Vec<(Gate, Derived)>| {
        want.extend(g.into_iter().map(|g| (g, d)));
    };
    let first_error = row
        .errors
        .first()
        .map(|e| (e.index as usize, e.error.as_str()));
    push_all(
        vec![row::succeeded_gate(row.outputs.len(), n, first_error)],
        Derived::Whole,
        &mut want,
    );
    // Requests the client refused may have carried a zero usage record; the row keeps no
    // usage of failed requests, so with failures only a failing outcome can be derived.
    let bad: Vec<usize> = served
        .iter()
        .filter(|s| s.completion_tokens == Some(0) || s.prompt_tokens == Some(0))
        .map(|s| s.index)
        .collect();
    let usage = row::usage_gate(&bad, !served.is_empty());
    let d = if row.errors.is_empty() {
        Derived::Whole
    } else if usage.outcome == Verdict::Failed {
        Derived::Outcome
    } else {
        Derived::Unknown
    };
    push_all(vec![usage], d, &mut want);
    let spread = if row.dispatch_spread_ms < 0.0 {
        f64::MAX
    } else {
        row.dispatch_spread_ms
    };
    push_all(
        vec![row::dispatch_gate(spread, w.max_dispatch_spread_ms)],
        Derived::Whole,
        &mut want,
    );
    let mut g = Vec::new();
    row::output_gates(&mut g, w.max_tokens, w.prompt_tokens, &served, n);
    row::memory_gates(&mut g, row.memory, w.memory_limit_bytes);
    push_all(g, Derived::Whole, &mut want);
    if r.metrics_endpoint.is_some() {
        let mut g = Vec::new();
        let scraped = row.server_metrics.clone().map(Ok);
        row::server_gates(
            &mut g,
            Some(&scraped.clone().unwrap_or(Err(String::new()))),
            row.success_count,
            row.completion_tokens,
        );
        // A failed scrape's reason is not kept in the row: its outcome is all there is.
        let d = if scraped.is_some() {
            Derived::Whole
        } else {
            Derived::Outcome
        };
        push_all(g, d, &mut want);
    }
    compare_gates(i, &row.gates, &want, f);
}

/// How much of a gate the row's numbers determine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Derived {
    /// Name, outcome and detail.
    Whole,
    /// Name and outcome.
    Outcome,
    /// Name only.
    Unknown,
}

fn compare_gates(i: usize, got: &[Gate], want: &[(Gate, Derived)], f: &mut Vec<String>) {
    let names =
        |g: &mut dyn Iterator<Item = &Gate>| -> Vec<String> { g.map(|g| g.name.clone()).collect() };
    let got_names = names(&mut got.iter());
    let want_names = names(&mut want.iter().map(|(g, _)| g));
    if got_names != want_names {
        f.push(format!(
            "/runs/{i}/gates are {}, the receipt's workload gives {}",
            qual_json::show::list(&got_names),
            qual_json::show::list(&want_names)
        ));
        return;
    }
    for (k, (g, (w, d))) in got.iter().zip(want).enumerate() {
        if *d != Derived::Unknown && g.outcome != w.outcome {
            f.push(format!(
                "/runs/{i}/gates/{k} ({}): outcome is {}, the row's recorded numbers give {} ({})",
                g.name,
                verdict_name(g.outcome),
                verdict_name(w.outcome),
                w.detail
            ));
        } else if *d == Derived::Whole && g.detail != w.detail {
            f.push(format!(
                "/runs/{i}/gates/{k} ({}): detail is {}, the row's recorded numbers give {}",
                g.name,
                qual_json::show::quote(&g.detail),
                qual_json::show::quote(&w.detail)
            ));
        }
    }
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Passed => "passed",
        Verdict::Failed => "failed",
    }
}

/// Every file of the summary's engine in `dir` must be a receipt the summary lists (a profile
/// dropped from the summary leaves its receipt behind), and the profile lines must be
/// well-formed: each profile once, a receipt exactly for the completed ones.
pub fn directory_findings(dir: &Path, summary_path: &Path, s: &Summary) -> Vec<String> {
    let mut f = Vec::new();
    let at = summary_path.display().to_string();
    let mut seen = Vec::new();
    for (i, line) in s.profiles.iter().enumerate() {
        if seen.contains(&line.profile) {
            f.push(format!(
                "{at}: /profiles/{i} repeats profile {}",
                line.profile.name()
            ));
        }
        seen.push(line.profile);
        let completed = line.status == records::ProfileStatus::Completed;
        if completed != line.receipt.is_some() || completed != line.verdict.is_some() {
            f.push(format!(
                "{at}: /profiles/{i}: a receipt and verdict belong exactly to completed profiles"
            ));
        }
    }
    let listed: Vec<String> = s
        .profiles
        .iter()
        .filter_map(|l| l.receipt.clone())
        .collect();
    let summary_name = records::summary_name(&s.engine);
    let suffix = format!(".{}.json", s.engine);
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            f.push(format!("{}: cannot list the directory: {e}", dir.display()));
            return f;
        }
    };
    let mut unlisted: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(&suffix) && *n != summary_name && !listed.contains(n))
        .collect();
    unlisted.sort();
    for n in unlisted {
        f.push(format!(
            "{}: a receipt file of engine {} that the summary {at} does not list (a profile removed from the summary?)",
            dir.join(&n).display(),
            qual_json::show::quote(&s.engine)
        ));
    }
    f
}

/// Where the reference a receipt was paired with comes from: another engine's receipt of the
/// same profile, named as the campaign names it, in `reference_dir` when the summary records
/// one, listed with these bytes by its own campaign's summary, and internally consistent.
/// `bytes` are the reference receipt's bytes as read.
pub fn reference_findings(
    r: &Receipt,
    reference: &Receipt,
    bytes: &[u8],
    reference_dir: Option<&str>,
) -> Vec<String> {
    let Some(c) = &r.comparison else {
        return Vec::new();
    };
    let mut f = Vec::new();
    let path = Path::new(&c.reference_receipt);
    let shown = qual_json::show::quote(&c.reference_receipt);
    if c.reference_engine == r.engine.name || reference.engine.name == r.engine.name {
        f.push(format!(
            "/comparison pairs engine {} with a receipt of the same engine ({shown})",
            qual_json::show::quote(&r.engine.name)
        ));
    }
    let want_name = records::receipt_name(r.workload.profile, &c.reference_engine);
    if path.file_name().and_then(|n| n.to_str()) != Some(want_name.as_str())
        || reference.engine.name != c.reference_engine
        || reference.workload.profile != r.workload.profile
    {
        f.push(format!(
            "/comparison/reference_receipt {shown} is not the {} receipt of engine {}",
            r.workload.profile.name(),
            qual_json::show::quote(&c.reference_engine)
        ));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    if let Some(want) = reference_dir {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        if canon(dir) != canon(Path::new(want)) {
            f.push(format!(
                "/comparison/reference_receipt {shown} is outside the summary's reference_dir {}",
                qual_json::show::quote(want)
            ));
        }
    }
    if workload_fingerprint(&reference.workload) != reference.workload_fingerprint {
        f.push(format!(
            "/comparison: the reference receipt {shown} does not match its own workload fingerprint"
        ));
    }
    let mut own = Vec::new();
    crate::verify::check_receipt(reference, &mut own, "");
    if let Some(first) = own.first() {
        f.push(format!(
            "/comparison: the reference receipt {shown} does not verify ({} findings; first{first})",
            own.len()
        ));
    }
    listed_by_summary(dir, c, bytes, &shown, &mut f);
    f
}

fn listed_by_summary(
    dir: &Path,
    c: &records::Comparison,
    bytes: &[u8],
    shown: &str,
    f: &mut Vec<String>,
) {
    let summary = dir.join(records::summary_name(&c.reference_engine));
    let listed = match records::read_record::<Summary>(&summary) {
        Ok((_, doc, s)) => {
            records::document_hash(&doc, "summary_sha256") == s.summary_sha256
                && s.profiles.iter().any(|l| {
                    l.receipt.as_deref()
                        == Path::new(&c.reference_receipt)
                            .file_name()
                            .and_then(|n| n.to_str())
                        && l.receipt_sha256.as_deref() == Some(&qual_json::sha256_prefixed(bytes))
                })
        }
        Err(_) => false,
    };
    if !listed {
        f.push(format!(
            "/comparison: the reference receipt {shown} is not listed with these bytes by a valid reference campaign summary {}",
            summary.display()
        ));
    }
}

/// The summary's evidence mode against each output: in `full` mode every output within
/// [`row::MAX_EXACT_OUTPUT_BYTES`] keeps its exact text (so its hashes are checked against the
/// text), in `hashes` mode none does.
pub fn evidence_findings(r: &Receipt, mode: &str) -> Vec<String> {
    let mut f = Vec::new();
    for (i, row) in r.runs.iter().enumerate() {
        for (k, o) in row.outputs.iter().enumerate() {
            let small =
                o.reasoning_utf8_bytes + o.content_utf8_bytes <= row::MAX_EXACT_OUTPUT_BYTES as u64;
            let want = match mode {
                "full" => small,
                "hashes" => false,
                _ => {
                    f.push(format!(
                        "the summary's output_evidence {} is neither \"full\" nor \"hashes\"",
                        qual_json::show::quote(mode)
                    ));
                    return f;
                }
            };
            if o.exact_output.is_some() != want {
                f.push(format!(
                    "/runs/{i}/outputs/{k}/exact_output: {} in {} evidence mode",
                    if want { "missing" } else { "present" },
                    qual_json::show::quote(mode)
                ));
            }
        }
    }
    f
}

/// What one campaign run sets for every profile must agree across its receipts and with the
/// summary: the campaign id, the prompt-set id, the sweep (sizes, repeats), lengths, bounds,
/// model, memory source and reference role. A row removed from one receipt together with its
/// size, or a bound loosened in one receipt, is seen against the others.
pub fn shared_workload_findings(s: &Summary, receipts: &[(String, &Receipt)]) -> Vec<String> {
    let mut f = Vec::new();
    let shared = |r: &Receipt| {
        let w = &r.workload;
        serde_json::json!({
            "campaign_id": r.campaign_id,
            "engine": r.engine.name,
            "sizes": w.sizes,
            "repeats": w.repeats,
            "warmup_requests": w.warmup_requests,
            "max_tokens": w.max_tokens,
            "model": w.model,
            "long_prompt_repetitions": w.long_prompt_repetitions,
            "prompt_template_version": w.prompt_template_version,
            "seed": w.sampling.seed,
            "max_dispatch_spread_ms": w.max_dispatch_spread_ms,
            "slo": w.slo,
            "memory_limit_bytes": w.memory_limit_bytes,
            "request_timeout_s": w.request_timeout_s,
            "memory_sampler": r.memory_sampler,
            "metrics_endpoint": r.metrics_endpoint,
            "reference_role": r.reference_role,
        })
    };
    for (shown, r) in receipts {
        let want = format!("{}-{}", s.prompt_set_id, r.workload.profile.name());
        if r.campaign_id != s.campaign_id
            || r.workload.prompt_set_id != want
            || r.memory_sampler != s.memory_sampler
            || r.reference_role != s.reference_role
        {
            f.push(format!(
                "{shown}: campaign id, prompt-set id, memory source or reference role differ from the summary's"
            ));
        }
    }
    if let Some((first, r0)) = receipts.first() {
        let base = shared(r0);
        for (shown, r) in &receipts[1..] {
            let this = shared(r);
            let keys: Vec<&String> = base
                .as_object()
                .into_iter()
                .flat_map(|o| o.keys())
                .filter(|k| base.get(k.as_str()) != this.get(k.as_str()))
                .collect();
            if !keys.is_empty() {
                f.push(format!(
                    "{shown}: the campaign-wide workload differs from {first}'s in {}",
                    keys.iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    f
}
