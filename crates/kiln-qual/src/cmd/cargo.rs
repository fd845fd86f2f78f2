//! `kiln-qual cargo [--timeout-seconds S] [--term-grace-seconds G] [--allow-env NAME]... --
//! <cargo args>`: the bounded cargo wrapper (offline, filtered environment, finite runtime,
//! cleanup), so workloads need no shell script to run cargo. The rules live in
//! `qual_exec::wrap`; this module only parses, streams output and prints the summary.
//!
//! Exit code: cargo's own; 124 when the deadline passed; 127 when cargo could not be started;
//! 128 + signal when cargo died of a signal or `kiln-qual` was interrupted; 2 for usage errors.

use crate::output::{errln, esc};
use clap::Args;
use qual_exec::{signals, wrap, ExecError, Observer, OutputStream};
use std::io::Write;
use std::time::Duration;

/// Arguments of `kiln-qual cargo`.
#[derive(Args, Debug)]
pub struct CargoArgs {
    /// Deadline for the whole cargo run; then SIGTERM to its process group, the grace, SIGKILL.
    #[arg(long, default_value_t = 3600.0, value_parser = super::args::seconds_in(0.001..=604_800.0))]
    timeout_seconds: f64,
    /// Time between SIGTERM and SIGKILL.
    #[arg(long, default_value_t = 10.0, value_parser = super::args::seconds_in(0.0..=3600.0))]
    term_grace_seconds: f64,
    /// Also pass this host environment variable through (repeatable); the default allow-list
    /// is the closed case environment plus toolchain and build knobs.
    #[arg(long = "allow-env", value_name = "NAME")]
    allow_env: Vec<String>,
    /// The cargo program (a path, or a name looked up on the filtered PATH).
    #[arg(long, default_value = "cargo")]
    cargo: String,
    /// Arguments for cargo, after `--`.
    #[arg(last = true, required = true, value_name = "CARGO_ARGS")]
    cargo_args: Vec<String>,
}

/// Streams the child's output to ours as it arrives.
struct PassThrough;

impl Observer for PassThrough {
    fn output(&mut self, stream: OutputStream, chunk: &[u8]) {
        // A closed stdout/stderr of ours must not stop the build: ignore write errors.
        let _ = match stream {
            OutputStream::Stdout => std::io::stdout().write_all(chunk),
            OutputStream::Stderr => std::io::stderr().write_all(chunk),
        };
    }
}

/// Runs `kiln-qual cargo`.
pub fn run(a: CargoArgs) -> i32 {
    if let Err(e) = signals::install_forwarding() {
        errln!("kiln-qual cargo: failed to install signal forwarding: {e}");
        return 1;
    }
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            errln!("kiln-qual cargo: failed to read the current directory: {e}");
            return 1;
        }
    };
    let sandbox = match qual_runner::case_box::for_directory(&cwd) {
        Ok(s) => s,
        Err(e) => {
            errln!("kiln-qual cargo: refused: {}", esc(&e));
            return 2;
        }
    };
    let host_env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let spec = wrap::cargo_spec(
        &a.cargo,
        &a.cargo_args,
        cwd,
        host_env,
        &a.allow_env,
        Duration::from_secs_f64(a.timeout_seconds),
        Duration::from_secs_f64(a.term_grace_seconds),
        sandbox,
    );
    let exec = match qual_exec::execute_observed(&spec, &mut PassThrough) {
        Ok(e) => e,
        Err(e @ ExecError::Spawn { .. }) => {
            errln!("kiln-qual cargo: failed to {}", esc(&e.to_string()));
            return wrap::EXIT_SPAWN_FAILED;
        }
        Err(ExecError::Interrupted { signal }) => {
            errln!("kiln-qual cargo: interrupted before cargo started");
            return 128 + signal;
        }
        Err(e) => {
            errln!("kiln-qual cargo: failed to {}", esc(&e.to_string()));
            return 1;
        }
    };
    let _ = std::io::stdout().flush();
    let c = &exec.containment;
    match &exec.termination {
        qual_exec::Termination::TimedOut { signal_used } => errln!(
            "kiln-qual cargo: cargo exceeded {}s; its process group was ended with {}",
            a.timeout_seconds,
            qual_exec::signal_name(*signal_used)
        ),
        qual_exec::Termination::Interrupted { signal_used } => errln!(
            "kiln-qual cargo: interrupted; cargo's process group was ended with {}",
            qual_exec::signal_name(*signal_used)
        ),
        _ => {}
    }
    if !c.residue.is_empty() {
        errln!(
            "kiln-qual cargo: cargo left {} process(es) running after it exited; killed:",
            c.residue.len()
        );
        for r in c.residue.iter().take(20) {
            errln!(
                "  pid {} ({}) {}",
                r.pid,
                qual_exec::signal_name(r.signal),
                esc(&r.cmdline)
            );
        }
    }
    wrap::exit_code(&exec.termination)
}
