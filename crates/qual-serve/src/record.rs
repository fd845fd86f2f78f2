//! Per-request records: what the load generator observed for one request.
//!
//! Owns the record shape written to the evidence file. All instants are nanoseconds on the
//! campaign's monotonic clock (offsets from one `Instant` taken at campaign start), never
//! wall-clock time. Invariants: `content_event_ns` is non-decreasing; a record's token count
//! always names its source ([`TokenSource`]) and is never the requested `max_tokens`.

use crate::rxclock::ClockSource;
use serde::Serialize;

/// Which part of the campaign a request belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Sent before measurement; excluded from every metric.
    Warmup,
    /// Counted in the metrics.
    Measured,
}

/// The OpenAI-compatible endpoint a request targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `POST /v1/chat/completions`
    Chat,
    /// `POST /v1/completions`
    Completions,
}

impl Endpoint {
    /// The request path.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
        }
    }
}

/// Where a token count came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's final `usage.completion_tokens`.
    ServerUsage,
    /// The number of content events the client saw (only when usage is absent and allowed).
    ClientCount,
    /// A real tokenizer run over the response text on the client (only when usage is absent
    /// and allowed, and a tokenizer was given).
    ClientTokenizer,
}

/// A token count with its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TokenCount {
    /// The count.
    pub value: u64,
    /// Where it came from.
    pub source: TokenSource,
}

/// The server's `usage` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// `usage.prompt_tokens`
    pub prompt_tokens: u64,
    /// `usage.completion_tokens`
    pub completion_tokens: u64,
    /// `usage.total_tokens`
    pub total_tokens: u64,
    /// `usage.prompt_tokens_details.cached_tokens`: prompt tokens the server took from its
    /// prefix cache (llama.cpp, vLLM, SGLang report it; absent when the server does not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// What the client itself received for one response, and the bound that puts on the
/// server's `usage.completion_tokens` (the rule: [`crate::client::claim_bound`]). Recorded
/// next to the server's claim ([`RequestRecord::usage`]) so a reader sees both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ClientTokens {
    /// Content events received (non-empty content or reasoning).
    pub content_events: u64,
    /// UTF-8 bytes of content and reasoning text received.
    pub content_bytes: u64,
    /// The `--tokenizer`'s count of the received text, when a tokenizer was given.
    pub tokenizer_tokens: Option<u64>,
    /// The request's `max_tokens`.
    pub max_tokens: u64,
    /// The most completion tokens the client accepts as a claim (the smallest of the rule's
    /// bounds).
    pub bound: u64,
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// A complete, well-formed stream with content, one finish reason and a token count.
    Succeeded,
    /// Anything else; the reason reads after "request failed: ".
    Failed {
        /// Lowercase reason.
        reason: String,
    },
}

impl Outcome {
    /// Whether the request succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Succeeded)
    }
}

/// Each failure reason's stable kind, by the prefix the client's reasons start with (the
/// reasons themselves carry per-request detail: a status body, a count, an address).
const FAILURE_KINDS: [(&str, &str); 25] = [
    ("in-band error event", "in_band_error"),
    ("error response", "error_response"),
    ("stream carried no usage record", "missing_usage"),
    (
        "non-streamed response carried no usage record",
        "missing_usage",
    ),
    ("stream ended without data: [DONE]", "missing_done"),
    (
        "stream carried an event after data: [DONE]",
        "event_after_done",
    ),
    ("stream ended inside an event", "truncated_event"),
    ("stream carried no content event", "no_content"),
    ("expected exactly one finish reason", "finish_reason_count"),
    ("stream event is not a JSON object", "malformed_event"),
    (
        "response body is not a JSON completion object",
        "malformed_response",
    ),
    ("response is not", "wrong_content_type"),
    ("usage record", "malformed_usage"),
    ("usage reports zero completion tokens", "usage_zero_tokens"),
    ("usage claims", "usage_claim_above_bound"),
    ("stream exceeded", "stream_over_limit"),
    ("stream broke", "connection_broken"),
    ("response body broke", "connection_broken"),
    ("connection not ready", "connect"),
    ("connect to", "connect"),
    ("send request", "send"),
    ("build request", "build_request"),
    ("request timed out", "timeout"),
    ("not completed: interrupted", "interrupted"),
    ("request was never completed", "never_completed"),
];

