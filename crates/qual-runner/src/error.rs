//! Why a run did not produce a receipt.
//!
//! [`RunError::Refused`] is a preflight refusal: nothing was created (no run directory, no
//! receipt). [`RunError::Interrupted`] means SIGINT/SIGTERM arrived: owned processes were
//! terminated and the run directory removed. [`RunError::Aborted`] is an internal failure
//! after the run directory existed: it was removed and no receipt was written.

/// A preflight refusal; each variant is one rule, its message one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    /// The working directory is not inside a git worktree.
    #[error("cannot find the git repository: {0}")]
    NotARepository(String),
    /// `--host-id` syntax.
    #[error("--host-id must match ^[a-z0-9][a-z0-9._-]{{1,63}}$")]
    BadHostId,
    /// `--term-grace-seconds` not finite or negative.
    #[error("termination grace must be finite and non-negative")]
    GraceNotFinite,
    /// `--term-grace-seconds` above 75.
    #[error("termination grace must be at most 75 seconds")]
    GraceTooLong,
    /// The workload path is not a regular `.json` file below `qualification/workloads/`.
    #[error("{0}")]
    WorkloadPath(String),
    /// The workload is not in HEAD.
    #[error("workload must be committed at HEAD: {0}")]
    WorkloadNotCommitted(String),
    /// The workload differs from HEAD.
    #[error("workload does not exactly match its committed HEAD bytes: {0}")]
    WorkloadModified(String),
    /// The workload does not load or validate.
    #[error("{0}")]
    InvalidWorkload(String),
    /// `--variant` names no declared variant.
    #[error("unknown variant {variant}; declared variants: {declared}")]
    UnknownVariant {
        /// What was asked.
        variant: String,
        /// The sorted declared ids.
        declared: String,
    },
    /// `--var` problems (all of them).
    #[error("{}", .0.join("; "))]
    Variables(Vec<String>),
    /// A placeholder cannot be delivered (`${seed}` with a null seed).
    #[error("{0}")]
    Placeholder(String),
    /// The receipt output path breaks the evidence path rule.
    #[error("{0}")]
    ReceiptPath(String),
    /// The receipt output exists.
    #[error("refusing to overwrite existing receipt: {0}")]
    ReceiptExists(String),
    /// `--receipt-id` syntax.
    #[error("--receipt-id must match ^[a-z0-9][a-z0-9._-]{{2,127}}$")]
    BadReceiptId,
    /// The run directory path breaks the path rule.
    #[error("{0}")]
    RunDirPath(String),
    /// The run directory exists.
    #[error("refusing to reuse existing run directory: {0}")]
    RunDirExists(String),
    /// Modified, staged or untracked files.
    #[error("Git worktree must be clean before qualification; no run was started ({0})")]
    DirtyWorktree(String),
    /// A git query failed.
    #[error("{0}")]
    Git(String),
    /// The repository policy file is unusable.
    #[error("{0}")]
    Policy(String),
    /// The source-tree digest failed.
    #[error("source-tree hash failed: {0}")]
    SourceTree(String),
    /// `--model` / `--model-id` inconsistent with the workload kind.
    #[error("{0}")]
    ModelFlags(String),
    /// Network isolation cannot be established (fail closed).
    #[error("network isolation is unavailable: {0}")]
    Isolation(String),
    /// HEAD, cleanliness or the digest changed during preflight.
    #[error("Git HEAD or source tree changed during preflight; no run was started")]
    SourceChangedDuringPreflight,
}

/// Why no receipt was written.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Preflight refusal; nothing was created.
    #[error("{0}")]
    Refused(#[from] Refusal),
    /// Interrupted by a signal; owned processes and run data were cleaned.
    #[error("interrupted by signal {signal}; owned processes and run data were cleaned")]
    Interrupted {
        /// The signal.
        signal: i32,
    },
    /// Internal failure after the run started; run data were removed.
    #[error("{0}")]
    Aborted(String),
}
