//! `kiln-qual oracle compare|check|reference`: argument parsing and printing. Every rule lives
//! in `qual-oracle`.
//!
//! Exit codes: `compare` 0 when every bound held, 1 when a bound was exceeded, the tensors could
//! not be compared or read, or the result could not be written; `check` 0 when every file is
//! valid, 1 at the first invalid one (files after it are not read, like the original);
//! `reference` 0 when the worker wrote its logits, 1 otherwise; 2 for usage errors.

use crate::exit;
use crate::output::{errln, esc, esc_path, outln};
use clap::{Args, Subcommand};
use qual_oracle::check::{check_file, CheckOptions};
use qual_oracle::result::{self, CaseOutcome, Status};
use qual_oracle::tensor::read_tensor_file;
use qual_oracle::tolerance::{ToleranceFile, Tolerances, TOLERANCES_SCHEMA};
use std::path::{Path, PathBuf};

use super::args::count;

/// `kiln-qual oracle …`
#[derive(Subcommand, Debug)]
pub enum OracleCommand {
    /// Compare a candidate's logits with a reference's over the whole vocabulary.
    Compare(CompareArgs),
    /// Validate oracle results (ours and Kiln's v2 next-token results; Kiln's v1 refused).
    Check(CheckArgs),
    /// Run the Hugging Face reference worker as a contained process and write its logits.
    Reference(ReferenceArgs),
}

/// Arguments of `oracle compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Reference logits (`.safetensors` with a `logits` tensor, or `.npy`).
    #[arg(value_parser = super::args::Path)]
    pub reference: PathBuf,
    /// Candidate logits (same formats, same shape).
    #[arg(value_parser = super::args::Path)]
    pub candidate: PathBuf,
    /// Tolerance file (`kiln-qual.oracle-tolerances.v1`); without it nothing is bounded.
    #[arg(long, value_parser = super::args::Path, value_name = "TOLERANCES.json")]
    pub tolerances: Option<PathBuf>,
    /// JSON array of the input token ids both tensors must have been produced for.
    #[arg(long, value_parser = super::args::Path, value_name = "IDS.json")]
    pub token_ids: Option<PathBuf>,
    /// k of the top-k overlap (1..=1000000).
    #[arg(long, default_value_t = qual_oracle::compare::DEFAULT_TOP_K, value_parser = count::<usize>(1..=1_000_000))]
    pub top_k: usize,
    /// Write the self-hashed result document here (created exclusively).
    #[arg(long, value_parser = super::args::Path, value_name = "RESULT.json")]
    pub output: Option<PathBuf>,
    /// Print the result document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `oracle check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Result files.
    #[arg(required = true, value_parser = super::args::Path)]
    pub results: Vec<PathBuf>,
    /// Repository root for Kiln's repo-relative request contracts and receipts (rule 2 is
    /// applied where they are present).
    #[arg(long, value_parser = super::args::Path, value_name = "DIR")]
    pub repo_root: Option<PathBuf>,
    /// Re-read our results' input tensor files and require their recorded digests.
    #[arg(long)]
    pub verify_inputs: bool,
}

