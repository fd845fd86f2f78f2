//! The integration tests of `qual-latency`, linked as one test binary (one link instead of one
//! per file on a 2-core machine): end to end through real git repositories, the plan, and the
//! metric parser's properties. `tests/corpus.rs` (the Kiln corpus, a loud-skip `harness = false`
//! target) stays its own binary; both use `tests/common`.

#[path = "../common/mod.rs"]
mod common;
mod e2e;
mod metric_proptest;
mod plan;
