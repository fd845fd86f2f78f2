//! One measured row: the request plan (prompts, sampling, seeds), the run through
//! `qual-serve`'s load engine (all requests of the row dispatched at once: a closed loop whose
//! concurrency equals the row size), and the row record — metrics, exact-output evidence and
//! the gates of spec §5.3–5.5.
//!
//! Timing: every instant comes from the load engine's records (nanoseconds on the campaign's
//! monotonic clock). The row window runs from the earliest request start to the latest
//! request end, so thread and runtime start-up of the engine are outside it.

use crate::profiles::{Contract, PromptTokens};
use crate::prompts;
use crate::records::{
    ExactOutput, Gate, MemorySnapshot, OutputEvidence, Percentiles, RequestError, Row,
    ServerMetricsDelta, SloBounds, Verdict,
};
use qual_json::Value;
use qual_serve::client::StreamRules;
use qual_serve::corpus::{Corpus, CorpusEntry};
use qual_serve::load::{self, Arrival, LoadSpec};
use qual_serve::metrics::percentile_type7;
use qual_serve::record::{Endpoint, Outcome, RequestRecord};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Most exact output kept per request in `full` mode (reasoning + content).
pub const MAX_EXACT_OUTPUT_BYTES: usize = 1024 * 1024;

/// How much output evidence a row keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvidenceMode {
    /// Hashes and sizes only.
    Hashes,
    /// Hashes plus the exact text (bounded by [`MAX_EXACT_OUTPUT_BYTES`] per request).
    Full,
}

impl EvidenceMode {
    /// `hashes` or `full`.
    pub fn name(self) -> &'static str {
        match self {
            EvidenceMode::Hashes => "hashes",
            EvidenceMode::Full => "full",
        }
    }
}

/// The requests of one row.
#[derive(Clone, Debug)]
pub struct RowPlan {
    /// Requests dispatched at once.
    pub concurrency: usize,
    /// Repeat index (`None` for the warmup).
    pub repeat: Option<usize>,
    /// Phase label.
    pub phase: String,
    /// Prompts by request index.
    pub prompts: Vec<String>,
    /// `max_tokens` of every request.
    pub max_tokens: u64,
    /// Base seed (request `i` sends `seed + i`).
    pub seed: u64,
    /// Profile contract (sampling).
    pub contract: Contract,
}

impl RowPlan {
    /// The row as a corpus for the load engine (ids are the request indices).
    pub fn corpus(&self) -> Corpus {
        Corpus {
            entries: self
                .prompts
                .iter()
                .enumerate()
                .map(|(i, p)| CorpusEntry {
                    id: i.to_string(),
                    endpoint: Endpoint::Chat,
                    prompt: p.clone(),
                    max_tokens: self.max_tokens,
                    temperature: Some(self.contract.temperature),
                    top_p: Some(self.contract.top_p),
                    seed: Some(self.seed + i as u64),
                    ignore_eos: Some(true),
                })
                .collect(),
            sha256: prompts::prompt_set_sha256(&self.prompts),
        }
    }
}

/// Sends every request of the row at once and returns one record per request, by index.
pub fn execute(
    plan: &RowPlan,
    addr: SocketAddr,
    model: &str,
    timeout: Duration,
    epoch: Instant,
) -> Result<Vec<RequestRecord>, String> {
    let c = plan.prompts.len();
    let spec = LoadSpec {
        addr,
        model: model.to_string(),
        arrival: Arrival::ClosedLoop { concurrency: c },
        warmup: 0,
        measured: c,
        seed: 0,
        max_in_flight: c,
        request_timeout: timeout,
        rules: StreamRules {
            allow_missing_usage: false,
            allow_missing_done: false,
        },
        pin_cpu: None,
        realtime_reader: false,
    };
    let records = load::run(&plan.corpus(), &spec, epoch, None).map_err(|e| e.to_string())?;
    let mut by_index: Vec<Option<RequestRecord>> = vec![None; c];
    for r in records {
        let i: usize = r
            .corpus_id
            .parse()
            .map_err(|_| format!("load engine returned unknown request id {}", r.corpus_id))?;
        if i >= c || by_index[i].is_some() {
            return Err(format!(
                "load engine returned request {i} twice or out of range"
            ));
        }
        by_index[i] = Some(r);
    }
    by_index
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or(format!("load engine returned no record for request {i}")))
        .collect()
}

