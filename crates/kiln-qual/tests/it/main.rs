//! The libtest integration tests of the `kiln-qual` binary, linked as one test binary (one
//! link instead of one per file on a 2-core machine): the CLI's commands end to end, hostile
//! cases and the examples, over the helpers of `tests/common` (shared with `tests/real`).
//!
//! Two files stay their own binaries, because they need this process to themselves:
//! `hardening.rs` measures a child's peak RSS, which on Linux starts from the spawning
//! process's own peak (merged, other tests' memory pushed it past the bound), and
//! `receipt_verify.rs` runs the runner in-process (`qual_runner::run`), whose process-wide
//! containment saw other tests' processes (merged, its cases died of SIGABRT; alone they pass).

// Tests: libc calls (signals, ids, forks) set up and observe the processes under test.
#![allow(unsafe_code)]
// Tests start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod adversarial;
mod campaign_tamper;
mod cargo_wrapper;
mod cli_campaign;
mod cli_conventions;
mod cli_doctor;
mod cli_init;
mod cli_oracle;
mod cli_receipt;
mod cli_report_bench;
mod cli_report_campaign;
mod cli_serve;
mod cli_shell;
mod cli_triage;
mod cli_workload;
#[path = "../common/mod.rs"]
mod common;
mod fleet_collect;
mod fresh_clone;
mod run_examples;
mod run_serving_example;
mod serve_residue;
