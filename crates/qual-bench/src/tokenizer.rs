//! A real tokenizer for exact-length synthetic prompts and client-side token counts.
//!
//! Owns loading a tokenizer from a file and the exact-length prompt builder. Two file shapes
//! are read (the content decides):
//!
//! * a Hugging Face `tokenizer.json` (an object with a `model` member), read by the
//!   `tokenizers` crate, the reference implementation;
//! * the GGUF tokenizer view `tools/gguf_sidecars.py` writes beside a GGUF (every
//!   `tokenizer.ggml.*` key). Only `tokenizer.ggml.model = "gpt2"` (byte-level BPE) is
//!   supported; it is rebuilt as a `tokenizers` BPE with llama.cpp's pre-tokenizer for the
//!   declared `tokenizer.ggml.pre` (`smollm`: single digits, then the GPT-2 split; anything
//!   else: the GPT-2 split), so counts match what llama.cpp's server reports.
//!
//! Without a file, [`Tok::server`] asks the server under test: `POST /tokenize` (llama.cpp's
//! `llama-server`, vLLM and SGLang all serve it; the body carries both spellings of the text,
//! `content` and `prompt`, and of "no special tokens", `add_special` and
//! `add_special_tokens`, plus the model id), and counts the `tokens` array of the answer.
//! [`Tok::server`] probes the endpoint once and refuses a server without it, naming the fix.
//!
//! Invariant: [`Tok::exact_prompt`] returns text whose re-encoding has exactly the asked
//! number of tokens, or an error; it never returns an approximate prompt.

use std::collections::HashMap;
use std::path::Path;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{PreTokenizerWrapper, Tokenizer};

/// Why a tokenizer could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokError {
    /// The file could not be read.
    #[error("read tokenizer {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The reason.
        #[source]
        source: qual_json::LoadError,
    },
    /// The file is not a supported tokenizer.
    #[error("load tokenizer {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Encoding failed or no exact-length prompt could be built.
    #[error("{0}")]
    Encode(String),
    /// The server offers no usable `/tokenize` (and no file was given).
    #[error("use the server's tokenizer: {0}")]
    NoServerTokenizer(String),
}

/// Texts are counted in pieces of at most this many bytes ([`Tok::count`]).
pub const COUNT_PIECE_BYTES: usize = 64 * 1024;

/// `text` in consecutive pieces of at most `max` bytes (one piece when it fits). A piece
/// ends just before a whitespace character that precedes a non-whitespace one (the
/// boundary byte-level and whitespace pre-tokenizers split at anyway: the space stays with
/// the next word), in the second half of the window; else at the last character boundary.
pub fn pieces(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let max = max.max(8);
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= max {
            return Some(std::mem::take(&mut rest));
        }
        let window = &rest.as_bytes()[..=max];
        let cut = (max / 2..max)
            .rev()
            .find(|&i| window[i].is_ascii_whitespace() && !window[i + 1].is_ascii_whitespace())
            .filter(|&i| i > 0)
            .unwrap_or_else(|| {
                (1..=max)
                    .rev()
                    .find(|&i| rest.is_char_boundary(i))
                    .unwrap_or(max)
            });
        let (head, tail) = rest.split_at(cut);
        rest = tail;
        Some(head)
    })
}

/// A loaded tokenizer and the file digest it came from, or the server's `/tokenize`.
pub struct Tok {
    inner: Inner,
    /// `sha256:` of the tokenizer file (`None` for the server's tokenizer: no bytes to hash).
    pub sha256: Option<String>,
    /// `huggingface_tokenizer_json`, `gguf_tokenizer_view` or `server_tokenize`.
    pub kind: &'static str,
    /// The file read (inside the directory when a directory was given; `None` for the
    /// server's tokenizer).
    pub file: Option<std::path::PathBuf>,
}

enum Inner {
    File(Box<Tokenizer>),
    Server(Box<ServerTokenizer>),
}

/// The server's tokenizer endpoint, called on a runtime of its own (only from synchronous
/// code: building a workload, never inside the load engine).
struct ServerTokenizer {
    rt: tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
    target: qual_serve::client::Target,
    model: String,
}

/// The path of the server tokenizer endpoint (after the URL's prefix).
pub const TOKENIZE_PATH: &str = "/tokenize";

