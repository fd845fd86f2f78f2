//! qual-runner: run one variant of a committed workload and write a source-bound receipt.
//!
//! [`run`] is the whole pipeline, as named phases with typed inputs and outputs (see the
//! `run` module): [`preflight`] (every refusal before anything is created) → place (receipt
//! id, receipt path, run directory) → bind (model fingerprint, environment capture: platform
//! and backend probes) → execute (serial bounded execution of every case × repetition through
//! `qual-exec`, [`execute`], with the case-result protocol of [`case_result`]) → settle (model
//! and source drift checks) → aggregate (skip policy, infrastructure failures and verdict,
//! [`aggregate`]) → write (raw evidence under `.qualification/runs/<receipt-id>/`, the receipt
//! self-validated and written exclusively).
//!
//! The evidence documents are typed ([`evidence`]) and become JSON through one serializer
//! ([`document`]) that keeps integers, floats, absent members and `null` exactly.
//!
//! Exit codes the CLI maps from the outcome ([`exit_code`]): 0 passed, 1 failed (a receipt was
//! written), 3 refused by preflight (nothing was created), 4 aborted by an internal error after
//! the run started (run data removed, no receipt), 130 interrupted by SIGINT/SIGTERM (owned
//! processes terminated, run data removed).

pub mod case_box;
pub mod case_result;
pub mod document;
pub mod environment;
pub mod error;
pub mod evidence;
pub mod execute;
pub mod paths;
pub mod preflight;
pub mod progress;
pub mod triage;
// `unsafe`: the receipt's file system is flushed with syncfs before the receipt is linked.
#[allow(unsafe_code)]
mod run;

/// Repetition aggregation, skip policy, infrastructure failures and the verdict (shared with
/// `receipt verify`, which recomputes them from the retained evidence).
pub use qual_receipt::aggregate;
/// Bounded `details` text.
pub use qual_receipt::details;

pub use error::{Refusal, RunError};
pub use progress::{CaseProgress, NoProgress, RunProgress};
pub use run::{run, run_observed, RunOutcome};

use std::path::PathBuf;

/// Exit code: receipt written, verdict passed.
pub const EXIT_PASSED: i32 = 0;
/// Exit code: receipt written, verdict failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: preflight refusal, nothing created.
pub const EXIT_REFUSED: i32 = 3;
/// Exit code: aborted after the run started; run data removed, no receipt.
pub const EXIT_ABORTED: i32 = 4;
/// Exit code: interrupted by SIGINT/SIGTERM.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Default `--term-grace-seconds`.
pub const DEFAULT_TERM_GRACE_SECONDS: f64 = 65.0;

/// One run request (the CLI's arguments).
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// Directory relative paths of `--output` and `--model` resolve against; the repository is
    /// the git worktree containing it. The workload path resolves against the repository root.
    pub cwd: PathBuf,
    /// Workload path (a relative one is taken from `cwd`, like `output` and `model`).
    pub workload: PathBuf,
    /// Variant id.
    pub variant: String,
    /// Host id.
    pub host_id: String,
    /// Explicit receipt path.
    pub output: Option<PathBuf>,
    /// Raw `NAME=VALUE` assignments in command-line order.
    pub vars: Vec<String>,
    /// Model directory.
    pub model: Option<PathBuf>,
    /// Model id.
    pub model_id: Option<String>,
    /// Explicit receipt id.
    pub receipt_id: Option<String>,
    /// Termination grace in seconds.
    pub term_grace_seconds: f64,
    /// The invocation recorded as `qualification.command`.
    pub command: Vec<String>,
}

/// The process exit code for a run result.
pub fn exit_code(r: &Result<RunOutcome, RunError>) -> i32 {
    match r {
        Ok(o) if o.verdict() == qual_receipt::model::Verdict::Passed => EXIT_PASSED,
        Ok(_) => EXIT_FAILED,
        Err(RunError::Refused(_)) => EXIT_REFUSED,
        Err(RunError::Aborted(_)) => EXIT_ABORTED,
        Err(RunError::Interrupted { .. }) => EXIT_INTERRUPTED,
    }
}