/// The stable kind of a failure reason (`http_status_500`, `missing_usage`,
/// `missing_done`, `in_band_error`, `timeout`, …; `other` for a reason no rule names), so
/// failures can be counted by kind. Read from the reason text after a run, never on the
/// request path.
pub fn failure_kind(reason: &str) -> String {
    if let Some(rest) = reason.strip_prefix("http status ") {
        let code: String = rest.chars().take_while(char::is_ascii_digit).collect();
        return format!("http_status_{code}");
    }
    if reason.starts_with("stream carried ") && reason.ends_with(" usage records") {
        return "duplicate_usage".into();
    }
    FAILURE_KINDS
        .iter()
        .find(|(prefix, _)| reason.starts_with(prefix))
        .map_or("other", |(_, kind)| kind)
        .to_string()
}

/// Everything observed for one request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestRecord {
    /// Position in the campaign's request sequence (warmup first).
    pub index: u64,
    /// The corpus entry's `id`.
    pub corpus_id: String,
    /// Warmup or measured.
    pub phase: Phase,
    /// Target endpoint.
    pub endpoint: Endpoint,
    /// When the scheduler wanted the request sent.
    pub scheduled_ns: u64,
    /// When the client began working on the request (connection set-up included).
    pub started_ns: Option<u64>,
    /// When a new connection opened for this request was established (absent when an idle
    /// keep-alive connection was reused).
    pub connected_ns: Option<u64>,
    /// When the request's first byte was written to the socket: the "send" of every
    /// latency definition and of the schedule lag.
    pub send_ns: Option<u64>,
    /// When the response head (status and headers) arrived.
    pub response_head_ns: Option<u64>,
    /// When the first body bytes arrived.
    pub first_byte_ns: Option<u64>,
    /// Arrival of every content event (non-empty `delta.content`, `delta.reasoning_content`,
    /// `delta.reasoning` or completions `text`), in order. First = first content event, last =
    /// last content event.
    pub content_event_ns: Vec<u64>,
    /// How much earlier than its stamp each content event may have arrived (same length and
    /// order as `content_event_ns`): event `i` arrived in `[content_event_ns[i] − w,
    /// content_event_ns[i]]` ([`crate::rxclock`]); 0 where it is known exactly.
    pub content_event_width_ns: Vec<u64>,
    /// Arrival of `data: [DONE]`.
    pub done_ns: Option<u64>,
    /// When the body ended (after `[DONE]`, or when the stream closed or failed).
    pub end_ns: Option<u64>,
    /// The earliest the body's end can have arrived: the lower end of the arrival interval
    /// of the read that ended it (absent where the stream broke before any read).
    pub end_lower_ns: Option<u64>,
    /// HTTP status of the response.
    pub http_status: Option<u16>,
    /// The server's usage record, when exactly one was sent.
    pub usage: Option<Usage>,
    /// What the client received and the bound it puts on the server's claim (absent where the
    /// response never completed).
    pub client_tokens: Option<ClientTokens>,
    /// Output tokens and their source (successful requests only): the server's claim only
    /// once it is within [`ClientTokens::bound`], so every metric uses a count the client
    /// can defend.
    pub output_tokens: Option<TokenCount>,
    /// The single finish reason.
    pub finish_reason: Option<String>,
    /// `sha256:` of reasoning + U+001E + content (UTF-8).
    pub output_sha256: Option<String>,
    /// Times the request was re-sent on a fresh connection because the server had closed
    /// the reused keep-alive connection before answering (at most 1).
    pub stale_connection_retries: u32,
    /// The wire send of the attempt lost to a closed keep-alive connection.
    pub first_attempt_send_ns: Option<u64>,
    /// When the retry on a fresh connection began; schedule lag of a retried request is
    /// measured from here (the time lost before it is the server's connection handling, kept
    /// in `first_attempt_send_ns`, never the client's).
    pub retry_started_ns: Option<u64>,
    /// Which clock stamped the content events (absent without content).
    pub clock_source: Option<ClockSource>,
    /// Read lag (read returned − kernel receive timestamp) of each kernel-stamped content
    /// event, in ns, in order.
    pub content_read_lag_ns: Vec<u64>,
    /// Content events that shared one read with a later content event of this request.
    pub content_events_coalesced: u64,
    /// Content events whose read was uniform (a point interval, method `kernel_uniform`).
    pub content_events_exact: u64,
    /// Load-generator thread run-queue wait between the request's start and end (absent
    /// where `/proc/thread-self/schedstat` is unreadable).
    pub run_queue_wait_ns: Option<u64>,
    /// Load-generator thread involuntary context switches between start and end.
    pub involuntary_switches: Option<u64>,
    /// How it ended.
    pub outcome: Outcome,
    /// The streamed text itself (reasoning and content), for callers that keep exact-output
    /// evidence (the paired campaign); never written into the serve evidence file.
    #[serde(skip)]
    pub output_text: Option<OutputText>,
}