impl ServerTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        let body = serde_json::json!({
            "model": self.model, "content": text, "prompt": text,
            "add_special": false, "add_special_tokens": false,
        });
        let (status, bytes) = self.rt.block_on(qual_serve::client::fetch_at(
            self.addr,
            &self.target,
            TOKENIZE_PATH,
            Some(body.to_string().into_bytes()),
            std::time::Duration::from_secs(30),
            16 * 1024 * 1024,
        ))?;
        if status != 200 {
            return Err(format!("{TOKENIZE_PATH} answered http {status}"));
        }
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{TOKENIZE_PATH} answered something other than JSON: {e}"))?;
        let tokens = v
            .get("tokens")
            .and_then(|t| t.as_array())
            .ok_or_else(|| format!("{TOKENIZE_PATH} answered without a tokens array"))?;
        // llama.cpp answers objects ({"id", "piece"}) when pieces are asked for; ids otherwise.
        tokens
            .iter()
            .map(|t| {
                t.as_u64()
                    .or_else(|| t.get("id").and_then(|i| i.as_u64()))
                    .and_then(|i| u32::try_from(i).ok())
                    .ok_or_else(|| format!("{TOKENIZE_PATH} answered a token that is not an id"))
            })
            .collect()
    }
}

impl std::fmt::Debug for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tok")
            .field("sha256", &self.sha256)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Tok {
    /// Loads `path` (at most 64 MiB): a `tokenizer.json` (Hugging Face's, or the GGUF view
    /// `tools/gguf_sidecars.py` writes), or a directory holding one (a Hugging Face model or
    /// tokenizer directory; a directory with only a slow tokenizer's files is refused, naming
    /// them).
    pub fn load(path: &Path) -> Result<Tok, TokError> {
        if path.is_dir() {
            let file = tokenizer_in(path)?;
            return Tok::load(&file);
        }
        let bytes = qual_json::read_file_limited(path, 64 * 1024 * 1024).map_err(|source| {
            TokError::Read {
                path: path.display().to_string(),
                source,
            }
        })?;
        let invalid = |reason: String| TokError::Invalid {
            path: path.display().to_string(),
            reason,
        };
        let doc: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| invalid(format!("not JSON: {e}")))?;
        let sha256 = qual_json::sha256_prefixed(&bytes);
        let sha256 = Some(sha256);
        if doc.get("model").is_some() {
            let inner = Tokenizer::from_bytes(&bytes).map_err(|e| invalid(e.to_string()))?;
            return Ok(Tok {
                inner: Inner::File(Box::new(inner)),
                sha256,
                kind: "huggingface_tokenizer_json",
                file: Some(path.to_path_buf()),
            });
        }
        let inner = from_gguf_view(&doc).map_err(invalid)?;
        Ok(Tok {
            inner: Inner::File(Box::new(inner)),
            sha256,
            kind: "gguf_tokenizer_view",
            file: Some(path.to_path_buf()),
        })
    }

    /// The tokenizer of the server at `addr` (`target`: its Host, prefix, credential, TLS),
    /// for `model`: probed once with a short text, so a server without `/tokenize` is
    /// refused here ([`TokError::NoServerTokenizer`]) and not in the middle of a workload.
    pub fn server(
        addr: std::net::SocketAddr,
        target: qual_serve::client::Target,
        model: &str,
    ) -> Result<Tok, TokError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| TokError::Encode(format!("start the tokenizer runtime: {e}")))?;
        let s = ServerTokenizer {
            rt,
            addr,
            target,
            model: model.to_string(),
        };
        match s.encode("kiln") {
            Ok(ids) if !ids.is_empty() => Ok(Tok {
                inner: Inner::Server(Box::new(s)),
                sha256: None,
                kind: "server_tokenize",
                file: None,
            }),
            Ok(_) => Err(TokError::NoServerTokenizer(format!(
                "{TOKENIZE_PATH} answered no token for a non-empty text"
            ))),
            Err(why) => Err(TokError::NoServerTokenizer(why)),
        }
    }

    /// Token ids of `text` (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokError> {
        match &self.inner {
            Inner::File(t) => t
                .encode_fast(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| TokError::Encode(format!("encode text: {e}"))),
            Inner::Server(s) => s
                .encode(text)
                .map_err(|e| TokError::Encode(format!("tokenize with the server: {e}"))),
        }
    }

    /// Whether this tokenizer is the server's (each count is a request to it, so it must
    /// not count during a measurement).
    pub fn is_server(&self) -> bool {
        matches!(self.inner, Inner::Server(_))
    }

    /// What the workload records about the tokenizer: `file sha256:…` or `server /tokenize`.
    pub fn source(&self) -> String {
        match (&self.inner, &self.sha256) {
            (Inner::Server(_), _) => format!("server {TOKENIZE_PATH}"),
            (Inner::File(_), Some(h)) => format!("file {h}"),
            (Inner::File(_), None) => "file".into(),
        }
    }

    /// The number of tokens of `text` (0 when it cannot be encoded). A text longer than
    /// [`COUNT_PIECE_BYTES`] is counted piece by piece ([`pieces`]), so memory stays bounded
    /// whatever its size (encoding 4 MB whole took 779 MB: the `tokenizers` crate keeps
    /// ids, offsets, token strings and masks per token); the sum can differ from the
    /// whole-text count only by a token merging across a piece boundary.
    pub fn count(&self, text: &str) -> u64 {
        pieces(text, COUNT_PIECE_BYTES)
            .map(|p| self.encode(p).map_or(0, |v| v.len() as u64))
            .sum()
    }

    /// Text of exactly `n` tokens — as returned, which is how it is sent — drawn from `words`
    /// by `next` (an index source). The first word is counted as it stands at the start of a
    /// text (no leading space), every later one with its leading space (each count measured
    /// once per word); words are appended while they fit, the rest is filled with single-token
    /// words, and the whole is re-encoded to check; a mismatch (tokens merging across words) is
    /// repaired by dropping or adding single-token words after the first (bounded), else it is
    /// an error. The caller can record `n` as the text's count without encoding it again.
    pub fn exact_prompt(
        &self,
        n: u64,
        words: &[&str],
        cache: &mut WordCache,
        mut next: impl FnMut(usize) -> usize,
    ) -> Result<String, TokError> {
        if n == 0 {
            return Ok(String::new());
        }
        self.fill_cache(words, cache)?;
        let leading = |w: &str| cache.leading.get(w).copied().filter(|&c| c > 0 && c <= n);
        let first = (0..8)
            .map(|_| words[next(words.len())])
            .find(|w| leading(w).is_some())
            .or_else(|| words.iter().copied().filter(|w| leading(w).is_some()).min_by_key(|w| leading(w)))
            .ok_or_else(|| {
                TokError::Encode(format!(
                    "no word of the word source is at most {n} tokens at the start of a text under this tokenizer"
                ))
            })?;
        let mut total = leading(first).unwrap_or(n);
        let mut parts: Vec<String> = vec![first.to_string()];
        let mut misses = 0;
        while total < n && misses < 8 {
            let w = words[next(words.len())];
            let c = cache.counts.get(w).copied().unwrap_or(u64::MAX);
            if c > 0 && total + c <= n {
                parts.push(format!(" {w}"));
                total += c;
                misses = 0;
            } else {
                misses += 1;
            }
        }
        while total < n {
            parts.push(cache.single[next(cache.single.len())].clone());
            total += 1;
        }
        for _ in 0..64 {
            let text: String = parts.concat();
            let got = self.encode(&text)?.len() as u64;
            match got.cmp(&n) {
                std::cmp::Ordering::Equal => return Ok(text),
                std::cmp::Ordering::Greater if parts.len() > 1 => {
                    parts.pop();
                }
                std::cmp::Ordering::Greater => break,
                std::cmp::Ordering::Less => {
                    for _ in got..n {
                        parts.push(cache.single[next(cache.single.len())].clone());
                    }
                }
            }
        }
        Err(TokError::Encode(format!(
            "could not build a prompt of exactly {n} tokens with this tokenizer"
        )))
    }
}

