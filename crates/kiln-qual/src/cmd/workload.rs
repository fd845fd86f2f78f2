//! `kiln-qual workload check|show`.

use clap::Subcommand;

/// Workload subcommands.
#[derive(Subcommand, Debug)]
pub enum WorkloadCommand {}

/// Runs a workload subcommand and returns the exit code.
pub fn run(c: WorkloadCommand) -> i32 {
    match c {}
}
