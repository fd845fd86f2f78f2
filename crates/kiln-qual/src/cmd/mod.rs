//! One module per subcommand family; each owns its clap types and printing.

pub mod cargo;
pub mod latency;
pub mod receipt;
pub mod run;
pub mod serve;
pub mod workload;

/// Placeholder used while a subcommand family is being built: a clear refusal, never a fake
/// result. Remove once every family is implemented.
pub fn not_implemented(what: &str) -> i32 {
    eprintln!("kiln-qual: failed to {what}: this subcommand is not implemented yet");
    3
}
