//! One module per subcommand family; each owns its clap types and printing.

pub mod args;
pub mod bench;
pub mod campaign;
pub mod cargo;
pub mod doctor;
pub mod init;
pub mod latency;
pub mod oracle;
pub mod receipt;
pub mod report;
pub mod run;
pub mod serve;
pub mod shell;
pub mod triage;
pub mod workload;
