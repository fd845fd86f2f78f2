//! The request corpus (JSONL) and its deterministic, seeded order.
//!
//! Owns: strict reading of a corpus file — every line is a strict JSON object (read with
//! `qual-json`) with a closed schema, every violation of every line reported as
//! `line N: /pointer: problem`; blank lines are refused except one final newline; ids are
//! unique — and the seeded permutation that fixes the request order.
//!
//! Line schema: `id` (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`, unique), `endpoint` (`chat` |
//! `completions`), `prompt` (non-empty string), `max_tokens` (integer 1..=2147483648), and
//! optional `temperature` (finite ≥ 0), `top_p` (in (0, 1]), `seed` (integer 0..=2^64−1),
//! `ignore_eos` (bool).
//!
//! Order: a Fisher–Yates shuffle driven by SplitMix64 seeded with the declared seed, with
//! rejection sampling so every permutation is equally likely; the request sequence is the
//! permutation repeated (`sequence[k] = perm[k mod n]`), warmup first. Invariant: the same
//! corpus bytes and seed always give the same sequence, on every platform.

use crate::record::Endpoint;
use qual_json::{Number, Value};
use std::collections::HashSet;
use std::path::Path;

/// One corpus entry.
#[derive(Clone, Debug, PartialEq)]
pub struct CorpusEntry {
    /// Unique id.
    pub id: String,
    /// Target endpoint.
    pub endpoint: Endpoint,
    /// Prompt text (the user message for chat).
    pub prompt: String,
    /// Requested maximum of output tokens (sent; never used as a token count).
    pub max_tokens: u64,
    /// Sampling temperature, when declared.
    pub temperature: Option<f64>,
    /// Nucleus sampling, when declared.
    pub top_p: Option<f64>,
    /// Per-request seed, when declared.
    pub seed: Option<u64>,
    /// `ignore_eos`, when declared.
    pub ignore_eos: Option<bool>,
}

/// A validated corpus.
#[derive(Clone, Debug, PartialEq)]
pub struct Corpus {
    /// Entries in file order.
    pub entries: Vec<CorpusEntry>,
    /// `sha256:` of the file bytes.
    pub sha256: String,
}

/// Why a corpus was refused.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// The file could not be read.
    #[error("read corpus: {0}")]
    Load(#[from] qual_json::LoadError),
    /// One or more lines are invalid; every violation is listed.
    #[error("validate corpus {path}: {}", violations.join("; "))]
    Invalid {
        /// The file.
        path: String,
        /// `line N: /pointer: problem` lines.
        violations: Vec<String>,
    },
}

const KEYS: [&str; 8] = [
    "id",
    "endpoint",
    "prompt",
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "ignore_eos",
];

fn is_corpus_id(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=128).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || b"._:-".contains(&c))
}

/// Reads and validates a corpus file (at most 256 MiB).
pub fn load(path: &Path) -> Result<Corpus, CorpusError> {
    let bytes = qual_json::read_file_limited(path, 256 * 1024 * 1024)?;
    parse(&bytes).map_err(|violations| CorpusError::Invalid {
        path: path.display().to_string(),
        violations,
    })
}

/// Validates corpus bytes.
pub fn parse(bytes: &[u8]) -> Result<Corpus, Vec<String>> {
    let mut v = Vec::new();
    let mut entries = Vec::new();
    let mut ids = HashSet::new();
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if body.is_empty() {
        return Err(vec!["corpus has no request line".into()]);
    }
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        if line.is_empty() {
            v.push(format!("line {n}: blank line"));
            continue;
        }
        let doc = match qual_json::from_slice(line) {
            Ok(d) => d,
            Err(e) => {
                v.push(format!("line {n}: {e}"));
                continue;
            }
        };
        match entry(&doc) {
            Ok(e) => {
                if !ids.insert(e.id.clone()) {
                    v.push(format!("line {n}: /id: duplicate id {}", e.id));
                }
                entries.push(e);
            }
            Err(errs) => v.extend(errs.into_iter().map(|m| format!("line {n}: {m}"))),
        }
    }
    if !v.is_empty() {
        return Err(v);
    }
    Ok(Corpus {
        entries,
        sha256: qual_json::sha256_prefixed(bytes),
    })
}