/// p50 / p99 / p99.9 of `v`, type 7 (numpy's default, the serving metrics' one
/// implementation); `None` for no samples.
fn percentiles(mut v: Vec<f64>) -> Percentiles {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| (!v.is_empty()).then(|| percentile_type7(&v, p));
    Percentiles {
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
    }
}

/// Everything besides the records that decides a row's gates.
#[derive(Clone, Copy, Debug)]
pub struct GateConfig {
    /// Dispatch spread bound, ms.
    pub max_dispatch_spread_ms: f64,
    /// Memory ceiling, bytes.
    pub memory_limit_bytes: u64,
    /// SLO bounds.
    pub slo: SloBounds,
    /// Output evidence mode.
    pub evidence: EvidenceMode,
    /// A Prometheus endpoint is scraped around the row.
    pub metrics_scraped: bool,
}

/// Exact output evidence of one successful request.
pub fn output_evidence(index: u64, r: &RequestRecord, mode: EvidenceMode) -> OutputEvidence {
    let text = r.output_text.clone().unwrap_or_default();
    let exact = (mode == EvidenceMode::Full
        && text.reasoning.len() + text.content.len() <= MAX_EXACT_OUTPUT_BYTES)
        .then(|| ExactOutput {
            reasoning: text.reasoning.clone(),
            content: text.content.clone(),
        });
    let mut joined = text.reasoning.as_bytes().to_vec();
    joined.push(0x1e);
    joined.extend_from_slice(text.content.as_bytes());
    OutputEvidence {
        index,
        output_sha256: qual_json::sha256_prefixed(&joined),
        reasoning_sha256: qual_json::sha256_prefixed(text.reasoning.as_bytes()),
        content_sha256: qual_json::sha256_prefixed(text.content.as_bytes()),
        reasoning_utf8_bytes: text.reasoning.len() as u64,
        content_utf8_bytes: text.content.len() as u64,
        completion_tokens: r.usage.map(|u| u.completion_tokens).unwrap_or(0),
        finish_reason: r.finish_reason.clone(),
        exact_output: exact,
    }
}