impl Tok {
    /// Counts every word of `words` once (after a space and at the start of a text) into
    /// `cache`; `Err` when no word is a single token after a space.
    fn fill_cache(&self, words: &[&str], cache: &mut WordCache) -> Result<(), TokError> {
        if !cache.single.is_empty() {
            return Ok(());
        }
        for w in words {
            let c = self.count(&format!(" {w}"));
            cache.counts.insert((*w).to_string(), c);
            cache.leading.insert((*w).to_string(), self.count(w));
            if c == 1 {
                cache.single.push(format!(" {w}"));
            }
        }
        if cache.single.is_empty() {
            return Err(TokError::Encode(
                "no word of the word source is a single token under this tokenizer".into(),
            ));
        }
        Ok(())
    }

    /// The words of `words` that are one token after a space, each with its space
    /// (`" w"`): a run of them is exactly as many tokens wherever it follows a text that ends
    /// before a space (the pre-tokenizers split there), so blocks built of them concatenate
    /// into prompts that share exactly their common blocks' tokens.
    pub fn single_token_words<'c>(
        &self,
        words: &[&str],
        cache: &'c mut WordCache,
    ) -> Result<&'c [String], TokError> {
        self.fill_cache(words, cache)?;
        Ok(&cache.single)
    }
}

/// The `tokenizer.json` of a tokenizer directory, or why there is none.
fn tokenizer_in(dir: &Path) -> Result<std::path::PathBuf, TokError> {
    let file = dir.join("tokenizer.json");
    if file.is_file() {
        return Ok(file);
    }
    let slow: Vec<&str> = [
        "tokenizer.model",
        "vocab.json",
        "merges.txt",
        "vocab.txt",
        "spiece.model",
    ]
    .into_iter()
    .filter(|f| dir.join(f).is_file())
    .collect();
    let reason = if slow.is_empty() {
        "the directory holds no tokenizer.json".to_string()
    } else {
        format!(
            "the directory holds no tokenizer.json, only a slow tokenizer's files ({}); save the fast tokenizer with transformers' AutoTokenizer.from_pretrained(dir).save_pretrained(dir), or pass the GGUF view tools/gguf_sidecars.py writes",
            slow.join(", ")
        )
    };
    Err(TokError::Invalid {
        path: dir.display().to_string(),
        reason,
    })
}