fn entry(doc: &Value) -> Result<CorpusEntry, Vec<String>> {
    let mut v = Vec::new();
    let Some(o) = doc.as_object() else {
        return Err(vec!["/: must be a JSON object".into()]);
    };
    let unknown = qual_json::ClosedKeys::with_optional(&[], &KEYS)
        .unknown_order(qual_json::Order::Declared)
        .unknown(o);
    v.extend(unknown.into_iter().map(|k| format!("/{k}: unknown key")));
    let id = match o.get("id").and_then(Value::as_str) {
        Some(s) if is_corpus_id(s) => s.to_string(),
        Some(_) => {
            v.push("/id: must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$".into());
            String::new()
        }
        None => {
            v.push("/id: required string is missing".into());
            String::new()
        }
    };
    let endpoint = match o.get("endpoint").and_then(Value::as_str) {
        Some("chat") => Endpoint::Chat,
        Some("completions") => Endpoint::Completions,
        _ => {
            v.push("/endpoint: must be \"chat\" or \"completions\"".into());
            Endpoint::Chat
        }
    };
    let prompt = match o.get("prompt").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => {
            v.push("/prompt: must be a non-empty string".into());
            String::new()
        }
    };
    let max_tokens = match o.get("max_tokens") {
        Some(Value::Number(Number::Int(i))) => {
            match i.as_u64().filter(|x| (1..=1u64 << 31).contains(x)) {
                Some(x) => x,
                None => {
                    v.push("/max_tokens: must be an integer in 1..=2147483648".into());
                    0
                }
            }
        }
        _ => {
            v.push("/max_tokens: must be an integer in 1..=2147483648".into());
            0
        }
    };
    let num = |k: &str, ok: &dyn Fn(f64) -> bool, msg: &str, v: &mut Vec<String>| -> Option<f64> {
        match o.get(k) {
            None => None,
            Some(Value::Number(n)) if n.as_f64().is_some_and(ok) => n.as_f64(),
            Some(_) => {
                v.push(format!("/{k}: {msg}"));
                None
            }
        }
    };
    let temperature = num(
        "temperature",
        &|x| x.is_finite() && x >= 0.0,
        "must be a finite number >= 0",
        &mut v,
    );
    let top_p = num(
        "top_p",
        &|x| x > 0.0 && x <= 1.0,
        "must be a number in (0, 1]",
        &mut v,
    );
    let seed = match o.get("seed") {
        None => None,
        Some(Value::Number(Number::Int(i))) if i.as_u64().is_some() => i.as_u64(),
        Some(_) => {
            v.push("/seed: must be an integer in 0..=18446744073709551615".into());
            None
        }
    };
    let ignore_eos = match o.get("ignore_eos") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            v.push("/ignore_eos: must be a boolean".into());
            None
        }
    };
    if !v.is_empty() {
        return Err(v);
    }
    Ok(CorpusEntry {
        id,
        endpoint,
        prompt,
        max_tokens,
        temperature,
        top_p,
        seed,
        ignore_eos,
    })
}

/// SplitMix64 (Steele, Lea, Flood 2014): the crate's only source of pseudo-randomness.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator with this seed.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (`bound > 0`), by rejection.
    pub fn below(&mut self, bound: u64) -> u64 {
        let zone = u64::MAX - (u64::MAX % bound);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % bound;
            }
        }
    }

    /// Uniform in `(0, 1]` with 53 bits.
    pub fn unit_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller, one of the pair).
    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit_open0(), self.unit_open0());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Gamma(`shape`, 1) (`shape > 0`): Marsaglia and Tsang's method (2000), with
    /// `Gamma(k) = Gamma(k + 1) · U^(1/k)` for `k < 1`.
    pub fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let u = self.unit_open0();
            return self.gamma(shape + 1.0) * u.powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.unit_open0();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }
}

/// The seeded permutation of `0..n`.
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

/// The request body for `entry`, asking for a stream with usage.
pub fn request_body(entry: &CorpusEntry, model: &str) -> Vec<u8> {
    let mut m = serde_json::Map::new();
    m.insert("model".into(), model.into());
    match entry.endpoint {
        Endpoint::Chat => {
            m.insert(
                "messages".into(),
                serde_json::json!([{"role": "user", "content": entry.prompt}]),
            );
        }
        Endpoint::Completions => {
            m.insert("prompt".into(), entry.prompt.clone().into());
        }
    }
    m.insert("max_tokens".into(), entry.max_tokens.into());
    m.insert("stream".into(), true.into());
    m.insert(
        "stream_options".into(),
        serde_json::json!({"include_usage": true}),
    );
    if let Some(t) = entry.temperature {
        m.insert("temperature".into(), t.into());
    }
    if let Some(t) = entry.top_p {
        m.insert("top_p".into(), t.into());
    }
    if let Some(s) = entry.seed {
        m.insert("seed".into(), s.into());
    }
    if let Some(b) = entry.ignore_eos {
        m.insert("ignore_eos".into(), b.into());
    }
    serde_json::to_vec(&serde_json::Value::Object(m)).expect("body serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_lines_with_all_violations() {
        let text = b"{\"id\":\"a\",\"endpoint\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":4}\n\
{\"id\":\"a\",\"endpoint\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":4}\n\
{\"id\":\"b\",\"endpoint\":\"x\",\"prompt\":\"\",\"max_tokens\":0,\"top_p\":0,\"extra\":1}\n\
\n\
{\"id\":\"c\",\"id\":\"d\"}\n";
        let v = parse(text).unwrap_err();
        let joined = v.join("\n");
        for needle in [
            "line 2: /id: duplicate",
            "line 3: /extra: unknown key",
            "line 3: /endpoint",
            "line 3: /prompt",
            "line 3: /max_tokens",
            "line 3: /top_p",
            "line 4: blank line",
            "line 5: duplicate JSON object key",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in\n{joined}");
        }
    }

    #[test]
    fn good_corpus_and_digest() {
        let text = b"{\"id\":\"a\",\"endpoint\":\"completions\",\"prompt\":\"hi\",\"max_tokens\":4,\"temperature\":0.0,\"seed\":7}\n";
        let c = parse(text).unwrap();
        assert_eq!(c.entries[0].endpoint, Endpoint::Completions);
        assert_eq!(c.entries[0].seed, Some(7));
        assert_eq!(c.sha256, qual_json::sha256_prefixed(text));
        let body: serde_json::Value =
            serde_json::from_slice(&request_body(&c.entries[0], "m")).unwrap();
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 4);
    }

    #[test]
    fn permutation_is_deterministic_and_complete() {
        let a = permutation(100, 17);
        assert_eq!(a, permutation(100, 17));
        assert_ne!(a, permutation(100, 18));
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
        // Pinned vector (computed independently): SplitMix64(17), Fisher-Yates from the top.
        assert_eq!(permutation(5, 17), vec![0, 3, 2, 1, 4]);
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }
}