/// Canonical hash of the outputs without their exact bytes.
pub fn output_set_sha256(outputs: &[OutputEvidence]) -> String {
    let items = outputs
        .iter()
        .map(|o| {
            let mut v = serde_json::to_value(o).expect("evidence serializes");
            if let Some(m) = v.as_object_mut() {
                m.remove("exact_output");
            }
            Value::from_serde(&v)
        })
        .collect();
    qual_json::canonical_digest(&Value::Array(items))
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

pub(crate) fn gate(name: &str, ok: bool, detail: String) -> Gate {
    Gate {
        name: name.into(),
        detail,
        outcome: Verdict::of(ok),
    }
}

/// Builds the row record from the records of one executed row.
pub fn summarize(
    plan: &RowPlan,
    records: &[RequestRecord],
    memory: Option<MemorySnapshot>,
    server: Option<Result<ServerMetricsDelta, String>>,
    cfg: &GateConfig,
) -> Row {
    let n = records.len() as u64;
    let ok: Vec<(usize, &RequestRecord)> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.outcome.is_success())
        .collect();
    let errors: Vec<RequestError> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match &r.outcome {
            Outcome::Failed { reason } => Some(RequestError {
                index: i as u64,
                error: reason.clone(),
            }),
            Outcome::Succeeded => None,
        })
        .collect();
    // The count the client defends (a success's claim is within what it received).
    let tokens = |r: &RequestRecord| r.output_tokens.map_or(0, |c| c.value);
    let completion_tokens: u64 = ok.iter().map(|(_, r)| tokens(r)).sum();
    let starts: Vec<u64> = records.iter().filter_map(|r| r.started_ns).collect();
    let ends: Vec<u64> = records.iter().filter_map(|r| r.end_ns).collect();
    let first = starts.iter().min().copied().unwrap_or(0);
    let w_ns = ends
        .iter()
        .max()
        .copied()
        .unwrap_or(first)
        .saturating_sub(first);
    let w = w_ns as f64 / 1e9;
    let per_s = |x: f64| if w > 0.0 { x / w } else { 0.0 };
    let spread = match (starts.iter().min(), starts.iter().max()) {
        (Some(a), Some(b)) if starts.len() == records.len() => ms(b - a),
        _ => f64::MAX,
    };
    let mut ttft = Vec::new();
    let mut e2e = Vec::new();
    let mut itl = Vec::new();
    let (mut good, mut good_tokens, mut events) = (0u64, 0u64, 0u64);
    for (_, r) in &ok {
        let s = r.started_ns.unwrap_or(0);
        let t = r.content_event_ns.first().map(|&f| ms(f.saturating_sub(s)));
        let e = ms(r.end_ns.unwrap_or(s).saturating_sub(s));
        let gaps: Vec<f64> = r
            .content_event_ns
            .windows(2)
            .map(|x| ms(x[1].saturating_sub(x[0])))
            .collect();
        events += r.content_event_ns.len() as u64;
        let max_gap = gaps.iter().copied().fold(0.0, f64::max);
        if t.is_some_and(|t| t <= cfg.slo.ttft_ms)
            && e <= cfg.slo.e2e_ms
            && (gaps.is_empty() || max_gap <= cfg.slo.client_visible_itl_ms)
        {
            good += 1;
            good_tokens += tokens(r);
        }
        ttft.extend(t);
        e2e.push(e);
        itl.extend(gaps);
    }
    let prompt_token_counts: Vec<u64> = records
        .iter()
        .map(|r| {
            if r.outcome.is_success() {
                r.usage.map(|u| u.prompt_tokens).unwrap_or(0)
            } else {
                0
            }
        })
        .collect();
    let outputs: Vec<OutputEvidence> = ok
        .iter()
        .map(|(i, r)| output_evidence(*i as u64, r, cfg.evidence))
        .collect();
    let gates = gates(plan, records, &ok, spread, memory, server.as_ref(), cfg);
    let server_metrics = server.and_then(Result::ok);
    let success = ok.len() as u64;
    let verdict = Verdict::of(
        success == n
            && errors.is_empty()
            && completion_tokens == n * plan.max_tokens
            && gates.iter().all(|g| g.outcome == Verdict::Passed),
    );
    Row {
        concurrency: plan.concurrency as u64,
        repeat: plan.repeat.unwrap_or(0) as u64,
        phase: plan.phase.clone(),
        request_count: n,
        success_count: success,
        error_count: n - success,
        errors,
        completion_tokens,
        client_visible_stream_event_count: events,
        elapsed_s: w,
        request_throughput_per_s: per_s(success as f64),
        output_token_throughput_per_s: per_s(completion_tokens as f64),
        slo_good_request_count: good,
        slo_goodput_requests_per_s: per_s(good as f64),
        slo_goodput_tokens_per_s: per_s(good_tokens as f64),
        dispatch_spread_ms: if spread == f64::MAX { -1.0 } else { spread },
        ttft_ms: percentiles(ttft),
        client_visible_itl_ms: percentiles(itl),
        e2e_ms: percentiles(e2e),
        prompt_tokens_min: prompt_token_counts.iter().copied().min().unwrap_or(0),
        prompt_tokens_max: prompt_token_counts.iter().copied().max().unwrap_or(0),
        prompt_token_counts,
        prompt_set_sha256: prompts::prompt_set_sha256(&plan.prompts),
        output_set_sha256: output_set_sha256(&outputs),
        outputs,
        memory,
        server_metrics,
        gates,
        verdict,
    }
}