/// Per-tokenizer memo of word token counts (after a space, and at the start of a text) and
/// the single-token words (after a space).
#[derive(Debug, Default)]
pub struct WordCache {
    counts: HashMap<String, u64>,
    leading: HashMap<String, u64>,
    single: Vec<String>,
}

fn from_gguf_view(doc: &serde_json::Value) -> Result<Tokenizer, String> {
    let get = |k: &str| doc.get(k);
    match get("tokenizer.ggml.model").and_then(|v| v.as_str()) {
        Some("gpt2") => {}
        Some(other) => {
            return Err(format!(
                "tokenizer.ggml.model {} is not supported (only \"gpt2\" byte-level BPE)",
                serde_json::Value::from(other)
            ))
        }
        None => {
            return Err(
                "neither a tokenizer.json (no /model) nor a GGUF tokenizer view (no /tokenizer.ggml.model)"
                    .into(),
            )
        }
    }
    let tokens = get("tokenizer.ggml.tokens")
        .and_then(|v| v.as_array())
        .ok_or("/tokenizer.ggml.tokens: must be an array of strings")?;
    let mut vocab = tokenizers::models::bpe::Vocab::default();
    for (i, t) in tokens.iter().enumerate() {
        let t = t
            .as_str()
            .ok_or(format!("/tokenizer.ggml.tokens/{i}: must be a string"))?;
        vocab.insert(t.to_string(), i as u32);
    }
    let merges = get("tokenizer.ggml.merges")
        .and_then(|v| v.as_array())
        .ok_or("/tokenizer.ggml.merges: must be an array of strings")?
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.as_str()
                .and_then(|s| s.split_once(' '))
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or(format!(
                    "/tokenizer.ggml.merges/{i}: must be \"left right\""
                ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| format!("build the BPE model: {e}"))?;
    let mut tk = Tokenizer::new(bpe);
    let byte_level = ByteLevel::new(false, true, true);
    let pre: PreTokenizerWrapper = match get("tokenizer.ggml.pre").and_then(|v| v.as_str()) {
        Some("smollm") => Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into(),
        _ => byte_level.into(),
    };
    tk.with_pre_tokenizer(Some(pre));
    tk.with_decoder(Some(ByteLevel::default()));
    Ok(tk)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte-level BPE view in GGUF's shape: the byte alphabet plus a few merges.
    fn view() -> Tok {
        let mut tokens: Vec<String> = ByteLevel::alphabet()
            .into_iter()
            .map(String::from)
            .collect();
        tokens.sort();
        let merges = ["Ġ i", "Ġi s", "Ġ t", "h e", "Ġt he"];
        for m in merges {
            tokens.push(m.replace(' ', ""));
        }
        let doc = serde_json::json!({
            "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm",
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges,
        });
        Tok {
            inner: Inner::File(Box::new(from_gguf_view(&doc).unwrap())),
            sha256: None,
            kind: "gguf_tokenizer_view",
            file: None,
        }
    }

    #[test]
    fn a_tokenizer_directory_is_read_through_its_tokenizer_json() {
        let d = tempfile::tempdir().unwrap();
        let err = Tok::load(d.path()).unwrap_err().to_string();
        assert!(
            err.ends_with("the directory holds no tokenizer.json"),
            "{err}"
        );
        std::fs::write(d.path().join("vocab.json"), "{}").unwrap();
        std::fs::write(d.path().join("merges.txt"), "").unwrap();
        let err = Tok::load(d.path()).unwrap_err().to_string();
        assert!(
            err.contains("only a slow tokenizer's files (vocab.json, merges.txt)"),
            "{err}"
        );
        qual_test_fixtures::word_level_tokenizer(d.path(), &["a", "b"]);
        let t = Tok::load(d.path()).unwrap();
        assert_eq!(t.kind, "huggingface_tokenizer_json");
        assert_eq!(
            t.file.as_deref(),
            Some(d.path().join("tokenizer.json").as_path())
        );
        assert_eq!(t.count("a b a"), 3);
    }

    #[test]
    fn pieces_cover_the_text_at_word_boundaries() {
        let text = "alpha beta  gamma\tdelta épsilon ".repeat(50);
        let ps: Vec<&str> = pieces(&text, 40).collect();
        assert_eq!(ps.concat(), text);
        assert!(ps.iter().all(|p| p.len() <= 40));
        assert!(
            ps[1..].iter().all(|p| p.starts_with(char::is_whitespace)),
            "{ps:?}"
        );
        // No whitespace at all: cut at character boundaries.
        let word = "é".repeat(100);
        let ps: Vec<&str> = pieces(&word, 41).collect();
        assert_eq!(ps.concat(), word);
        assert!(ps.iter().all(|p| p.len() <= 41));
        assert_eq!(pieces("", 10).count(), 0);
    }

    /// A 4 MB reply of byte-level BPE text (about a million tokens) is counted with bounded
    /// memory (the process's VmHWM grows by less than 64 MiB), and piecewise counting agrees
    /// with counting whole on a text of several pieces.
    #[test]
    fn a_four_megabyte_reply_is_counted_in_bounded_memory() {
        let t = view();
        let line = "the river is quiet and the stone is cold 12 ";
        let text = line.repeat((4 << 20) / line.len() + 1);
        assert!(text.len() > 4 << 20);
        let before = qual_exec::procfs::status_bytes(0, "VmHWM").unwrap();
        let n = t.count(&text);
        let grew = qual_exec::procfs::status_bytes(0, "VmHWM").unwrap() - before;
        eprintln!(
            "counted {n} tokens of {} bytes; VmHWM grew {grew} bytes",
            text.len()
        );
        assert!(n > text.len() as u64 / 4, "{n}");
        assert!(grew < 64 << 20, "VmHWM grew {grew} bytes");
        let small = &text[..300_000];
        let whole = t.encode(small).unwrap().len() as u64;
        assert_eq!(t.count(small), whole);
    }

    #[test]
    fn gguf_view_merges_and_splits_digits() {
        let t = view();
        assert_eq!(t.count(" is"), 1);
        assert_eq!(t.count(" the"), 1);
        // No merge starts "Ġ h": Ġ, h, i, s.
        assert_eq!(t.count(" his"), 4);
        // The smollm pre-tokenizer splits digits one by one.
        assert_eq!(t.count("123"), 3);
    }

    #[test]
    fn exact_prompts_have_exactly_the_asked_length() {
        let t = view();
        let mut seed = 7usize;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        // " is" is one token but "is" two: the count that matters is the text as sent, which
        // starts without a space. No word here is one token at the start of a text.
        let words = ["the", "is", "river", "stone", "quiet"];
        let mut cache = WordCache::default();
        let err = t
            .exact_prompt(1, &words, &mut cache, &mut next)
            .unwrap_err();
        assert!(err.to_string().contains("at the start of a text"), "{err}");
        let words = ["the", "is", "river", "a", "stone", "quiet"];
        let mut cache = WordCache::default();
        for n in [1u64, 2, 5, 17, 40, 128] {
            let text = t.exact_prompt(n, &words, &mut cache, &mut next).unwrap();
            assert!(!text.starts_with(' '), "{text:?}");
            assert_eq!(t.count(&text), n, "{text:?}");
        }
        let bad = serde_json::json!({"tokenizer.ggml.model": "llama"});
        assert!(from_gguf_view(&bad).unwrap_err().contains("not supported"));
    }
}
