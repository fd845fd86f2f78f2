//! The `kiln-qual` tests that need something real (the Kiln corpus in `../shared`, the
//! llama.cpp server that `scripts/setup-real-server` installs, the reference worker), as one
//! `harness = false` binary: `qual_test_fixtures::harness` reports a trial whose dependency is
//! missing as ignored, saying what is missing, and fails it under `CI=true` (the corpus: when
//! the CI script asks for it with `KIQ_REQUIRE_CORPUS=1`). Trials are named `module::trial`;
//! `scripts/compat-check` runs the `compat_` ones. `terminal` needs tmux, zsh and fish
//! (progress on a real terminal, Ctrl-C, completion in real shells); `nvml_double` needs `cc`
//! (it builds the test double of `libnvidia-ml.so.1`: no NVIDIA GPU here or in CI).

// Tests start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod bench;
#[path = "../common/mod.rs"]
mod common;
mod compat_legacy;
mod compat_receipts;
mod compat_workloads;
mod cuda_real;
mod fleet_gha;
mod fleet_slurm;
mod nvml_double;
mod oracle_real;
mod scaffold_real;
mod serving_real;
mod terminal;
mod vulkan_oracle_real;
mod vulkan_real;

fn main() {
    qual_test_fixtures::harness::run_modules(vec![
        ("bench", bench::trials()),
        ("compat_legacy", compat_legacy::trials()),
        ("compat_receipts", compat_receipts::trials()),
        ("compat_workloads", compat_workloads::trials()),
        ("cuda_real", cuda_real::trials()),
        ("fleet_gha", fleet_gha::trials()),
        ("fleet_slurm", fleet_slurm::trials()),
        ("nvml_double", nvml_double::trials()),
        ("oracle_real", oracle_real::trials()),
        ("scaffold_real", scaffold_real::trials()),
        ("serving_real", serving_real::trials()),
        ("terminal", terminal::trials()),
        ("vulkan_oracle_real", vulkan_oracle_real::trials()),
        ("vulkan_real", vulkan_real::trials()),
    ]);
}