fn gates(
    plan: &RowPlan,
    records: &[RequestRecord],
    ok: &[(usize, &RequestRecord)],
    spread: f64,
    memory: Option<MemorySnapshot>,
    server: Option<&Result<ServerMetricsDelta, String>>,
    cfg: &GateConfig,
) -> Vec<Gate> {
    let n = records.len();
    let mut g = Vec::new();
    request_gates(&mut g, records, ok);
    g.push(dispatch_gate(spread, cfg.max_dispatch_spread_ms));
    let served: Vec<Served> = ok
        .iter()
        .map(|(i, r)| Served {
            index: *i,
            completion_tokens: r.usage.map(|u| u.completion_tokens),
            prompt_tokens: r.usage.map(|u| u.prompt_tokens),
            finish_reason: r.finish_reason.as_deref(),
        })
        .collect();
    output_gates(
        &mut g,
        plan.max_tokens,
        plan.contract.prompt_tokens,
        &served,
        n,
    );
    memory_gates(&mut g, memory, cfg.memory_limit_bytes);
    if cfg.metrics_scraped {
        let client_tokens: u64 = served.iter().filter_map(|s| s.completion_tokens).sum();
        server_gates(&mut g, server, served.len() as u64, client_tokens);
    }
    g
}

/// `dispatch_spread`: `spread` is `f64::MAX` when not every request was dispatched.
pub(crate) fn dispatch_gate(spread: f64, bound_ms: f64) -> Gate {
    gate(
        "dispatch_spread",
        spread <= bound_ms,
        if spread == f64::MAX {
            "not every request was dispatched".into()
        } else {
            format!("{spread:.3} ms between the first and last dispatch (bound {bound_ms} ms)")
        },
    )
}

/// What the output gates read of one successful request (from its record while measuring,
/// from the row's evidence when verifying).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Served<'a> {
    /// Request index within the row.
    pub index: usize,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// The finish reason.
    pub finish_reason: Option<&'a str>,
}

/// `all_requests_succeeded`: `first_error` is the lowest failed index and its reason.
pub(crate) fn succeeded_gate(
    successes: usize,
    n: usize,
    first_error: Option<(usize, &str)>,
) -> Gate {
    gate(
        "all_requests_succeeded",
        successes == n,
        format!(
            "{successes} of {n} requests succeeded{}",
            first_error
                .map(|(i, reason)| format!("; request {i}: {reason}"))
                .unwrap_or_default()
        ),
    )
}

/// `all_requests_succeeded` and `positive_completion_usage`.
fn request_gates(g: &mut Vec<Gate>, records: &[RequestRecord], ok: &[(usize, &RequestRecord)]) {
    let n = records.len();
    let first_error = records
        .iter()
        .enumerate()
        .find_map(|(i, r)| match &r.outcome {
            Outcome::Failed { reason } => Some((i, reason.as_str())),
            Outcome::Succeeded => None,
        });
    g.push(succeeded_gate(ok.len(), n, first_error));
    // Every usage record the server sent counts, also on requests the client refused (a
    // zero-token "success" is refused by the client and must still name this gate).
    let bad_usage: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.usage
                .is_some_and(|u| u.completion_tokens == 0 || u.prompt_tokens == 0)
                || (r.outcome.is_success() && r.usage.is_none())
        })
        .map(|(i, _)| i)
        .collect();
    g.push(usage_gate(&bad_usage, !ok.is_empty()));
}

/// `positive_completion_usage`: `bad_usage` are the requests whose usage had a zero count.
pub(crate) fn usage_gate(bad_usage: &[usize], any_success: bool) -> Gate {
    gate(
        "positive_completion_usage",
        bad_usage.is_empty() && any_success,
        if !bad_usage.is_empty() {
            format!("requests {bad_usage:?} reported zero prompt or completion tokens")
        } else if !any_success {
            "no request succeeded".into()
        } else {
            "every success reported positive prompt and completion tokens".into()
        },
    )
}

