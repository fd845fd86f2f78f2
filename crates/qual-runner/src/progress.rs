//! Progress of a run, for whoever draws it: [`RunProgress`] hears of each case execution
//! before it starts (the CLI's progress bar on a terminal; nothing by default). It observes
//! only; it cannot change what runs or what the receipt records.

/// One case execution about to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaseProgress<'a> {
    /// Executions finished so far (cases × repetitions, in run order).
    pub done: u64,
    /// All executions of the run.
    pub total: u64,
    /// The case about to run.
    pub case_id: &'a str,
    /// Its repetition, from 1.
    pub repetition: u64,
}

/// Receives run progress (called on the runner's thread, between executions).
pub trait RunProgress {
    /// A case execution is about to start.
    fn update(&self, p: CaseProgress<'_>);
    /// Every execution ended (the run goes on to settle and write the receipt).
    fn finished(&self) {}
}

/// Hears nothing: what [`crate::run`] uses.
pub struct NoProgress;

impl RunProgress for NoProgress {
    fn update(&self, _: CaseProgress<'_>) {}
}
