//! `kiln-qual run`, `source-tree`, `model fingerprint`: argument types and printing only; the
//! logic lives in `qual-runner` and `qual-probe`.
//!
//! `run` exit codes: 0 passed, 1 failed (receipt written), 2 usage, 3 refused by preflight
//! (nothing created), 4 aborted after the run started (run data removed, no receipt), 130
//! interrupted by SIGINT/SIGTERM (owned processes and run data cleaned).

use crate::output::{errln, esc, outln};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use qual_json::{Object, Value};
use qual_receipt::model::{ResultStatus, Verdict};
use qual_runner::{RunError, RunRequest};

/// Arguments of `kiln-qual run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Committed workload under qualification/workloads/ (a relative path is taken from the
    /// current directory, like every other path here).
    #[arg(value_parser = super::args::Path)]
    pub workload: PathBuf,
    /// Variant id to run.
    #[arg(long)]
    pub variant: String,
    /// Stable, non-secret host id (^[a-z0-9][a-z0-9._-]{1,63}$).
    #[arg(long = "host-id")]
    pub host_id: String,
    /// Receipt path below qualification/receipts/ or .qualification/receipts/ (default: the
    /// ignored .qualification/receipts/<backend>/<host-id>/<receipt-id>.json).
    #[arg(value_parser = super::args::Path, long)]
    pub output: Option<PathBuf>,
    /// Workload variable assignment NAME=VALUE (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// Local model directory to fingerprint and pass as ${model_path}.
    #[arg(value_parser = super::args::Path, long)]
    pub model: Option<PathBuf>,
    /// Model id recorded in the receipt (default: the directory name).
    #[arg(long = "model-id")]
    pub model_id: Option<String>,
    /// Explicit receipt id.
    #[arg(long = "receipt-id")]
    pub receipt_id: Option<String>,
    /// Seconds between SIGTERM and SIGKILL when a case is terminated (0..=75).
    #[arg(
        long = "term-grace-seconds",
        default_value_t = qual_runner::DEFAULT_TERM_GRACE_SECONDS,
        value_parser = super::args::seconds_in(0.0..=75.0)
    )]
    pub term_grace_seconds: f64,
    /// Sign the receipt when it is written: an OpenSSH Ed25519 private key (see
    /// `kiln-qual receipt sign`); the key is loaded before anything runs.
    #[arg(long = "sign-key", value_parser = super::args::Path, value_name = "KEY")]
    pub sign_key: Option<PathBuf>,
}

/// Arguments of `kiln-qual source-tree`.
#[derive(Args, Debug)]
pub struct SourceTreeArgs {
    /// Repository root (default: the git worktree containing the current directory).
    #[arg(value_parser = super::args::Path, long)]
    pub root: Option<PathBuf>,
    /// Print {format, profile, sha256, file_count, files} as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `kiln-qual model ...`
#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Fingerprint a local model directory (weights, config, tokenizer, chat template).
    Fingerprint(FingerprintArgs),
}

/// Arguments of `kiln-qual model fingerprint`.
#[derive(Args, Debug)]
pub struct FingerprintArgs {
    /// Model directory.
    #[arg(value_parser = super::args::Path, long = "model-path")]
    pub model_path: PathBuf,
    /// Model id (default: the directory name).
    #[arg(long = "model-id")]
    pub model_id: Option<String>,
    /// Print the fingerprint object as JSON.
    #[arg(long)]
    pub json: bool,
}

fn fmt_seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

/// Runs `kiln-qual run`.
pub fn run(a: RunArgs) -> i32 {
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            errln!("kiln-qual: failed to read the current directory: {e}");
            return qual_runner::EXIT_REFUSED;
        }
    };
    let signing_key = match &a.sign_key {
        None => None,
        Some(k) => match qual_attest::SigningKey::from_openssh_file(k) {
            Ok(k) => Some(k),
            Err(e) => {
                errln!(
                    "kiln-qual: qualification run refused: failed to {}",
                    esc(&e.to_string())
                );
                return qual_runner::EXIT_REFUSED;
            }
        },
    };
    let mut command = vec!["kiln-qual".to_string()];
    command.extend(std::env::args().skip(1));
    let req = RunRequest {
        cwd,
        workload: a.workload,
        variant: a.variant,
        host_id: a.host_id,
        output: a.output,
        vars: a.vars,
        model: a.model,
        model_id: a.model_id,
        receipt_id: a.receipt_id,
        term_grace_seconds: a.term_grace_seconds,
        command,
    };
    let bar = crate::progress::Bar::steps("case executions");
    let result = qual_runner::run_observed(&req, &bar);
    bar.finish();
    let code = qual_runner::exit_code(&result);
    match &result {
        Ok(o) => {
            print_summary(o);
            if let Some(key) = &signing_key {
                if !sign_receipt(o, key) {
                    let _ = crate::output::try_outln(&esc(&o.receipt_rel));
                    return crate::exit::FAILED;
                }
            }
            // The receipt is written: a closed stdout must not change the verdict's exit code.
            let _ = crate::output::try_outln(&esc(&o.receipt_rel));
        }
        Err(e) => print_error(e),
    }
    code
}

