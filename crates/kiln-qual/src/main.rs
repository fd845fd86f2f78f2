//! `kiln-qual`: the command-line front end. It only parses arguments, calls the library
//! crates and prints; every rule lives in a library crate.
//!
//! Exit codes (documented in the README): 0 success / valid / passed, 1 invalid input or a
//! failed verdict, 2 usage error; subcommands that refuse or get interrupted document their
//! own codes (see `exit`).

mod cmd;
mod exit;
mod output;

use clap::{Parser, Subcommand};

/// Source-bound hardware qualification for ML inference backends.
#[derive(Parser, Debug)]
#[command(name = "kiln-qual", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate or describe workload contracts.
    #[command(subcommand)]
    Workload(cmd::workload::WorkloadCommand),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let code = match cli.command {
        Command::Workload(c) => cmd::workload::run(c),
    };
    std::process::exit(code);
}
