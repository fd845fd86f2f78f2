//! Candidate next-token distributions from llama.cpp's `llama-server` (`POST /completion`).
//!
//! Owns the request (the prompt as token ids, so no tokenizer stands between the two sides;
//! greedy: `temperature` 0; `n_probs` = the whole vocabulary; no prompt cache; never
//! `ignore_eos`, whose reported distribution disagrees with the emitted token) and the strict
//! reading of the response: the body is strict JSON (duplicate keys, NaN refused), and every
//! step must list each vocabulary id exactly once with a finite `logprob`. llama.cpp computes
//! these log-probabilities from the raw logits before sampling (`post_sampling_probs` false),
//! so a full list is the candidate's whole log-softmax row.
//!
//! With `n_probs` below the vocabulary each step lists the K most likely tokens instead, read
//! into a [`TopKView`] (exactly K unique ids with finite log-probabilities per step) and
//! compared by [`crate::topk`], which reports only what such a view can establish.

use crate::tensor::Logits;
use crate::topk::{Listed, TopKView};
use std::net::SocketAddr;
use std::time::Duration;

/// Largest response read (a full 49 152-token distribution is about 4.7 MB per step).
pub const MAX_RESPONSE_BYTES: usize = 512 << 20;

/// What the server generated greedily, with its distribution at every step.
#[derive(Debug, Clone)]
pub struct GreedyRun {
    /// The emitted token ids.
    pub tokens: Vec<u32>,
    /// Their text as the server decoded it.
    pub texts: Vec<String>,
    /// Every token's text, as the server listed it at the first step.
    pub vocab_texts: Vec<String>,
    /// The distribution each step was chosen from: full log-probability rows, or a top-k view.
    pub distribution: Distribution,
    /// `sha256:` of the response body.
    pub response_sha256: String,
}

/// What the server showed of each step's distribution.
#[derive(Debug, Clone)]
pub enum Distribution {
    /// `steps × vocab` log-probabilities (row `i`: the distribution step `i` was chosen from).
    Full(Logits),
    /// The top K log-probabilities of each step.
    TopK(TopKView),
}

impl Distribution {
    /// `[steps, vocab]` for a full view, `[steps, K]` for a top-k view.
    pub fn shape(&self) -> [usize; 2] {
        match self {
            Distribution::Full(l) => [l.positions, l.vocab],
            Distribution::TopK(v) => [v.rows.len(), v.k],
        }
    }
}

/// The `/completion` request body (`n_probs` = the vocabulary for a full view, fewer for a
/// top-k view).
pub fn request_body(prompt: &[i64], steps: usize, n_probs: usize, seed: u64) -> serde_json::Value {
    serde_json::json!({
        "prompt": prompt,
        "n_predict": steps,
        "n_probs": n_probs,
        "temperature": 0,
        "cache_prompt": false,
        "return_tokens": true,
        "seed": seed,
        "stream": false,
    })
}

#[derive(serde::Deserialize)]
struct Response {
    completion_probabilities: Vec<Step>,
}

#[derive(serde::Deserialize)]
struct Step {
    id: u32,
    token: String,
    top_logprobs: Vec<Entry>,
}

#[derive(serde::Deserialize)]
struct Entry {
    id: u32,
    token: String,
    logprob: f64,
}

