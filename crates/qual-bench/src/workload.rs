//! Workloads: the request sets `bench` sends, generated reproducibly from a seed.
//!
//! Owns length distributions ([`Lengths`]), the seeded word source, and the builders of a
//! [`RequestPlan`]: synthetic prompts of exact token lengths (a real tokenizer, see
//! [`crate::tokenizer`]), shared prefixes (N prefixes, each request = a prefix + its own
//! suffix), multi-turn conversations (each turn carries the earlier turns and the server's
//! replies; the engine builds the history), dataset replay (ShareGPT-style conversations and
//! prompt/output-length lists, JSONL) and trace replay (JSONL lines with a `timestamp` in ms,
//! `input_length`, `output_length`, as the Mooncake traces; `hash_ids` honoured: a line's
//! prompt is its blocks, one text per hash id, shared by every line that names it).
//!
//! Input files are read strictly: each line is strict JSON (`qual-json`: duplicate keys,
//! NaN…) and then a closed schema (`deny_unknown_fields`), with every bad line reported as
//! `line N: problem`. Invariant: the same inputs and seed give the same plan, and
//! [`Workload::digest`] — `sha256:` over the canonical JSON of every turn body and offset in
//! draw order — identifies it in the evidence.

use crate::tokenizer::{Tok, WordCache};
use qual_serve::corpus::SplitMix64;
use qual_serve::load::{PlannedTurn, RequestPlan, Session};
use qual_serve::record::Endpoint;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A distribution of token lengths.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Lengths {
    /// Always `n`.
    Fixed {
        /// The length.
        n: u64,
    },
    /// Uniform integers in `min..=max`.
    Uniform {
        /// Smallest.
        min: u64,
        /// Largest.
        max: u64,
    },
    /// Normal (Box–Muller), rounded, clamped to `1..=4 × mean + 1`.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        sd: f64,
    },
    /// Drawn uniformly from the samples of a file (a JSON array of positive integers).
    Empirical {
        /// The file.
        path: PathBuf,
        /// Its samples.
        #[serde(skip)]
        samples: Vec<u64>,
    },
}

impl Lengths {
    /// Parses `N`, `fixed:N`, `uniform:MIN:MAX`, `normal:MEAN:SD` or `file:PATH`.
    pub fn parse(s: &str) -> Result<Lengths, String> {
        let num = |x: &str| -> Result<u64, String> {
            x.parse::<u64>()
                .ok()
                .filter(|&v| (1..=1 << 24).contains(&v))
                .ok_or(format!(
                    "expected an integer length in 1..=16777216, got {x:?}"
                ))
        };
        let f = |x: &str| -> Result<f64, String> {
            x.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0 && *v <= 16777216.0)
                .ok_or(format!(
                    "expected a finite number in 0..=16777216, got {x:?}"
                ))
        };
        let parts: Vec<&str> = s.splitn(3, ':').collect();
        match parts.as_slice() {
            [n] => Ok(Lengths::Fixed { n: num(n)? }),
            ["fixed", n] => Ok(Lengths::Fixed { n: num(n)? }),
            ["uniform", a, b] => {
                let (min, max) = (num(a)?, num(b)?);
                if min > max {
                    return Err("uniform: MIN must not exceed MAX".into());
                }
                Ok(Lengths::Uniform { min, max })
            }
            ["normal", m, sd] => {
                let mean = f(m)?;
                if mean < 1.0 {
                    return Err("normal: MEAN must be at least 1".into());
                }
                Ok(Lengths::Normal { mean, sd: f(sd)? })
            }
            ["file", rest @ ..] => {
                let path = PathBuf::from(rest.join(":"));
                let samples = read_samples(&path)?;
                Ok(Lengths::Empirical { path, samples })
            }
            _ => Err(format!(
                "expected N, fixed:N, uniform:MIN:MAX, normal:MEAN:SD or file:PATH, got {s:?}"
            )),
        }
    }

    /// One draw.
    pub fn draw(&self, rng: &mut SplitMix64) -> u64 {
        match self {
            Lengths::Fixed { n } => *n,
            Lengths::Uniform { min, max } => min + below(rng, max - min + 1),
            Lengths::Normal { mean, sd } => {
                let u1 = rng.unit_open0();
                let u2 = rng.unit_open0();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                (mean + sd * z).round().clamp(1.0, 4.0 * mean + 1.0) as u64
            }
            Lengths::Empirical { samples, .. } => {
                samples[below(rng, samples.len() as u64) as usize]
            }
        }
    }
}

fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    if n <= 1 {
        0
    } else {
        rng.next_u64() % n
    }
}

fn read_samples(path: &Path) -> Result<Vec<u64>, String> {
    let (v, _) = qual_json::load_file(path, qual_json::Limits::default())
        .map_err(|e| format!("read lengths: {e}"))?;
    let arr = v
        .as_array()
        .ok_or("lengths file: /: must be a JSON array of integers")?;
    let mut out = Vec::with_capacity(arr.len());
    for (i, x) in arr.iter().enumerate() {
        match (match x {
            qual_json::Value::Number(qual_json::Number::Int(i)) => i.as_u64(),
            _ => None,
        })
        .filter(|&n| (1..=1 << 24).contains(&n))
        {
            Some(n) => out.push(n),
            None => {
                return Err(format!(
                    "lengths file: /{i}: must be an integer in 1..=16777216"
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("lengths file: /: must not be empty".into());
    }
    Ok(out)
}

/// The seeded word source: common English words (the prompts read like text, so
/// tokenizers see ordinary merges, not pathological strings).
pub const WORDS: [&str; 96] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "time", "people", "water",
    "system", "model", "server", "request", "token", "light", "river", "stone", "garden", "window",
    "music", "paper", "market", "winter", "summer", "history", "number", "answer", "question",
    "letter", "city", "country", "house", "world", "school", "family", "story", "morning",
    "evening", "bridge", "forest", "ocean", "mountain", "valley", "silver", "golden", "quiet",
    "simple", "bright", "careful", "gentle", "early", "late", "small", "large",
];

/// What one planned turn is, beside its body (for per-turn statistics and length checks).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TurnInfo {
    /// Turn index within its session (0-based).
    pub turn: usize,
    /// Tokens of this turn's own prompt text (tokenizer count; null without a tokenizer).
    pub input_tokens: Option<u64>,
    /// Requested output tokens.
    pub max_tokens: u64,
}

/// A generated workload: the plan, what each turn is, and how it was made.
#[derive(Debug)]
pub struct Workload {
    /// What the engine sends.
    pub plan: RequestPlan,
    /// By turn id.
    pub info: std::collections::BTreeMap<String, TurnInfo>,
    /// How it was generated (recorded in the result).
    pub description: serde_json::Value,
}

impl Workload {
    /// `sha256:` of the canonical JSON of every turn body and offset, in draw order.
    pub fn digest(&self) -> String {
        let v: Vec<serde_json::Value> = self
            .plan
            .sessions
            .iter()
            .map(|s| {
                serde_json::json!({
                    "offset_s": s.offset_s,
                    "turns": s.turns.iter().map(|t| serde_json::json!({
                        "id": t.id, "endpoint": t.endpoint, "body": t.body, "max_tokens": t.max_tokens
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        qual_json::sha256_prefixed(
            serde_json::to_string(&serde_json::Value::Array(v))
                .expect("plan serializes")
                .as_bytes(),
        )
    }
}

/// Request fields common to every generated body.
#[derive(Clone, Debug)]
pub struct BodyOptions {
    /// Chat or completions.
    pub endpoint: Endpoint,
    /// Send `ignore_eos: true` (servers that support it then produce exactly `max_tokens`).
    pub ignore_eos: bool,
    /// `temperature`, when set.
    pub temperature: Option<f64>,
}

fn body(
    o: &BodyOptions,
    prompt: &str,
    max_tokens: u64,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    match o.endpoint {
        Endpoint::Chat => {
            m.insert(
                "messages".into(),
                serde_json::json!([{"role": "user", "content": prompt}]),
            );
        }
        Endpoint::Completions => {
            m.insert("prompt".into(), prompt.into());
        }
    }
    m.insert("max_tokens".into(), max_tokens.into());
    if o.ignore_eos {
        m.insert("ignore_eos".into(), true.into());
    }
    if let Some(t) = o.temperature {
        m.insert("temperature".into(), t.into());
    }
    m
}

/// A synthetic workload's parameters.
#[derive(Clone, Debug)]
pub struct Synthetic {
    /// Sessions to generate.
    pub sessions: usize,
    /// Turns per session (1: independent requests).
    pub turns: usize,
    /// Input (prompt) lengths in tokens, per turn.
    pub input: Lengths,
    /// Output lengths (`max_tokens`).
    pub output: Lengths,
    /// Shared prefixes: `(count, tokens)`; request `i` starts with prefix `i mod count`.
    pub shared_prefix: Option<(usize, u64)>,
    /// Seed.
    pub seed: u64,
}

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// Bad parameters or a bad input file (every problem listed).
    #[error("{0}")]
    Invalid(String),
    /// The tokenizer failed.
    #[error(transparent)]
    Tok(#[from] crate::tokenizer::TokError),
}

/// Builds a synthetic workload of exact token lengths.
pub fn synthetic(s: &Synthetic, tok: &Tok, o: &BodyOptions) -> Result<Workload, WorkloadError> {
    if s.sessions == 0 || s.turns == 0 {
        return Err(WorkloadError::Invalid(
            "a synthetic workload needs at least one session and one turn".into(),
        ));
    }
    let mut rng = SplitMix64::new(s.seed ^ 0x7379_6e74_6865_7469);
    let mut cache = WordCache::default();
    let mut words = SplitMix64::new(s.seed ^ 0x776f_7264_7300_0000);
    let mut pick = |n: usize| below(&mut words, n as u64) as usize;
    let (prefixes, prefix_tokens): (Vec<String>, u64) = match s.shared_prefix {
        Some((count, tokens)) => (
            (0..count.max(1))
                .map(|_| tok.exact_prompt(tokens, &WORDS, &mut cache, &mut pick))
                .collect::<Result<_, _>>()?,
            tokens,
        ),
        None => (Vec::new(), 0),
    };
    let mut plan = RequestPlan {
        sessions: Vec::with_capacity(s.sessions),
    };
    let mut info = std::collections::BTreeMap::new();
    for i in 0..s.sessions {
        let mut turns = Vec::with_capacity(s.turns);
        for t in 0..s.turns {
            let n_in = s.input.draw(&mut rng);
            let n_out = s.output.draw(&mut rng);
            // A prefix has exactly its token count, but where it meets the suffix the
            // tokenizer may merge, so a prefixed prompt is counted whole.
            let (text, input_tokens) = match (prefixes.get(i % prefixes.len().max(1)), t) {
                (Some(p), 0) => {
                    let n_text = n_in.saturating_sub(prefix_tokens).max(1);
                    let suffix = tok.exact_prompt(n_text, &WORDS, &mut cache, &mut pick)?;
                    let text = format!("{p} {suffix}");
                    let n = tok.count(&text);
                    (text, n)
                }
                _ => (tok.exact_prompt(n_in, &WORDS, &mut cache, &mut pick)?, n_in),
            };
            let id = format!("s{i}.t{t}");
            info.insert(
                id.clone(),
                TurnInfo {
                    turn: t,
                    input_tokens: Some(input_tokens),
                    max_tokens: n_out,
                },
            );
            turns.push(PlannedTurn {
                id,
                endpoint: o.endpoint,
                body: body(o, &text, n_out),
                max_tokens: n_out,
            });
        }
        plan.sessions.push(Session {
            turns,
            offset_s: None,
        });
    }
    Ok(Workload {
        plan,
        info,
        description: serde_json::json!({
            "kind": "synthetic", "sessions": s.sessions, "turns": s.turns,
            "input_tokens": s.input, "output_tokens": s.output,
            "shared_prefix": s.shared_prefix.map(|(c, t)| serde_json::json!({"prefixes": c, "tokens": t})),
            "seed": s.seed, "tokenizer_sha256": tok.sha256, "tokenizer": tok.source(), "word_source": "built-in 96 English words",
        }),
    })
}

fn jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, WorkloadError> {
    let bytes = qual_json::read_file_limited(path, 1 << 30).map_err(|e| {
        WorkloadError::Invalid(format!("read {}: {e}", qual_json::escape_path(path)))
    })?;
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let n = i + 1;
        if let Err(e) = qual_json::from_slice(line) {
            bad.push(format!("line {n}: {e}"));
            continue;
        }
        match serde_json::from_slice::<T>(line) {
            Ok(v) => out.push(v),
            Err(e) => bad.push(format!("line {n}: {e}")),
        }
    }
    if !bad.is_empty() {
        bad.truncate(20);
        return Err(WorkloadError::Invalid(format!(
            "{}: {}",
            qual_json::escape_path(path),
            bad.join("; ")
        )));
    }
    if out.is_empty() {
        return Err(WorkloadError::Invalid(format!(
            "{}: no request line",
            qual_json::escape_path(path)
        )));
    }
    Ok(out)
}

/// One line of a length list or a trace.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct LengthLine {
    /// Trace arrival, ms from the trace start (traces only).
    #[serde(default)]
    timestamp: Option<f64>,
    input_length: u64,
    output_length: u64,
    /// The prompt's blocks of `block_size` tokens, each named by a hash id (the last may be
    /// shorter): lines that share a hash id share that block's text.
    #[serde(default)]
    hash_ids: Option<Vec<u64>>,
}

/// The prompts of a trace with `hash_ids`: one text per block (hash id, position 0 or
/// not, length), built once and reused by every line that names it.
struct Blocks<'a> {
    tok: &'a Tok,
    size: u64,
    seed: u64,
    cache: WordCache,
    texts: std::collections::HashMap<(u64, bool, u64), String>,
}

impl Blocks<'_> {
    /// The prompt of `ids` for `input_length` tokens: full blocks, the last one the rest.
    /// The first block is an exact-length text (its first word without a leading space),
    /// every later one single-token words after spaces, so a block's tokens are the same in
    /// every prompt that holds it. `Err` names the line's problem.
    fn prompt(&mut self, ids: &[u64], input_length: u64) -> Result<String, String> {
        let n = ids.len() as u64;
        let need = input_length.div_ceil(self.size);
        if n != need {
            return Err(format!(
                "/hash_ids: {n} blocks of {} tokens do not hold input_length {input_length} (it takes {need}; is the trace's block size {}? set --trace-block-size)",
                self.size,
                if n > 0 { input_length.div_ceil(n) } else { 0 }
            ));
        }
        let mut text = String::new();
        for (j, &h) in ids.iter().enumerate() {
            let len = if j + 1 == ids.len() {
                input_length - self.size * (n - 1)
            } else {
                self.size
            };
            let key = (h, j == 0, len);
            if !self.texts.contains_key(&key) {
                let mut rng = SplitMix64::new(self.seed ^ h.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut pick = |k: usize| below(&mut rng, k as u64) as usize;
                let block = if j == 0 {
                    self.tok.exact_prompt(len, &WORDS, &mut self.cache, pick)
                } else {
                    self.tok
                        .single_token_words(&WORDS, &mut self.cache)
                        .map(|single| {
                            (0..len)
                                .map(|_| single[pick(single.len())].as_str())
                                .collect()
                        })
                }
                .map_err(|e| e.to_string())?;
                self.texts.insert(key, block);
            }
            text.push_str(&self.texts[&key]);
        }
        Ok(text)
    }
}

/// A prompt/output-length list (`{"input_length", "output_length"}` per line) or a trace
/// (the same plus `timestamp` in ms): exact-length synthetic prompts at those lengths; for
/// a trace each session's offset is its timestamp (seconds, relative to the first). A line
/// with `hash_ids` gets its prompt from blocks of `block_size` tokens, one per hash id,
/// shared with every line naming the same id (the Mooncake traces' prefix reuse); its input
/// tokens are then counted on the whole prompt.
pub fn lengths_file(
    path: &Path,
    trace: bool,
    tok: &Tok,
    o: &BodyOptions,
    seed: u64,
    block_size: u64,
) -> Result<Workload, WorkloadError> {
    let lines: Vec<LengthLine> = jsonl(path)?;
    let mut blocks = Blocks {
        tok,
        size: block_size.max(1),
        seed,
        cache: WordCache::default(),
        texts: std::collections::HashMap::new(),
    };
    let mut with_ids = 0;
    let mut cache = WordCache::default();
    let mut words = SplitMix64::new(seed ^ 0x776f_7264_7300_0000);
    let mut pick = |n: usize| below(&mut words, n as u64) as usize;
    let t0 = lines
        .iter()
        .filter_map(|l| l.timestamp)
        .fold(f64::INFINITY, f64::min);
    let mut plan = RequestPlan {
        sessions: Vec::new(),
    };
    let mut info = std::collections::BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        if l.input_length == 0 || l.output_length == 0 || l.input_length > 1 << 24 {
            return Err(WorkloadError::Invalid(format!(
                "line {}: input_length and output_length must be in 1..=16777216",
                i + 1
            )));
        }
        let offset_s = match (trace, l.timestamp) {
            (true, Some(ts)) if ts.is_finite() && ts >= 0.0 => Some((ts - t0) / 1000.0),
            (true, _) => {
                return Err(WorkloadError::Invalid(format!(
                    "line {}: /timestamp: a trace line needs a finite timestamp >= 0 (ms)",
                    i + 1
                )))
            }
            (false, _) => None,
        };
        let (text, input_tokens) = match l.hash_ids.as_deref() {
            Some(ids) if !ids.is_empty() => {
                with_ids += 1;
                let text = blocks
                    .prompt(ids, l.input_length)
                    .map_err(|e| WorkloadError::Invalid(format!("line {}: {e}", i + 1)))?;
                let n = tok.count(&text);
                (text, n)
            }
            _ => (
                tok.exact_prompt(l.input_length, &WORDS, &mut cache, &mut pick)?,
                l.input_length,
            ),
        };
        let id = format!("r{i}");
        info.insert(
            id.clone(),
            TurnInfo {
                turn: 0,
                input_tokens: Some(input_tokens),
                max_tokens: l.output_length,
            },
        );
        plan.sessions.push(Session {
            turns: vec![PlannedTurn {
                id,
                endpoint: o.endpoint,
                body: body(o, &text, l.output_length),
                max_tokens: l.output_length,
            }],
            offset_s,
        });
    }
    if trace {
        plan.sessions.sort_by(|a, b| {
            a.offset_s
                .unwrap_or(0.0)
                .total_cmp(&b.offset_s.unwrap_or(0.0))
        });
    }
    Ok(Workload {
        plan,
        info,
        description: serde_json::json!({
            "kind": if trace { "trace" } else { "length_list" },
            "file": path.display().to_string(),
            "lines": lines.len(), "seed": seed, "tokenizer_sha256": tok.sha256, "tokenizer": tok.source(),
            "hash_ids": serde_json::json!({
                "lines": with_ids, "block_size": blocks.size, "distinct_blocks": blocks.texts.len(),
            }),
        }),
    })
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ShareGptLine {
    #[serde(default)]
    #[allow(dead_code)]
    id: Option<String>,
    conversations: Vec<ShareGptTurn>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ShareGptTurn {
    from: String,
    value: String,
}

/// ShareGPT-style conversations (JSONL, `{"id"?, "conversations": [{"from", "value"}]}`):
/// every human turn becomes a turn of one session (history carried), its `max_tokens` the
/// token count of the reply that followed it in the dataset (tokenizer), else `fallback`.
pub fn sharegpt(
    path: &Path,
    tok: Option<&Tok>,
    o: &BodyOptions,
    max_turns: usize,
    fallback_output: u64,
) -> Result<Workload, WorkloadError> {
    let lines: Vec<ShareGptLine> = jsonl(path)?;
    let mut plan = RequestPlan {
        sessions: Vec::new(),
    };
    let mut info = std::collections::BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        let mut turns = Vec::new();
        let conv = &l.conversations;
        let mut k = 0;
        while k < conv.len() && turns.len() < max_turns.max(1) {
            if conv[k].from == "human" || conv[k].from == "user" {
                let reply = conv
                    .get(k + 1)
                    .filter(|r| r.from == "gpt" || r.from == "assistant");
                let out = match (tok, reply) {
                    (Some(t), Some(r)) => t.count(&r.value).max(1),
                    _ => fallback_output,
                };
                let t = turns.len();
                let id = format!("c{i}.t{t}");
                info.insert(
                    id.clone(),
                    TurnInfo {
                        turn: t,
                        input_tokens: tok.map(|tk| tk.count(&conv[k].value)),
                        max_tokens: out,
                    },
                );
                turns.push(PlannedTurn {
                    id,
                    endpoint: o.endpoint,
                    body: body(o, &conv[k].value, out),
                    max_tokens: out,
                });
            }
            k += 1;
        }
        if !turns.is_empty() {
            plan.sessions.push(Session {
                turns,
                offset_s: None,
            });
        }
    }
    if plan.sessions.is_empty() {
        return Err(WorkloadError::Invalid(
            "the dataset has no conversation with a human turn".into(),
        ));
    }
    Ok(Workload {
        plan,
        info,
        description: serde_json::json!({
            "kind": "sharegpt", "file": path.display().to_string(), "conversations": lines.len(),
            "max_turns": max_turns, "tokenizer_sha256": tok.and_then(|t| t.sha256.clone()),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_parse_and_draw_in_range() {
        assert_eq!(Lengths::parse("16").unwrap(), Lengths::Fixed { n: 16 });
        assert!(Lengths::parse("uniform:9:3").is_err());
        assert!(Lengths::parse("0").is_err());
        assert!(Lengths::parse("normal:nan:1").is_err());
        let u = Lengths::parse("uniform:3:9").unwrap();
        let mut rng = SplitMix64::new(1);
        for _ in 0..200 {
            let v = u.draw(&mut rng);
            assert!((3..=9).contains(&v));
        }
        let n = Lengths::parse("normal:100:10").unwrap();
        let mean = (0..2000).map(|_| n.draw(&mut rng) as f64).sum::<f64>() / 2000.0;
        assert!((mean - 100.0).abs() < 2.0, "{mean}");
    }

    /// A word-level tokenizer over [`WORDS`] (one token per word) in `dir`.
    fn word_tok(dir: &Path) -> Tok {
        Tok::load(&qual_test_fixtures::word_level_tokenizer(dir, &WORDS)).unwrap()
    }

    #[test]
    fn trace_hash_ids_share_exactly_their_blocks() {
        let d = tempfile::tempdir().unwrap();
        let tok = word_tok(d.path());
        let trace = d.path().join("trace.jsonl");
        std::fs::write(
            &trace,
            [
                r#"{"timestamp": 0, "input_length": 12, "output_length": 2, "hash_ids": [1, 2, 3]}"#,
                r#"{"timestamp": 10, "input_length": 10, "output_length": 2, "hash_ids": [1, 2, 5]}"#,
                r#"{"timestamp": 20, "input_length": 8, "output_length": 2, "hash_ids": [1, 9]}"#,
                r#"{"timestamp": 30, "input_length": 12, "output_length": 2, "hash_ids": [1, 2, 3]}"#,
                r#"{"timestamp": 40, "input_length": 7, "output_length": 2}"#,
            ]
            .join("\n"),
        )
        .unwrap();
        let o = BodyOptions {
            endpoint: Endpoint::Completions,
            ignore_eos: false,
            temperature: None,
        };
        let wl = lengths_file(&trace, true, &tok, &o, 7, 4).unwrap();
        let words: Vec<Vec<String>> = wl
            .plan
            .sessions
            .iter()
            .map(|s| {
                let p = s.turns[0].body["prompt"].as_str().unwrap();
                p.split_whitespace().map(String::from).collect()
            })
            .collect();
        let lens: Vec<usize> = words.iter().map(Vec::len).collect();
        assert_eq!(lens, [12, 10, 8, 12, 7]);
        let common =
            |a: &[String], b: &[String]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        // Same ids, same prompt; [1, 2, 3] and [1, 2, 5] share exactly two blocks; [1, 9]
        // exactly one with each.
        assert_eq!(words[0], words[3]);
        assert_eq!(common(&words[0], &words[1]), 8);
        assert_eq!(common(&words[0], &words[2]), 4);
        assert_eq!(common(&words[1], &words[2]), 4);
        for (i, n) in [12, 10, 8, 12, 7].into_iter().enumerate() {
            assert_eq!(wl.info[&format!("r{i}")].input_tokens, Some(n));
        }
        assert_eq!(wl.description["hash_ids"]["lines"], 4);
        assert_eq!(wl.description["hash_ids"]["distinct_blocks"], 5);
        // A line whose blocks cannot hold its length is refused by line and pointer.
        std::fs::write(
            &trace,
            r#"{"timestamp": 0, "input_length": 12, "output_length": 2, "hash_ids": [1, 2]}"#,
        )
        .unwrap();
        let err = lengths_file(&trace, true, &tok, &o, 7, 4)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "line 1: /hash_ids: 2 blocks of 4 tokens do not hold input_length 12 (it takes 3"
            ),
            "{err}"
        );
    }
}