/// Arguments of `oracle reference`.
#[derive(Args, Debug)]
pub struct ReferenceArgs {
    /// Model: a directory (safetensors + config + tokenizer) or a `.gguf` file.
    #[arg(long, value_parser = super::args::Path, value_name = "PATH")]
    pub model: PathBuf,
    /// JSON array of input token ids.
    #[arg(long, value_parser = super::args::Path, value_name = "IDS.json")]
    pub token_ids: PathBuf,
    /// Output safetensors file (created exclusively).
    #[arg(long, value_parser = super::args::Path, value_name = "LOGITS.safetensors")]
    pub output: PathBuf,
    /// Emit logits from this input position on (default: only the last).
    #[arg(long)]
    pub from_position: Option<usize>,
    /// Python interpreter of the reference environment.
    #[arg(long, value_parser = super::args::Path, default_value = ".cache/venv-reference/bin/python")]
    pub python: PathBuf,
    /// The worker program.
    #[arg(long, value_parser = super::args::Path, default_value = "tools/reference/worker.py")]
    pub worker: PathBuf,
    /// Deadline in seconds (1..=86400).
    #[arg(long, default_value_t = 600, value_parser = count::<u64>(1..=86_400))]
    pub timeout_seconds: u64,
    /// Print the worker evidence as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs an `oracle` subcommand.
pub fn run(c: OracleCommand) -> i32 {
    match c {
        OracleCommand::Compare(a) => compare(a),
        OracleCommand::Check(a) => check(a),
        OracleCommand::Reference(a) => reference(a),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T, String> {
    let (v, _) = qual_json::load_file(path, qual_json::Limits::default())
        .map_err(|e| format!("failed to read the {what}: {e}"))?;
    let s = v
        .to_serde()
        .ok_or_else(|| format!("failed to read the {what}: not representable"))?;
    serde_json::from_value(s).map_err(|e| format!("failed to read the {what} {}: {e}", esc_path(path)))
}

fn load_tolerances(path: Option<&Path>) -> Result<Tolerances, String> {
    let Some(p) = path else {
        return Ok(Tolerances::default());
    };
    let f: ToleranceFile = read_json(p, "tolerances")?;
    if f.schema != TOLERANCES_SCHEMA {
        return Err(format!(
            "failed to read the tolerances: schema must be {}",
            qual_json::show::quote(TOLERANCES_SCHEMA)
        ));
    }
    let problems = f.tolerances.problems();
    if !problems.is_empty() {
        return Err(format!("failed to read the tolerances: {}", problems.join("; ")));
    }
    Ok(f.tolerances)
}

fn compare(a: CompareArgs) -> i32 {
    let inputs = (|| {
        let tol = load_tolerances(a.tolerances.as_deref())?;
        let ids: Option<Vec<i64>> = match &a.token_ids {
            Some(p) => Some(read_json(p, "token ids")?),
            None => None,
        };
        let r = read_tensor_file(&a.reference).map_err(|e| format!("failed to {e}"))?;
        let c = read_tensor_file(&a.candidate).map_err(|e| format!("failed to {e}"))?;
        Ok::<_, String>((tol, ids, r, c))
    })();
    let (tol, ids, r, c) = match inputs {
        Ok(x) => x,
        Err(e) => {
            errln!("kiln-qual oracle compare: {}", esc(&e));
            return exit::FAILED;
        }
    };
    let case = result::compare_files("compare", &r, &c, ids.as_deref(), a.top_k, &tol);
    let tool = concat!("kiln-qual ", env!("CARGO_PKG_VERSION"));
    let (doc, res) = result::build(tool, a.top_k, tol, vec![case]);
    print_case(&res.cases[0]);
    if let Some(out) = &a.output {
        if let Err(e) = result::write_new(out, &doc) {
            errln!("kiln-qual oracle compare: failed to {}", esc(&e.to_string()));
            return exit::FAILED;
        }
        errln!("result: {} {}", esc_path(out), res.result_sha256);
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&doc).expect("serializes"));
    }
    for r in &res.verdict.reasons {
        errln!("  {}", esc(r));
    }
    match res.verdict.status {
        Status::Passed => {
            errln!("verdict: passed");
            exit::OK
        }
        Status::Failed => {
            errln!("verdict: failed");
            exit::FAILED
        }
    }
}

fn print_case(c: &result::CaseRecord) {
    match &c.outcome {
        CaseOutcome::Refused { reason } => errln!("refused: {}", esc(reason)),
        CaseOutcome::Compared { summary: s, checks, .. } => {
            errln!(
                "{} positions x {} vocabulary, top-{}",
                s.positions,
                s.vocab,
                s.top_k
            );
            errln!("  argmax agreement      {}/{}", s.argmax_agreement, s.positions);
            errln!(
                "  min top-{} overlap     {} (position {})",
                s.top_k,
                s.min_top_k_overlap.value,
                s.min_top_k_overlap.position
            );
            errln!(
                "  max abs error         {:.6e} (position {})",
                s.max_abs_error.value,
                s.max_abs_error.position
            );
            errln!(
                "  max mean abs error    {:.6e} (position {})",
                s.max_mean_abs_error.value,
                s.max_mean_abs_error.position
            );
            errln!(
                "  min cosine            {:.12} (position {})",
                s.min_cosine.value,
                s.min_cosine.position
            );
            errln!(
                "  max KL divergence     {:.6e} nats (position {})",
                s.max_kl_divergence.value,
                s.max_kl_divergence.position
            );
            errln!(
                "  max rank of reference argmax  {} (position {})",
                s.max_reference_argmax_rank.value,
                s.max_reference_argmax_rank.position
            );
            for k in checks {
                errln!(
                    "  check {:<28} bound {} observed {} {:?}",
                    k.tolerance,
                    k.bound,
                    k.observed,
                    k.outcome
                );
            }
        }
    }
}

fn check(a: CheckArgs) -> i32 {
    let opts = CheckOptions {
        repo_root: a.repo_root.clone(),
        verify_inputs: a.verify_inputs,
    };
    for p in &a.results {
        match check_file(p, &opts) {
            Ok(v) => outln!("OK {} {} {}", esc_path(p), v.schema, v.result_sha256),
            Err(errs) => {
                errln!("FAILED {}", esc_path(p));
                for e in errs {
                    errln!("  {}", esc(&e));
                }
                return exit::FAILED;
            }
        }
    }
    exit::OK
}

fn reference(a: ReferenceArgs) -> i32 {
    let spec = qual_oracle::worker::WorkerRequest {
        python: a.python,
        worker: a.worker,
        model: a.model,
        token_ids: a.token_ids,
        output: a.output,
        from_position: a.from_position,
        timeout: std::time::Duration::from_secs(a.timeout_seconds),
    };
    match qual_oracle::worker::run(&spec) {
        Ok(ev) => {
            errln!(
                "reference: {} ({} positions x {} vocabulary) in {:.1} s, worker peak RSS {} bytes",
                esc_path(&spec.output),
                ev.positions,
                ev.vocab,
                ev.elapsed_seconds,
                ev.worker.max_rss_bytes
            );
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&ev).expect("serializes"));
            }
            exit::OK
        }
        Err(e) => {
            errln!("kiln-qual oracle reference: failed to {}", esc(&e.to_string()));
            exit::FAILED
        }
    }
}