/// The text one response streamed, bounded by the request's [`crate::client::StreamLimits`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputText {
    /// Concatenated `delta.reasoning_content` / `delta.reasoning`.
    pub reasoning: String,
    /// Concatenated `delta.content` (chat) or `text` (completions).
    pub content: String,
}

impl RequestRecord {
    /// The lower end of content event `i`'s arrival interval (its stamp without a width).
    pub fn content_event_lower(&self, i: usize) -> Option<u64> {
        let hi = *self.content_event_ns.get(i)?;
        Some(hi.saturating_sub(self.content_event_width_ns.get(i).copied().unwrap_or(0)))
    }

    /// A record for a request that has been scheduled but not yet sent.
    pub fn scheduled(
        index: u64,
        corpus_id: &str,
        phase: Phase,
        endpoint: Endpoint,
        scheduled_ns: u64,
    ) -> RequestRecord {
        RequestRecord {
            index,
            corpus_id: corpus_id.to_string(),
            phase,
            endpoint,
            scheduled_ns,
            started_ns: None,
            connected_ns: None,
            send_ns: None,
            response_head_ns: None,
            first_byte_ns: None,
            content_event_ns: Vec::new(),
            content_event_width_ns: Vec::new(),
            done_ns: None,
            end_ns: None,
            end_lower_ns: None,
            http_status: None,
            usage: None,
            client_tokens: None,
            output_tokens: None,
            finish_reason: None,
            output_sha256: None,
            stale_connection_retries: 0,
            first_attempt_send_ns: None,
            retry_started_ns: None,
            clock_source: None,
            content_read_lag_ns: Vec::new(),
            content_events_coalesced: 0,
            content_events_exact: 0,
            run_queue_wait_ns: None,
            involuntary_switches: None,
            outcome: Outcome::Failed {
                reason: "request was never completed".into(),
            },
            output_text: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::failure_kind;

    #[test]
    fn failure_kinds_name_the_client_reasons() {
        for (reason, kind) in [
            ("http status 500: {\"error\":1}", "http_status_500"),
            ("in-band error event: injected error event", "in_band_error"),
            (
                "stream carried no usage record although stream_options.include_usage was requested",
                "missing_usage",
            ),
            ("stream ended without data: [DONE]", "missing_done"),
            ("stream carried 2 usage records", "duplicate_usage"),
            ("usage record lacks a non-negative integer total_tokens", "malformed_usage"),
            ("usage claims 9 completion tokens, more than …", "usage_claim_above_bound"),
            ("request timed out after 1 s", "timeout"),
            ("stream broke: connection reset", "connection_broken"),
            ("something new", "other"),
        ] {
            assert_eq!(failure_kind(reason), kind, "{reason}");
        }
    }
}
