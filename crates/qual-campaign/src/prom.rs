//! Prometheus `/metrics` scrapes around each row (diagnostic evidence, outside the timed
//! window): the text exposition format's sample lines are summed per metric name over their
//! label sets, and every `_total` counter's delta is recorded. Known engine counters are read
//! as completed requests or generated tokens so the row's `server_request_accounting` gate
//! can check them against the client's own accounting.
//!
//! Hand-written: a scrape needs only `name{labels} value` lines; a full Prometheus client
//! would add a dependency for parsing we do not need (labels are skipped, not interpreted).

use crate::records::{NamedDelta, ServerMetricsDelta};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Counters read as completed requests, by engine.
pub const REQUEST_COUNTERS: [&str; 3] = [
    "vllm:request_success_total",
    "kiln_reference_requests_completed_total",
    "kiln_qual_mock_requests_completed_total",
];

/// Counters read as generated tokens, by engine.
pub const TOKEN_COUNTERS: [&str; 4] = [
    "llamacpp:tokens_predicted_total",
    "vllm:generation_tokens_total",
    "kiln_reference_completion_tokens_total",
    "kiln_qual_mock_completion_tokens_total",
];

/// Largest `/metrics` body accepted.
pub const MAX_SCRAPE_BYTES: usize = 4 * 1024 * 1024;

/// Sums sample values per metric name; comments and malformed lines are skipped, non-finite
/// values refused.
pub fn parse(text: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) if line.as_bytes()[i] == b'{' => {
                let close = line[i..]
                    .find('}')
                    .ok_or(format!("line {}: unterminated label set", n + 1))?;
                (&line[..i], line[i + close + 1..].trim())
            }
            Some(i) => (&line[..i], line[i..].trim()),
            None => return Err(format!("line {}: sample without a value", n + 1)),
        };
        let value = rest
            .split_ascii_whitespace()
            .next()
            .ok_or(format!("line {}: sample without a value", n + 1))?;
        let v: f64 = value
            .parse()
            .map_err(|_| format!("line {}: value is not a number", n + 1))?;
        if !v.is_finite() {
            return Err(format!("line {}: value of {name} is not finite", n + 1));
        }
        *out.entry(name.to_string()).or_insert(0.0) += v;
    }
    Ok(out)
}

/// One scrape of `path` on `addr`.
pub fn scrape(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
) -> Result<BTreeMap<String, f64>, String> {
    scrape_at(
        rt,
        addr,
        &qual_serve::client::Target::plain(addr),
        path,
        timeout,
    )
}

/// [`scrape`] on `target` (its Host header, path prefix, credential, headers and TLS:
/// `bench` against the URL it was given).
pub fn scrape_at(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    target: &qual_serve::client::Target,
    path: &str,
    timeout: Duration,
) -> Result<BTreeMap<String, f64>, String> {
    let (status, body) = rt.block_on(qual_serve::client::fetch_at(
        addr,
        target,
        path,
        None,
        timeout,
        MAX_SCRAPE_BYTES,
    ))?;
    if status != 200 {
        return Err(format!("{path} answered http {status}"));
    }
    let text = String::from_utf8(body).map_err(|_| format!("{path} is not UTF-8"))?;
    parse(&text).map_err(|e| format!("{path}: {e}"))
}

/// The delta between two scrapes.
pub fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> ServerMetricsDelta {
    let counter_deltas: BTreeMap<String, f64> = after
        .iter()
        .filter(|(k, _)| k.ends_with("_total"))
        .filter_map(|(k, a)| before.get(k).map(|b| (k.clone(), a - b)))
        .collect();
    let pick = |names: &[&str]| {
        names.iter().find_map(|n| {
            counter_deltas.get(*n).map(|d| NamedDelta {
                metric: n.to_string(),
                delta: *d,
            })
        })
    };
    ServerMetricsDelta {
        requests_completed: pick(&REQUEST_COUNTERS),
        completion_tokens: pick(&TOKEN_COUNTERS),
        counter_deltas,
    }
}

/// The engine's counters checked against the client's own counts over the same window.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Accounting {
    /// The counters account for at least what the client saw.
    pub passed: bool,
    /// Each counter against the client's count, or what fell short.
    pub detail: String,
}

/// Checks the counters of `d` that overlap the client's counts (`successes` completed
/// requests, `client_tokens` completion tokens): the engine must account for at least what
/// the client saw (other clients may add to the counters; none may take away). `None` when
/// the engine has neither counter.
pub fn account(d: &ServerMetricsDelta, successes: u64, client_tokens: u64) -> Option<Accounting> {
    if d.requests_completed.is_none() && d.completion_tokens.is_none() {
        return None;
    }
    let mut bad = Vec::new();
    let mut parts = Vec::new();
    if let Some(r) = &d.requests_completed {
        parts.push(format!("{} {} (client: {successes})", r.metric, r.delta));
        if r.delta < successes as f64 {
            bad.push(format!(
                "the server reported {} completed requests, the client saw {successes}",
                r.delta
            ));
        }
    }
    if let Some(t) = &d.completion_tokens {
        parts.push(format!(
            "{} {} (client: {client_tokens})",
            t.metric, t.delta
        ));
        if t.delta < client_tokens as f64 {
            bad.push(format!(
                "the server reported {} generated tokens, the client counted {client_tokens}",
                t.delta
            ));
        }
    }
    Some(Accounting {
        passed: bad.is_empty(),
        detail: if bad.is_empty() {
            parts.join("; ")
        } else {
            bad.join("; ")
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_summed_over_labels() {
        let t = "# HELP x y\n# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 10\nvllm:request_success_total{finished_reason=\"length\"} 3\nvllm:request_success_total{finished_reason=\"stop\"} 2 1700000000\n";
        let m = parse(t).unwrap();
        assert_eq!(m["llamacpp:tokens_predicted_total"], 10.0);
        assert_eq!(m["vllm:request_success_total"], 5.0);
        assert!(parse("x NaN\n").is_err());
        assert!(parse("x{a=\"b\" 1\n").is_err());
        let mut after = m.clone();
        *after.get_mut("vllm:request_success_total").unwrap() += 4.0;
        let d = delta(&m, &after);
        assert_eq!(d.requests_completed.unwrap().delta, 4.0);
        assert_eq!(d.completion_tokens.unwrap().delta, 0.0);
    }
}
