//! qual-bench: `kiln-qual bench`, benchmarking any OpenAI-compatible endpoint.
//!
//! The load itself is qual-serve's one engine ([`qual_serve::load::run_plan`]); this crate
//! owns what is specific to benchmarking someone else's server: the workloads
//! ([`workload`]: synthetic exact-length prompts, shared prefixes, multi-turn, dataset and
//! trace replay) built with a real tokenizer ([`tokenizer`]), the load points, sweeps and
//! SLA search with repeats ([`run`]), the statistics ([`stats`]: configurable percentiles
//! with sample support, t-intervals, time series), the outputs (result JSON, CSV, records
//! JSONL), failed requests grouped by why ([`failures`]), what a report draws of each run
//! ([`plot`]: quantiles at every percent, a bounded request timeline), the server's counters
//! and memory around each run ([`telemetry`]) and the comparison of results ([`compare`]).

#![forbid(unsafe_code)]

pub mod compare;
pub mod failures;
pub mod plot;
pub mod run;
pub mod stats;
pub mod telemetry;
pub mod tokenizer;
pub mod workload;