/// The run's console summary on stderr: one line per case result (with the start of the
/// details of one that did not pass), the verdict and the receipt path.
fn print_summary(o: &qual_runner::RunOutcome) {
    let r = &o.receipt;
    // `-q`: only the verdict and the receipt path.
    let cases = if crate::output::quiet() {
        &[][..]
    } else {
        &r.results[..]
    };
    if !cases.is_empty() {
        errln!("case results:");
    }
    for res in cases {
        let status = match res.status {
            ResultStatus::Passed => "passed",
            ResultStatus::Failed => "FAILED",
            ResultStatus::Skipped => "skipped",
        };
        let req = if res.required { "required" } else { "optional" };
        errln!(
            "  {:<8} {:<40} {:<9} {}",
            status,
            esc(&res.id),
            req,
            fmt_seconds(res.duration_seconds)
        );
        if res.status != ResultStatus::Passed {
            if let Some(d) = &res.details {
                // `-v`: the whole details (already bounded by the receipt's limit).
                let take = if crate::output::verbose() {
                    usize::MAX
                } else {
                    300
                };
                let short: String = d.chars().take(take).collect();
                errln!("           {}", esc(&short));
            }
        }
    }
    let passed = r
        .results
        .iter()
        .filter(|x| x.status == ResultStatus::Passed)
        .count();
    errln!(
        "verdict: {} ({} of {} cases passed, {} total, backend {}, source {})",
        match r.qualification.verdict {
            Verdict::Passed => "passed",
            Verdict::Failed => "FAILED",
        },
        passed,
        r.results.len(),
        fmt_seconds(r.qualification.duration_seconds),
        esc(&r.qualification.backend.to_string()),
        esc(&r.source.tree_hash),
    );
    errln!("receipt: {}", esc(&o.receipt_rel));
}

/// Signs the written receipt and says so on stderr; `false` (after saying why) when it could
/// not be signed.
fn sign_receipt(o: &qual_runner::RunOutcome, key: &qual_attest::SigningKey) -> bool {
    match qual_attest::sign(&o.receipt_path, key) {
        Ok(_) => {
            errln!(
                "attestation: {}{} (key {})",
                esc(&o.receipt_rel),
                qual_attest::ENVELOPE_SUFFIX,
                key.keyid()
            );
            true
        }
        Err(e) => {
            errln!(
                "kiln-qual: the receipt was written but not signed: failed to {}",
                esc(&e.to_string())
            );
            false
        }
    }
}

/// Why no receipt was written, on stderr.
fn print_error(e: &RunError) {
    match e {
        RunError::Refused(e) => errln!(
            "kiln-qual: qualification run refused: {}",
            esc(&e.to_string())
        ),
        RunError::Aborted(e) => errln!(
            "kiln-qual: qualification run failed: {}; run data were removed",
            esc(&e.to_string())
        ),
        RunError::Interrupted { .. } => errln!(
            "kiln-qual: qualification run interrupted; owned processes and run data were cleaned"
        ),
    }
}

/// Runs `kiln-qual source-tree`.
pub fn source_tree(a: SourceTreeArgs) -> i32 {
    let start = match &a.root {
        Some(r) => r.clone(),
        None => match std::env::current_dir() {
            Ok(d) => d,
            Err(e) => {
                errln!("kiln-qual: failed to read the current directory: {e}");
                return 1;
            }
        },
    };
    let root = match qual_probe::git::Repo::discover(&start) {
        Ok(r) => r.root().to_path_buf(),
        Err(e) => {
            errln!("source-tree hash failed: {}", esc(&e.to_string()));
            return 1;
        }
    };
    let policy = match qual_probe::load_policy(&root) {
        Ok(p) => p,
        Err(e) => {
            errln!("source-tree hash failed: {}", esc(&e.to_string()));
            return 1;
        }
    };
    let t = match qual_probe::source_tree::compute(&root, policy.source_tree_profile) {
        Ok(t) => t,
        Err(e) => {
            errln!("source-tree hash failed: {}", esc(&e.to_string()));
            return 1;
        }
    };
    if a.json {
        let mut o = Object::new();
        o.insert("format", Value::from(t.format));
        o.insert("profile", Value::from(t.profile.as_str()));
        o.insert("sha256", Value::from(t.digest.as_str()));
        o.insert("file_count", Value::from(t.files.len() as u64));
        o.insert(
            "files",
            Value::Array(
                t.files
                    .iter()
                    .map(|f| {
                        let mut x = Object::new();
                        x.insert("mode", Value::from(f.mode.as_str()));
                        x.insert("path", Value::from(f.path.as_str()));
                        x.insert("bytes", Value::from(f.bytes));
                        x.insert("sha256", Value::from(f.sha256.as_str()));
                        Value::Object(x)
                    })
                    .collect(),
            ),
        );
        crate::output::print_json_text(&qual_json::to_pretty_json(&Value::Object(o)));
    } else {
        outln!("{}", t.digest);
        errln!(
            "{} files, profile {}, format {}",
            t.files.len(),
            t.profile.as_str(),
            t.format
        );
    }
    0
}

/// Runs `kiln-qual model ...`.
pub fn model(c: ModelCommand) -> i32 {
    match c {
        ModelCommand::Fingerprint(a) => {
            match qual_probe::model::fingerprint(&a.model_path, a.model_id.as_deref()) {
                Ok(f) => {
                    if a.json {
                        crate::output::print_json_text(&qual_json::to_pretty_json(&f.to_value()));
                    } else {
                        outln!("id: {}", esc(&f.id));
                        outln!("path: {}", esc(&f.path));
                        for w in &f.weight_files {
                            outln!("weight: {} {} ({} bytes)", esc(&w.path), w.sha256, w.bytes);
                        }
                        outln!("config: {}", f.config_hash);
                        outln!("tokenizer: {}", f.tokenizer_hash);
                        outln!(
                            "chat template: {}",
                            f.chat_template_hash.as_deref().unwrap_or("none")
                        );
                    }
                    0
                }
                Err(e) => {
                    errln!("model fingerprint failed: {}", esc(&e.to_string()));
                    1
                }
            }
        }
    }
}
