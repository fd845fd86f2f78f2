//! Process exit codes shared by every subcommand.

/// Everything checked is valid, or the run passed.
pub const OK: i32 = 0;
/// Some input is invalid, or the verdict is failed.
pub const FAILED: i32 = 1;
/// The command line itself is wrong.
pub const USAGE: i32 = 2;
/// SIGINT or SIGTERM arrived (128 + SIGINT, what a shell reports for Ctrl-C).
pub const INTERRUPTED: i32 = 130;

/// The process exit code once a command returned `code`: [`INTERRUPTED`] when SIGINT/SIGTERM
/// arrived while it ran, whatever it returned.
///
/// The one interruption mechanism: a long command installs `qual_exec::signals` forwarding
/// (the handler only records the signal and wakes the supervising loops), stops at its next
/// check, ends what it owns (servers, cases), writes what it had finished (`bench` its
/// outputs for the points done, `campaign` its receipts and summary, `serve` its failed case
/// result; `run` removes its run data, as its contract says), and returns here. Commands that
/// never install forwarding keep the default action: the signal ends them at once.
pub fn after_command(code: i32) -> i32 {
    match qual_exec::signals::interrupted() {
        Some(_) => INTERRUPTED,
        None => code,
    }
}
