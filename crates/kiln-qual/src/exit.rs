//! Process exit codes shared by every subcommand.

/// Everything checked is valid, or the run passed.
pub const OK: i32 = 0;
/// Some input is invalid, or the verdict is failed.
pub const FAILED: i32 = 1;
/// The command line itself is wrong.
pub const USAGE: i32 = 2;