/// Parses a `/completion` response: full distributions when `n_probs == vocab`, otherwise
/// top-k views of exactly `n_probs` tokens. The server's own fields are typed (a duplicate
/// field, a wrong type, NaN or a missing field is refused); fields this oracle does not read
/// are ignored, since the response is the server's format, not ours. (The server prints
/// 17-digit floats with ties rounded up, so the evidence reader's shortest-representation rule
/// cannot apply to it.)
pub fn parse_response(body: &[u8], vocab: usize, n_probs: usize) -> Result<GreedyRun, String> {
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(format!("response: larger than {MAX_RESPONSE_BYTES} bytes"));
    }
    if n_probs == 0 || n_probs > vocab {
        return Err(format!("n_probs {n_probs} is outside 1..={vocab}"));
    }
    let r: Response = serde_json::from_slice(body).map_err(|e| format!("response: {e}"))?;
    let steps = r.completion_probabilities;
    if steps.is_empty() {
        return Err("response: the server generated no token".into());
    }
    let full = n_probs == vocab;
    let mut tokens = Vec::with_capacity(steps.len());
    let mut texts = Vec::with_capacity(steps.len());
    let mut data = vec![0f32; if full { steps.len() * vocab } else { 0 }];
    let mut lists = Vec::new();
    let mut vocab_texts = vec![String::new(); vocab];
    for (i, s) in steps.into_iter().enumerate() {
        let at = format!("/completion_probabilities/{i}");
        if s.id as usize >= vocab {
            return Err(format!("{at}/id: {} is not a token id below {vocab}", s.id));
        }
        tokens.push(s.id);
        vocab_texts[s.id as usize] = s.token.clone();
        texts.push(s.token);
        if s.top_logprobs.len() != n_probs {
            return Err(format!(
                "{at}/top_logprobs: {} entries; {n_probs} requested",
                s.top_logprobs.len()
            ));
        }
        let mut seen = vec![false; vocab];
        let mut list = Vec::with_capacity(n_probs);
        for (j, t) in s.top_logprobs.into_iter().enumerate() {
            let tid = t.id as usize;
            if tid >= vocab {
                return Err(format!(
                    "{at}/top_logprobs/{j}/id: {tid} is not a token id below {vocab}"
                ));
            }
            if std::mem::replace(&mut seen[tid], true) {
                return Err(format!(
                    "{at}/top_logprobs/{j}/id: token {tid} listed twice"
                ));
            }
            if !t.logprob.is_finite() {
                return Err(format!("{at}/top_logprobs/{j}/logprob: not finite"));
            }
            if full {
                data[i * vocab + tid] = t.logprob as f32;
            } else {
                list.push(Listed {
                    token_id: t.id,
                    logprob: t.logprob,
                });
            }
            if i == 0 || vocab_texts[tid].is_empty() {
                vocab_texts[tid] = t.token;
            }
        }
        if !full {
            lists.push(list);
        }
    }
    let distribution = if full {
        Distribution::Full(Logits {
            positions: data.len() / vocab,
            vocab,
            data,
        })
    } else {
        Distribution::TopK(
            TopKView::new(n_probs, vocab, lists).map_err(|e| format!("response: {e}"))?,
        )
    };
    Ok(GreedyRun {
        tokens,
        texts,
        vocab_texts,
        distribution,
        response_sha256: qual_json::sha256_prefixed(body),
    })
}

/// Runs one greedy completion with full distributions.
pub fn greedy(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    prompt: &[i64],
    steps: usize,
    (vocab, n_probs): (usize, usize),
    seed: u64,
    timeout: Duration,
) -> Result<GreedyRun, String> {
    let body = request_body(prompt, steps, n_probs, seed)
        .to_string()
        .into_bytes();
    let (status, bytes) = rt.block_on(qual_serve::client::fetch(
        addr,
        "/completion",
        Some(body),
        timeout,
        MAX_RESPONSE_BYTES,
    ))?;
    if status != 200 {
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
        return Err(format!(
            "/completion answered {status}: {}",
            qual_json::escape_text(&head)
        ));
    }
    parse_response(&bytes, vocab, n_probs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(entries: &[(u64, f64)], chosen: u64) -> Vec<u8> {
        let top: Vec<serde_json::Value> = entries
            .iter()
            .map(|(id, lp)| serde_json::json!({"id": id, "token": "x", "logprob": lp, "bytes": [120]}))
            .collect();
        serde_json::json!({"completion_probabilities": [{"id": chosen, "token": "x", "logprob": -0.1, "top_logprobs": top}]})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn a_full_distribution_becomes_a_row() {
        let r = parse_response(&body(&[(2, -0.1), (0, -3.0), (1, -2.5)], 2), 3, 3).unwrap();
        assert_eq!(r.tokens, vec![2]);
        let Distribution::Full(l) = &r.distribution else {
            panic!("full")
        };
        assert_eq!(l.row(0), &[-3.0, -2.5, -0.1]);
    }

    #[test]
    fn a_top_k_list_becomes_a_sorted_view() {
        let r = parse_response(&body(&[(0, -3.0), (2, -0.1)], 2), 3, 2).unwrap();
        let Distribution::TopK(v) = &r.distribution else {
            panic!("top-k")
        };
        assert_eq!(v.k, 2);
        assert_eq!(v.rows[0][0].token_id, 2);
        assert_eq!(r.distribution.shape(), [1, 2]);
    }

    #[test]
    fn short_lists_and_repeats_are_refused() {
        let e = parse_response(&body(&[(2, -0.1), (0, -3.0)], 2), 3, 3).unwrap_err();
        assert!(e.contains("2 entries; 3 requested"), "{e}");
        let e = parse_response(&body(&[(2, -0.1), (2, -3.0), (1, -1.0)], 2), 3, 3).unwrap_err();
        assert!(e.contains("listed twice"), "{e}");
        assert!(parse_response(
            b"{\"completion_probabilities\": [], \"completion_probabilities\": []}",
            3,
            3
        )
        .is_err());
        assert!(parse_response(b"{\"completion_probabilities\": []}", 3, 3).is_err());
    }
}
