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
//! A top-k list (`n_probs` below the vocabulary) is refused here: the comparison of a top-k
//! view (which cannot establish cosine or KL) is not implemented.

use crate::tensor::Logits;
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
    /// `steps × vocab` log-probabilities (row `i`: the distribution step `i` was chosen from).
    pub logprobs: Logits,
    /// `sha256:` of the response body.
    pub response_sha256: String,
}

/// The `/completion` request body.
pub fn request_body(prompt: &[i64], steps: usize, vocab: usize, seed: u64) -> serde_json::Value {
    serde_json::json!({
        "prompt": prompt,
        "n_predict": steps,
        "n_probs": vocab,
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

/// Parses a `/completion` response with full distributions. The server's own fields are
/// typed (a duplicate field, a wrong type, NaN or a missing field is refused); fields this
/// oracle does not read are ignored, since the response is the server's format, not ours.
/// (The server prints 17-digit floats with ties rounded up, so the evidence reader's
/// shortest-representation rule cannot apply to it.)
pub fn parse_response(body: &[u8], vocab: usize) -> Result<GreedyRun, String> {
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(format!("response: larger than {MAX_RESPONSE_BYTES} bytes"));
    }
    let r: Response = serde_json::from_slice(body).map_err(|e| format!("response: {e}"))?;
    let steps = r.completion_probabilities;
    if steps.is_empty() {
        return Err("response: the server generated no token".into());
    }
    let mut tokens = Vec::with_capacity(steps.len());
    let mut texts = Vec::with_capacity(steps.len());
    let mut data = vec![0f32; steps.len() * vocab];
    let mut vocab_texts = vec![String::new(); vocab];
    for (i, s) in steps.into_iter().enumerate() {
        let at = format!("/completion_probabilities/{i}");
        if s.id as usize >= vocab {
            return Err(format!("{at}/id: {} is not a token id below {vocab}", s.id));
        }
        tokens.push(s.id);
        texts.push(s.token);
        if s.top_logprobs.len() != vocab {
            return Err(format!(
                "{at}/top_logprobs: {} entries; the full vocabulary of {vocab} is needed (a top-k view is not compared)",
                s.top_logprobs.len()
            ));
        }
        let row = &mut data[i * vocab..(i + 1) * vocab];
        let mut seen = vec![false; vocab];
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
            row[tid] = t.logprob as f32;
            if i == 0 {
                vocab_texts[tid] = t.token;
            }
        }
    }
    Ok(GreedyRun {
        tokens,
        texts,
        vocab_texts,
        logprobs: Logits {
            positions: data.len() / vocab,
            vocab,
            data,
        },
        response_sha256: qual_json::sha256_prefixed(body),
    })
}

/// Runs one greedy completion with full distributions.
pub fn greedy(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    prompt: &[i64],
    steps: usize,
    vocab: usize,
    seed: u64,
    timeout: Duration,
) -> Result<GreedyRun, String> {
    let body = request_body(prompt, steps, vocab, seed)
        .to_string()
        .into_bytes();
    let (status, bytes) = rt.block_on(qual_serve::unary::post_json(
        addr,
        "/completion",
        body,
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
    parse_response(&bytes, vocab)
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
        let r = parse_response(&body(&[(2, -0.1), (0, -3.0), (1, -2.5)], 2), 3).unwrap();
        assert_eq!(r.tokens, vec![2]);
        assert_eq!(r.logprobs.row(0), &[-3.0, -2.5, -0.1]);
    }

    #[test]
    fn top_k_lists_and_repeats_are_refused() {
        let e = parse_response(&body(&[(2, -0.1), (0, -3.0)], 2), 3).unwrap_err();
        assert!(e.contains("a top-k view is not compared"), "{e}");
        let e = parse_response(&body(&[(2, -0.1), (2, -3.0), (1, -1.0)], 2), 3).unwrap_err();
        assert!(e.contains("listed twice"), "{e}");
        assert!(parse_response(
            b"{\"completion_probabilities\": [], \"completion_probabilities\": []}",
            3
        )
        .is_err());
        assert!(parse_response(b"{\"completion_probabilities\": []}", 3).is_err());
    }
}
