//! Client-side truth about a response: how many completion tokens the client accepts a
//! server's `usage` claim for ([`claim_bound`], [`check_claim`]), and the redaction of the
//! api key from anything a server sends back ([`redact`]).
//!
//! Owns the rule (stated on [`claim_bound`]) that `serve`, `bench` and `campaign` share
//! through the one load engine: a success's token count is always within what the client
//! itself received.

use crate::client::REDACTED;
use crate::record::{ClientTokens, Outcome, RequestRecord};
use std::borrow::Cow;

/// Tokens a server may count that print no text: the end-of-sequence token, reasoning
/// markers (`<think>`, `</think>`) that a reasoning parser strips, a stop sequence the
/// server removes from the output. Allowed on top of a tokenizer's count.
pub const SPECIAL_TOKEN_ALLOWANCE: u64 = 4;

/// The most tokens one content event is taken to stand for when its bytes do not already
/// explain a claim (one token per event, plus up to three that print nothing or were
/// merged into it).
pub const TOKENS_PER_EVENT: u64 = 4;

/// The client's side of one response and the most completion tokens it accepts as a claim.
///
/// The rule. Every token a server generates either decodes to at least one byte of UTF-8
/// text (byte-level BPE tokens are ≥ 1 byte; byte-fallback tokens are 1 byte each, so a
/// character split over several of them has as many bytes as tokens), or it is one of the
/// few special tokens that print nothing; and a streaming server sends roughly one event
/// per token. So, with `b` bytes of content and reasoning text in `e` content events:
///
/// * claimed > `max_tokens` → refused (no server generates past its request's cap);
/// * claimed > max(`b`, [`TOKENS_PER_EVENT`] × `e`) → refused: neither the text (≥ 1 byte a
///   token) nor the events (≤ 4 tokens an event) can hold that many tokens;
/// * with a tokenizer's count `t` of the received text: claimed > `t + t/2 +`
///   [`SPECIAL_TOKEN_ALLOWANCE`] → refused (re-tokenizing decoded text merges or splits a
///   few tokens, never half of them).
///
/// What the rule cannot catch: a claim inside these bounds that is still too high (without
/// a tokenizer, up to one token per byte of text). It refuses honest servers whose counted
/// tokens the client never sees (hidden reasoning, `tool_calls` deltas, which are not
/// content), and a server that both coalesces more than 4 tokens into an event and emits
/// tokens of under one byte on average (special tokens) — none seen in practice.
pub fn claim_bound(
    content_events: u64,
    content_bytes: u64,
    tokenizer_tokens: Option<u64>,
    max_tokens: u64,
) -> ClientTokens {
    let received = content_bytes.max(content_events.saturating_mul(TOKENS_PER_EVENT));
    let by_tokenizer = tokenizer_tokens.map_or(u64::MAX, |t| {
        t.saturating_add(t / 2)
            .saturating_add(SPECIAL_TOKEN_ALLOWANCE)
    });
    ClientTokens {
        content_events,
        content_bytes,
        tokenizer_tokens,
        max_tokens,
        bound: max_tokens.min(received).min(by_tokenizer),
    }
}

/// `Err` names why a server's claim of `claimed` completion tokens is refused by `c`
/// ([`claim_bound`]).
pub fn check_claim(claimed: u64, c: &ClientTokens) -> Result<(), String> {
    if claimed > c.max_tokens {
        return Err(format!(
            "usage claims {claimed} completion tokens, more than the request's max_tokens {}",
            c.max_tokens
        ));
    }
    let received = c
        .content_bytes
        .max(c.content_events.saturating_mul(TOKENS_PER_EVENT));
    if claimed > received {
        return Err(format!(
            "usage claims {claimed} completion tokens for {} bytes of text in {} content events received (at most {received}: a token is at least one byte of text, an event at most {TOKENS_PER_EVENT} tokens)",
            c.content_bytes, c.content_events
        ));
    }
    if let Some(t) = c.tokenizer_tokens {
        if claimed > c.bound {
            return Err(format!(
                "usage claims {claimed} completion tokens, more than the {} that the tokenizer's count of {t} for the received text allows (t + t/2 + {SPECIAL_TOKEN_ALLOWANCE})",
                c.bound
            ));
        }
    }
    Ok(())
}

/// `text` with every occurrence of `key` (verbatim or JSON-escaped) replaced by
/// [`REDACTED`], and a key prefix cut off by a clipped message (`…` after at least 4 of its
/// characters) too. A key the server transforms (base64, split across events, re-cased) is
/// not recognised.
pub fn redact<'a>(key: &str, text: &'a str) -> Cow<'a, str> {
    let escaped = serde_json::Value::from(key).to_string();
    let escaped = &escaped[1..escaped.len() - 1];
    let mut out = Cow::Borrowed(text);
    for k in [key, escaped] {
        if out.contains(k) {
            out = Cow::Owned(out.replace(k, REDACTED));
        }
    }
    if let Some(head) = out.strip_suffix('…') {
        let cut = (4..key.len().min(head.len() + 1))
            .rev()
            .find(|&n| key.is_char_boundary(n) && head.ends_with(&key[..n]));
        if let Some(n) = cut {
            out = Cow::Owned(format!("{}{REDACTED}…", &head[..head.len() - n]));
        }
    }
    out
}

/// [`redact`] applied to everything of `rec` that came from the server's text: the failure
/// reason, the finish reason, the streamed text.
pub fn redact_record(key: &str, rec: &mut RequestRecord) {
    let fix = |s: &mut String| {
        if let Cow::Owned(r) = redact(key, s) {
            *s = r;
        }
    };
    if let Outcome::Failed { reason } = &mut rec.outcome {
        fix(reason);
    }
    if let Some(f) = &mut rec.finish_reason {
        fix(f);
    }
    if let Some(t) = &mut rec.output_text {
        fix(&mut t.content);
        fix(&mut t.reasoning);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_bounds_follow_the_rule() {
        // Coalesced events: bytes explain the claim.
        let c = claim_bound(2, 64, None, 100);
        assert_eq!(c.bound, 64);
        assert!(check_claim(64, &c).is_ok() && check_claim(65, &c).is_err());
        // One-byte tokens with specials: events explain it.
        let c = claim_bound(10, 10, None, 100);
        assert_eq!(c.bound, 40);
        // A tokenizer tightens it: 10 counted → 10 + 5 + 4.
        let c = claim_bound(40, 400, Some(10), 100);
        assert_eq!(c.bound, 19);
        let e = check_claim(20, &c).unwrap_err();
        assert!(e.contains("the tokenizer's count of 10"), "{e}");
        // Saturating at the extremes, never panicking.
        let c = claim_bound(u64::MAX, u64::MAX, Some(u64::MAX), u64::MAX);
        assert_eq!(c.bound, u64::MAX);
        assert!(check_claim(u64::MAX, &c).is_ok());
    }
}
