//! `kiln-qual`: the command-line front end. It only parses arguments, calls the library
//! crates and prints; every rule lives in a library crate.
//!
//! Exit codes (documented in the README): 0 success / valid / passed, 1 invalid input or a
//! failed verdict, 2 usage error; subcommands that refuse or get interrupted document their
//! own codes (see `exit`). A closed stdout ends any command quietly with 141 (see `output`),
//! except that `run` keeps its verdict's code once the receipt is written.

#![forbid(unsafe_code)]

mod cmd;
mod exit;
mod output;

use clap::{CommandFactory, Parser, Subcommand};

/// `--version`: the package version and the commit it was built from (recorded by `build.rs`
/// at build time; `unknown` without git).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KILN_QUAL_COMMIT"),
    ")"
);

/// Source-bound hardware qualification for ML inference backends.
#[derive(Parser, Debug)]
#[command(name = "kiln-qual", version = VERSION, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate or describe workload contracts.
    #[command(subcommand)]
    Workload(cmd::workload::WorkloadCommand),
    /// Run one variant of a committed workload and write a source-bound receipt.
    Run(cmd::run::RunArgs),
    /// Compute the source-tree digest the runner binds.
    SourceTree(cmd::run::SourceTreeArgs),
    /// Model identity commands.
    #[command(subcommand)]
    Model(cmd::run::ModelCommand),
    /// Bounded cargo wrapper for workload cases (offline, filtered environment, deadline).
    Cargo(cmd::cargo::CargoArgs),
    /// Validate or show receipts.
    #[command(subcommand)]
    Receipt(cmd::receipt::ReceiptCommand),
    /// Compare two receipts under the workload's comparison policy.
    Compare(cmd::receipt::CompareArgs),
    /// Reports over receipts and their evidence: Markdown, JUnit XML, CSV, HTML with plots.
    Report(cmd::report::ReportArgs),
    /// Run an owned-server serving campaign and write its case result.
    Serve(Box<cmd::serve::ServeArgs>),
    /// Run a paired serving campaign: fixed profiles × concurrency sweep against one server,
    /// gated rows, exact-output evidence, reference pairing, self-hashing receipts and summary.
    Campaign(Box<cmd::campaign::CampaignCli>),
    /// Capture a Python reference runtime's manifest (installed files checked against each
    /// RECORD, start-up files no distribution owns; twice, byte-identical) and publish it.
    RuntimeManifest(cmd::campaign::ManifestArgs),
    /// Benchmark any OpenAI-compatible endpoint: synthetic, multi-turn, dataset and trace
    /// workloads; closed/open loop, sweeps, SLA search; JSON, CSV, records; `bench compare`.
    Bench(Box<cmd::bench::BenchArgs>),
    /// A zero-compute OpenAI-compatible server for tests and headroom measurements.
    MockServer(cmd::serve::MockServerArgs),
    /// Numerical oracles: compare logits with a reference, run the contained reference
    /// worker, validate oracle results.
    #[command(subcommand)]
    Oracle(cmd::oracle::OracleCommand),
    /// Legacy backend latency fixtures.
    #[command(subcommand)]
    Latency(cmd::latency::LatencyCommand),
    /// Scaffold serving qualification for a real engine: policy, workload, launch recipe,
    /// seeded corpus (never overwrites; --dry-run shows them).
    Init(cmd::init::InitArgs),
    /// What this host can qualify: backend probes, the case box's kernel mechanisms, the
    /// set-ups found; each missing piece with the command that fixes it.
    Doctor(cmd::doctor::DoctorArgs),
    /// Triage a failed run (a receipt or its run directory): the first failure in the seeds'
    /// order with the evidence file that shows it, then the rest.
    Triage(cmd::triage::TriageArgs),
    /// Print a shell completion script (generated from the command-line definition).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff, generated from the command-line definition).
    Man,
}

fn main() {
    let color = if output::color_allowed() {
        clap::ColorChoice::Auto
    } else {
        clap::ColorChoice::Never
    };
    let matches = Cli::command().color(color).try_get_matches();
    let cli = match matches.and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            // A usage error may quote what was typed: shown escaped, line by line.
            let text = e.render().to_string();
            for line in text.trim_end().split('\n') {
                output::errln!("{}", output::esc(line));
            }
            std::process::exit(exit::USAGE);
        }
        Err(e) => {
            output::out!("{}", e.render());
            std::process::exit(exit::OK);
        }
    };
    let code = match cli.command {
        Command::Workload(c) => cmd::workload::run(c),
        Command::Run(a) => cmd::run::run(a),
        Command::SourceTree(a) => cmd::run::source_tree(a),
        Command::Model(c) => cmd::run::model(c),
        Command::Cargo(a) => cmd::cargo::run(a),
        Command::Receipt(c) => cmd::receipt::run(c),
        Command::Compare(a) => cmd::receipt::compare(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Serve(a) => cmd::serve::serve(*a),
        Command::Bench(a) => cmd::bench::run(*a),
        Command::MockServer(a) => cmd::serve::mock_server(a),
        Command::Campaign(a) => cmd::campaign::run(*a),
        Command::RuntimeManifest(a) => cmd::campaign::runtime_manifest(a),
        Command::Oracle(c) => cmd::oracle::run(c),
        Command::Latency(c) => cmd::latency::run(c),
        Command::Init(a) => cmd::init::run(a),
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Triage(a) => cmd::triage::run(a),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "kiln-qual", &mut buf);
            output::out!("{}", String::from_utf8_lossy(&buf));
            exit::OK
        }
        Command::Man => {
            let mut buf = Vec::new();
            match clap_mangen::Man::new(Cli::command()).render(&mut buf) {
                Ok(()) => {
                    output::out!("{}", String::from_utf8_lossy(&buf));
                    exit::OK
                }
                Err(e) => {
                    output::errln!("kiln-qual: failed to render the man page: {e}");
                    exit::FAILED
                }
            }
        }
    };
    std::process::exit(code);
}
