//! `qual-exec-run [--timeout S] [--grace S] [--loopback-only] [--read-only-host]
//! [--read-only PATH]... [--writable PATH]... -- ARGV...`: runs one command
//! through `qual_exec::execute` with the inherited environment and prints the `Execution`
//! evidence as JSON on stdout. A minimal runner process for tests that must kill the runner
//! itself (e.g. with SIGKILL) and for manual experiments. Exit 0 when the evidence was
//! printed, 1 when the execution could not run, 64 on usage errors.

#![forbid(unsafe_code)]

use qual_exec::{execute, signals, CaptureLimits, ExecSpec, NetworkPolicy};
use std::time::Duration;

fn usage(msg: &str) -> ! {
    eprintln!("qual-exec-run: failed to parse arguments: {msg}");
    std::process::exit(64)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args
        .iter()
        .position(|a| a == "--")
        .unwrap_or_else(|| usage("missing `--` before the command"));
    let (opts, argv) = (&args[..split], &args[split + 1..]);
    let mut timeout = 60.0;
    let mut grace = 5.0;
    let mut network = NetworkPolicy::Inherit;
    let mut sandbox = qual_exec::Sandbox::default();
    let mut i = 0;
    while i < opts.len() {
        let value = |i: usize| -> f64 {
            opts.get(i + 1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{} needs seconds", opts[i])))
        };
        match opts[i].as_str() {
            "--timeout" => {
                timeout = value(i);
                i += 1;
            }
            "--grace" => {
                grace = value(i);
                i += 1;
            }
            "--loopback-only" => network = NetworkPolicy::LoopbackOnly,
            "--read-only-host" => sandbox.host = qual_exec::HostFiles::ReadOnly,
            "--read-only" | "--writable" => {
                let p = opts
                    .get(i + 1)
                    .unwrap_or_else(|| usage(&format!("{} needs a path", opts[i])));
                let list = if opts[i] == "--read-only" {
                    &mut sandbox.read_only
                } else {
                    &mut sandbox.writable
                };
                list.push(p.into());
                i += 1;
            }
            other => usage(&format!("unknown option {other:?}")),
        }
        i += 1;
    }
    if argv.is_empty() {
        usage("missing command");
    }
    if let Err(e) = signals::install_forwarding() {
        eprintln!("qual-exec-run: failed to install signal forwarding: {e}");
        std::process::exit(1);
    }
    let spec = ExecSpec {
        argv: argv.to_vec(),
        cwd: std::env::current_dir().unwrap_or_else(|_| "/".into()),
        env: std::env::vars().collect(),
        timeout: Duration::from_secs_f64(timeout),
        term_grace: Duration::from_secs_f64(grace),
        capture: CaptureLimits::default(),
        network,
        sandbox,
    };
    match execute(&spec) {
        Ok(e) => println!(
            "{}",
            serde_json::to_string(&e).expect("evidence serializes")
        ),
        Err(e) => {
            eprintln!("qual-exec-run: failed to {e}");
            std::process::exit(1);
        }
    }
}
