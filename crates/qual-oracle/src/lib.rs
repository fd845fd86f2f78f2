//! Numerical oracles for kiln-qual: is the engine computing the right thing?
//!
//! # What this crate owns
//! - [`tensor`] / [`npy`]: reading logit tensors (safetensors, `.npy`) into [`tensor::Logits`].
//! - [`compare`]: the full-vocabulary comparison of a reference and a candidate (argmax,
//!   top-k overlap, max/mean absolute error, cosine, KL of the softmaxes, rank of the
//!   reference argmax), per position with the worst case.
//! - [`topk`]: a candidate's top-k view against the reference's full distribution: what it
//!   establishes (argmax, rank, overlap, lower bounds) and what it cannot (full KL, cosine).
//! - [`tolerance`]: declared tolerances and their checks.
//! - [`result`]: the self-hashed oracle result document (`kiln-qual.oracle-result.v1`).
//! - [`attest`]: signed oracle results (a DSSE/in-toto envelope through `qual-attest`).
//! - [`check`]: `oracle check` — our results and Kiln's `kiln.rocm-hf-next-token-oracle.v2`
//!   (§9.6 rules), Kiln's v1 refused (machine-temperature policy is unsupported).
//! - [`divergence`]: greedy first divergence and the §9.5 attribution of two candidates.
//! - [`attribution`]: `oracle attribute` — the §9.5 verdict per prompt at the first step where
//!   two candidates' greedy runs diverge (`kiln-qual.oracle-attribution.v1`, self-hashed).
//! - [`worker`]: the Hugging Face reference worker (`tools/reference/worker.py`) run as a
//!   contained process through `qual-exec`.
//!
//! - [`llama`]: candidate next-token distributions from llama.cpp's `/completion` (`n_probs`).
//! - [`greedy`]: the greedy oracle run end to end (engine, reference, comparison, divergence).
//!
//! Self-hashes use `qual_json::self_digest` (Kiln's canonical hash, §9.1).

pub mod attest;
pub mod attribution;
pub mod check;
// `unsafe`: the AVX2 row comparison is a target_feature function behind a runtime check.
#[allow(unsafe_code)]
pub mod compare;
pub mod divergence;
pub mod greedy;
pub mod llama;
pub mod npy;
pub mod result;
pub mod tensor;
pub mod tolerance;
pub mod topk;
pub mod worker;
