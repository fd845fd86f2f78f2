//! qual-campaign: paired serving campaigns.
//!
//! A campaign answers one question about a candidate engine: does it serve this model as well
//! as, and byte-for-byte the same as, a reference runtime at each concurrency on this host?
//! It runs fixed request profiles ([`profiles`]) with deterministic prompts ([`prompts`]),
//! sweeps concurrencies × repeats against one server (owned through `qual-serve`'s
//! lifecycle, or attached), dispatches every row all at once through `qual-serve`'s load
//! engine ([`row`]), gates each row and keeps exact-output evidence, samples memory
//! ([`memory`]) and the engine's Prometheus counters ([`prom`]) as diagnostic evidence, binds
//! the runtime ([`identity`], [`manifest`]), pairs every row with the reference engine's
//! receipt ([`pairing`]), and writes self-hashing per-profile receipts and a summary written
//! last ([`records`], [`campaign`]), and signs them ([`attest`]); [`verify`] re-checks a campaign directory, recomputing
//! what the records claim from their own numbers ([`recompute`]); [`report`]
//! reads verified records into `kiln-qual report`'s views.

pub mod attest;
pub mod campaign;
pub mod identity;
pub mod installed;
pub mod manifest;
// `unsafe`: device memory is read through the NVIDIA management library loaded with dlopen.
#[allow(unsafe_code)]
pub mod memory;
pub mod pairing;
pub mod profiles;
pub mod progress;
pub mod prom;
pub mod prompts;
pub mod recompute;
pub mod records;
pub mod report;
pub mod row;
pub mod verify;
