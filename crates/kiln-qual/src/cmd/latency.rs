//! `kiln-qual latency check|run|write|import|lock|plan`.

use clap::Subcommand;

/// `kiln-qual latency ...`
#[derive(Subcommand, Debug)]
pub enum LatencyCommand {}

/// Runs `kiln-qual latency ...`.
pub fn run(c: LatencyCommand) -> i32 {
    match c {}
}
