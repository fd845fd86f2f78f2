//! One module per subcommand family; each owns its clap types and printing.

pub mod args;
pub mod bench;
pub mod campaign;
pub mod cargo;
pub mod doctor;
pub mod fleet;
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

/// The keys of `--trusted-keys PATH` when given (`Ok(None)` without the flag); on a bad file
/// prints `kiln-qual: failed to …` and gives the exit code to return.
pub fn trusted_keys(
    path: Option<&std::path::Path>,
) -> Result<Option<Vec<qual_attest::TrustedKey>>, i32> {
    match path.map(qual_attest::load_trusted_keys) {
        None => Ok(None),
        Some(Ok(k)) => Ok(Some(k)),
        Some(Err(e)) => {
            crate::output::errln!(
                "kiln-qual: failed to {}",
                crate::output::esc(&e.to_string())
            );
            Err(crate::exit::FAILED)
        }
    }
}