/// `fixed_output_length` and the profile's prompt-token gate (uniform or mixed).
///
/// The output length is the count the client defends: a request whose usage claim the client
/// refused (`qual_serve::claims::claim_bound`) is not a success, so for every success the
/// claimed `usage.completion_tokens` is the count the client accepted; the bare claim of a
/// refused request never reaches this gate.
pub(crate) fn output_gates(
    g: &mut Vec<Gate>,
    max_tokens: u64,
    prompt_tokens: PromptTokens,
    ok: &[Served],
    n: usize,
) {
    let wrong_len: Vec<String> = ok
        .iter()
        .filter(|r| r.completion_tokens != Some(max_tokens) || r.finish_reason != Some("length"))
        .map(|r| {
            format!(
                "request {}: {} tokens, finish {}",
                r.index,
                r.completion_tokens
                    .map(|t| t.to_string())
                    .unwrap_or("null".into()),
                qual_json::show::quote(r.finish_reason.unwrap_or("null"))
            )
        })
        .collect();
    g.push(gate(
        "fixed_output_length",
        wrong_len.is_empty() && !ok.is_empty(),
        if ok.is_empty() {
            format!(
                "no request succeeded, so none produced max_tokens = {} tokens",
                max_tokens
            )
        } else if wrong_len.is_empty() {
            format!(
                "every success produced max_tokens = {} tokens with finish \"length\"",
                max_tokens
            )
        } else {
            format!(
                "expected {} tokens with finish \"length\": {}",
                max_tokens,
                wrong_len.join("; ")
            )
        },
    ));
    let mut distinct: Vec<u64> = ok.iter().filter_map(|r| r.prompt_tokens).collect();
    distinct.sort_unstable();
    distinct.dedup();
    match prompt_tokens {
        PromptTokens::Uniform => g.push(gate(
            "uniform_prompt_tokens",
            distinct.len() == 1,
            format!("distinct prompt-token counts {distinct:?} (exactly one required)"),
        )),
        PromptTokens::Mixed => g.push(gate(
            "mixed_prompt_tokens",
            n <= 1 || distinct.len() > 1,
            if n <= 1 {
                "not enforced at concurrency 1".into()
            } else {
                format!("distinct prompt-token counts {distinct:?} (more than one required)")
            },
        )),
    }
}

/// `memory_measured` and `absolute_memory_limit`.
pub(crate) fn memory_gates(g: &mut Vec<Gate>, memory: Option<MemorySnapshot>, limit: u64) {
    g.push(gate(
        "memory_measured",
        memory.is_some_and(|m| m.samples >= 2),
        match memory {
            Some(m) => format!("{} samples (at least 2 required)", m.samples),
            None => "the memory sampler failed or is unavailable".into(),
        },
    ));
    g.push(gate(
        "absolute_memory_limit",
        memory.is_some_and(|m| m.peak_bytes <= limit),
        match memory {
            Some(m) => format!("peak {} bytes (limit {} bytes)", m.peak_bytes, limit),
            None => "no memory measurement".into(),
        },
    ));
}

/// `server_metrics_readable` and, when the scrape worked, `server_request_accounting`
/// (`successes` requests and `client_tokens` completion tokens seen by the client).
pub(crate) fn server_gates(
    g: &mut Vec<Gate>,
    server: Option<&Result<ServerMetricsDelta, String>>,
    successes: u64,
    client_tokens: u64,
) {
    match server {
        Some(Ok(d)) => {
            g.push(gate(
                "server_metrics_readable",
                true,
                "the engine's /metrics was scraped before and after the row".into(),
            ));
            if let Some(acc) = accounting(d, successes, client_tokens) {
                g.push(acc);
            }
        }
        Some(Err(e)) => g.push(gate("server_metrics_readable", false, e.clone())),
        None => g.push(gate(
            "server_metrics_readable",
            false,
            "no scrape was taken".into(),
        )),
    }
}

/// `server_request_accounting`: the engine's own counters must account for at least what the
/// client saw (a server that reports fewer completed requests or tokens fails;
/// [`crate::prom::account`]).
fn accounting(d: &ServerMetricsDelta, successes: u64, client_tokens: u64) -> Option<Gate> {
    crate::prom::account(d, successes, client_tokens)
        .map(|a| gate("server_request_accounting", a.passed, a.detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_uses_type_7() {
        assert_eq!(percentiles(vec![]).p50, None);
        assert_eq!(percentiles(vec![5.0]).p99, Some(5.0));
        assert_eq!(percentiles(vec![10.0, 0.0]).p50, Some(5.0));
        assert!((percentiles(vec![10.0, 0.0]).p99.unwrap() - 9.9).abs() < 1e-12);
    }
}
