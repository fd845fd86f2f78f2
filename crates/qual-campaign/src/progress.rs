//! Progress of a campaign, for whoever draws it: [`CampaignProgress`] hears of each row (and
//! each profile's warmup) before it is dispatched (the CLI's progress bar on a terminal;
//! nothing by default). It observes only; it cannot change what runs or what is recorded.

/// One step of a campaign about to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowProgress<'a> {
    /// Measured rows finished so far, over every profile.
    pub done: u64,
    /// Measured rows of the whole campaign (profiles × sizes × repeats).
    pub total: u64,
    /// The profile's name.
    pub profile: &'a str,
    /// The phase about to run: the warmup's or the row's (`c4-r0`, as the prompts name it).
    pub phase: &'a str,
}

/// Receives campaign progress (called on the campaign's thread, between rows).
pub trait CampaignProgress {
    /// A row (or a warmup) is about to be dispatched.
    fn update(&self, p: RowProgress<'_>);
}

/// Hears nothing: what [`crate::campaign::run`] uses.
pub struct NoProgress;

impl CampaignProgress for NoProgress {
    fn update(&self, _: RowProgress<'_>) {}
}
