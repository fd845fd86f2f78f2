//! `kiln-qual`: the command-line front end. It only parses arguments, calls the library
//! crates and prints; every rule lives in a library crate.
//!
//! Exit codes (documented in the README): 0 success / valid / passed, 1 invalid input or a
//! failed verdict, 2 usage error; subcommands that refuse or get interrupted document their
//! own codes (see `exit`). A closed stdout ends any command quietly with 141 (see `output`),
//! except that `run` keeps its verdict's code once the receipt is written. SIGINT/SIGTERM
//! during a command that handles them ends it with 130 once what it had finished is written
//! (see `exit::after_command`).
//!
//! Global options (before or after the subcommand): `-q`/`--quiet`, `-v`/`--verbose`,
//! `--color auto|always|never` (see `output`).

#![forbid(unsafe_code)]

mod cmd;
mod exit;
mod output;
mod progress;

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
    /// Print less: no progress bars, no long summaries (verdicts, errors and written paths
    /// are still printed).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print more detail where a command has more to say (every metric row of `serve`, the
    /// whole details of a case that did not pass in `run`).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// When to style help and usage errors: on a terminal without NO_COLOR (auto), always,
    /// or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = output::ColorWhen::Auto)]
    color: output::ColorWhen,
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
    /// Qualification on a fleet: a strict plan, dispatch through Slurm job arrays or a
    /// generated GitHub Actions workflow, collection and verification of each host's signed
    /// evidence, the fleet report.
    #[command(subcommand)]
    Fleet(cmd::fleet::FleetCommand),
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
    /// Print the man page, or write one per subcommand with --out-dir (roff, generated from
    /// the command-line definition).
    Man(cmd::shell::ManArgs),
}

/// Help and usage-error colours (cargo's palette): green headings, cyan flags and values,
/// red errors.
fn styles() -> clap::builder::styling::Styles {
    use clap::builder::styling::{AnsiColor, Effects, Styles};
    Styles::styled()
        .header(AnsiColor::Green.on_default().effects(Effects::BOLD))
        .usage(AnsiColor::Green.on_default().effects(Effects::BOLD))
        .literal(AnsiColor::Cyan.on_default().effects(Effects::BOLD))
        .placeholder(AnsiColor::Cyan.on_default())
        .error(AnsiColor::Red.on_default().effects(Effects::BOLD))
        .valid(AnsiColor::Green.on_default())
        .invalid(AnsiColor::Yellow.on_default())
}

/// Parses the command line with styled (`styled`) or plain help and errors.
fn parse(args: &[std::ffi::OsString], styled: bool) -> Result<Cli, clap::Error> {
    let styles = if styled {
        styles()
    } else {
        clap::builder::styling::Styles::plain()
    };
    Cli::command()
        .styles(styles)
        .try_get_matches_from(args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m))
}

/// Parses the command line or exits: help and version on stdout (0), usage errors on
/// stderr (2). Styling follows `--color`/`NO_COLOR`/the terminal per stream; a usage error
/// is styled only when nothing typed holds a character that needs escaping (a styled error
/// is written raw), otherwise it is rendered plain and shown escaped, line by line.
fn parse_or_exit(args: &[std::ffi::OsString]) -> Cli {
    let when = output::color_from_args(args);
    let (style_out, style_err) = (
        output::color_for(when, true),
        output::color_for(when, false),
    );
    let e = match parse(args, style_out || style_err) {
        Ok(cli) => return cli,
        Err(e) => e,
    };
    let plain = |e: clap::Error| parse(args, false).err().unwrap_or(e);
    if e.use_stderr() {
        let typed_controls = args.iter().any(|a| {
            a.to_string_lossy()
                .chars()
                .any(|c| c.is_control() || qual_json::escape::needs_escape(c))
        });
        if style_err && !typed_controls {
            output::err!("{}", e.render().ansi());
        } else {
            let text = plain(e).render().ansi().to_string();
            for line in text.trim_end().split('\n') {
                output::errln!("{}", output::esc(line));
            }
        }
        std::process::exit(exit::USAGE);
    }
    let e = if style_out { e } else { plain(e) };
    output::out!("{}", e.render().ansi());
    std::process::exit(exit::OK);
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = parse_or_exit(&args);
    output::set_verbosity(cli.quiet, cli.verbose);
    let is_cargo = matches!(cli.command, Command::Cargo(_));
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
        Command::Fleet(c) => cmd::fleet::run(c),
        Command::Init(a) => cmd::init::run(a),
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Triage(a) => cmd::triage::run(a),
        Command::Completions { shell } => cmd::shell::completions(shell, &mut Cli::command()),
        Command::Man(a) => cmd::shell::man(&a, Cli::command()),
    };
    // `cargo` keeps cargo's own code (128 + the signal when it was interrupted).
    let code = if is_cargo {
        code
    } else {
        exit::after_command(code)
    };
    std::process::exit(code);
}
