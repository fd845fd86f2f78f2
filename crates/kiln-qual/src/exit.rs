//! Process exit codes shared by every subcommand.
//!
//! The one table (docs/bench.md, "Exit codes"): 0 ok; 1 failed (an input, the target, or a
//! verdict); 2 usage; 5 the server failed; 6 measurement refused; 7 an output could not
//! be written; 130 interrupted. When several apply after a run, the first of 7, 5, 6 wins (an
//! output missing is the worst: the evidence is gone; failed requests are a finding about the
//! server; a refused measurement one about the measurement).

/// Everything checked is valid, or the run passed.
pub const OK: i32 = 0;
/// Some input is invalid, or the verdict is failed.
pub const FAILED: i32 = 1;
/// The command line itself is wrong.
pub const USAGE: i32 = 2;
/// The server failed: it failed more measured requests than was allowed (`bench
/// --max-failure-rate`, default none), none succeeded, or its own counters (`bench
/// --metrics-path`) account for fewer requests or tokens than the client saw. (`run` uses 3 and 4 for
/// its own refusal and abort; this table starts above them.)
pub const SERVER_FAILED: i32 = 5;
/// The measurement was refused: every run was refused by the measurement-validity gate, or
/// nothing was measured. The numbers are written but are not a measurement.
pub const MEASUREMENT_REFUSED: i32 = 6;
/// An output could not be written: refused before anything ran (it exists, its directory
/// does not, two flags name it), or its write failed afterwards.
pub const OUTPUT_FAILED: i32 = 7;
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
