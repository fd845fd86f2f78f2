//! `kiln-qual oracle compare|check|reference`: argument parsing and printing. Every rule lives
//! in `qual-oracle`.
//!
//! Exit codes: `compare` 0 when every bound held, 1 when a bound was exceeded, the tensors could
//! not be compared or read, or the result could not be written; `check` 0 when every file is
//! valid, 1 at the first invalid one (files after it are not read, like the original);
//! `reference` 0 when the worker wrote its logits, 1 otherwise; `greedy` 0 when every prompt
//! compared within its bounds and engine and worker ran cleanly, 1 otherwise (the case result
//! says why); `attribute` 0 when the attribution was written (whatever it attributes), 1 when a
//! source result is invalid or the output could not be written; 2 for usage errors.
//!
//! `--json` prints serde's pretty format of the typed documents (field order, raw UTF-8), not
//! `qual_json::to_pretty_json`: those bytes are this command's output format.

use crate::exit;
use crate::output::{errln, esc, esc_path, outln};
use clap::{Args, Subcommand};
use qual_oracle::check::CheckOptions;
use qual_oracle::result::{self, CaseOutcome, Status};
use qual_oracle::tensor::read_tensor_file;
use qual_oracle::tolerance::{ToleranceFile, Tolerances};
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
    /// Greedy continuations of a real engine checked against the reference: full-vocabulary
    /// comparison at every step and the first divergence per prompt (writes a case result).
    Greedy(Box<GreedyArgs>),
    /// Two candidates' greedy results (from `oracle greedy`, same prompts): per prompt, the
    /// §9.5 verdict at the first step where they diverge (`candidate_a | candidate_b |
    /// neither`), as a self-hashed document.
    Attribute(AttributeArgs),
}

/// Arguments of `oracle attribute`.
#[derive(Args, Debug)]
pub struct AttributeArgs {
    /// Candidate A's oracle result (`<stem>.oracle-result.json` written by `oracle greedy`).
    #[arg(value_parser = super::args::Path, value_name = "A.oracle-result.json")]
    pub candidate_a: PathBuf,
    /// Candidate B's oracle result.
    #[arg(value_parser = super::args::Path, value_name = "B.oracle-result.json")]
    pub candidate_b: PathBuf,
    /// Write the attribution document here (created exclusively).
    #[arg(long, value_parser = super::args::Path, value_name = "ATTRIBUTION.json")]
    pub output: PathBuf,
    /// Print the document on stdout.
    #[arg(long)]
    pub json: bool,
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
    /// Re-read our results' input tensor files, require their recorded digests, and
    /// recompute each file-to-file comparison from them (the recorded metrics must match).
    #[arg(long)]
    pub verify_inputs: bool,
    /// Also require each result's attestation (`<result>.intoto.jsonl`, made by `receipt
    /// sign`) signed by a key of FILE, covering the result and its input digests.
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    pub trusted_keys: Option<PathBuf>,
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
    #[arg(long, value_parser = super::args::Program, default_value = ".cache/venv-reference/bin/python")]
    pub python: PathBuf,
    /// The worker program.
    #[arg(long, value_parser = super::args::Path, default_value = "tools/reference/worker.py")]
    pub worker: PathBuf,
    /// Deadline in seconds (1..=86400).
    #[arg(long, default_value_t = 600, value_parser = count::<u64>(1..=86_400))]
    pub timeout_seconds: u64,
    /// Where the worker computes: the CPU (one thread), or the first CUDA device torch sees
    /// (TF32 off, deterministic cuBLAS; the worker's report names the device, and a report
    /// for another device is refused).
    #[arg(long, value_enum, default_value_t = WorkerDeviceArg::Cpu)]
    pub device: WorkerDeviceArg,
    /// Print the worker evidence as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The reference worker's device (`oracle reference --device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkerDeviceArg {
    /// The CPU.
    Cpu,
    /// The first CUDA device.
    Cuda,
}

/// Runs an `oracle` subcommand.
pub fn run(c: OracleCommand) -> i32 {
    match c {
        OracleCommand::Compare(a) => compare(a),
        OracleCommand::Check(a) => check(a),
        OracleCommand::Reference(a) => reference(a),
        OracleCommand::Greedy(a) => greedy(*a),
        OracleCommand::Attribute(a) => attribute(a),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T, String> {
    let (v, _) = qual_json::load_file(path, qual_json::Limits::default())
        .map_err(|e| format!("failed to read the {what}: {e}"))?;
    let s = v
        .to_serde()
        .ok_or_else(|| format!("failed to read the {what}: not representable"))?;
    serde_json::from_value(s)
        .map_err(|e| format!("failed to read the {what} {}: {e}", esc_path(path)))
}

fn load_tolerances(path: Option<&Path>) -> Result<Tolerances, String> {
    let Some(p) = path else {
        return Ok(Tolerances::default());
    };
    let f: ToleranceFile = read_json(p, "tolerances")?;
    f.into_tolerances()
        .map_err(|e| format!("failed to read the tolerances: {e}"))
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
            errln!(
                "kiln-qual oracle compare: failed to {}",
                esc(&e.to_string())
            );
            return exit::FAILED;
        }
        errln!("result: {} {}", esc_path(out), res.result_sha256);
    }
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("serializes")
        );
    }
    for r in &res.verdict.reasons {
        errln!("  {}", esc(r));
    }
    match res.verdict.status {
        Status::Passed => {
            errln!("verdict: passed");
            exit::OK
        }
        // Nothing was established, so the exit status is not a pass.
        Status::Compared => {
            errln!("verdict: compared (no tolerance declared: nothing was checked)");
            exit::FAILED
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
        CaseOutcome::Compared {
            summary: s, checks, ..
        } => {
            errln!(
                "{} positions x {} vocabulary, top-{}",
                s.positions,
                s.vocab,
                s.top_k
            );
            errln!(
                "  argmax agreement      {}/{}",
                s.argmax_agreement,
                s.positions
            );
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
            print_checks(checks);
        }
        CaseOutcome::ComparedTopK {
            summary: s,
            checks,
            unchecked_tolerances,
            ..
        } => {
            errln!(
                "{} positions x {} vocabulary, candidate top-{} view (overlap k = {})",
                s.positions,
                s.vocab,
                s.listed,
                s.overlap_k
            );
            errln!(
                "  argmax agreement      {}/{}",
                s.argmax_agreement,
                s.positions
            );
            errln!(
                "  reference argmax listed by the candidate  {}/{}",
                s.reference_argmax_listed,
                s.positions
            );
            if let Some(w) = s.max_reference_argmax_rank_listed {
                errln!(
                    "  max rank of reference argmax (where listed)  {} (position {})",
                    w.value,
                    w.position
                );
            }
            errln!(
                "  min top-{} overlap     {} (position {})",
                s.overlap_k,
                s.min_top_k_overlap.value,
                s.min_top_k_overlap.position
            );
            errln!(
                "  max |d log-prob| over listed tokens  {:.6e} (position {}; a lower bound on the full max abs error)",
                s.max_abs_logprob_error_listed.value,
                s.max_abs_logprob_error_listed.position
            );
            errln!(
                "  max candidate mass outside its list  {:.6e} (position {})",
                s.max_candidate_mass_outside_list.value,
                s.max_candidate_mass_outside_list.position
            );
            errln!(
                "  max total-variation lower bound      {:.6e} (position {})",
                s.max_total_variation_lower_bound.value,
                s.max_total_variation_lower_bound.position
            );
            errln!(
                "  max KL lower bound (Pinsker)         {:.6e} nats (position {})",
                s.max_kl_divergence_lower_bound.value,
                s.max_kl_divergence_lower_bound.position
            );
            errln!(
                "  not established by a top-k view: {}",
                s.not_established.join(", ")
            );
            print_checks(checks);
            for t in unchecked_tolerances {
                errln!("  check {t:<28} not established (a top-k view cannot check it)");
            }
        }
    }
}

fn print_checks(checks: &[qual_oracle::tolerance::Check]) {
    for k in checks {
        errln!(
            "  check {:<28} bound {} observed {} {}",
            k.tolerance,
            k.bound,
            k.observed,
            match k.outcome {
                qual_oracle::tolerance::CheckOutcome::Within => "within",
                qual_oracle::tolerance::CheckOutcome::Exceeded => "exceeded",
                qual_oracle::tolerance::CheckOutcome::NotEstablished => "not established",
            }
        );
    }
}

fn check(a: CheckArgs) -> i32 {
    let opts = CheckOptions {
        repo_root: a.repo_root.clone(),
        verify_inputs: a.verify_inputs,
    };
    let trusted = match super::trusted_keys(a.trusted_keys.as_deref()) {
        Ok(t) => t,
        Err(code) => return code,
    };
    for p in &a.results {
        let checked = check_document(p, &opts).and_then(|v| match &trusted {
            None => Ok((v, None)),
            Some(keys) => qual_oracle::attest::verify(p, keys)
                .map(|by| (v, Some(by)))
                .map_err(|e| {
                    vec![format!(
                        "{}: failed to {e}",
                        qual_attest::envelope_path(p).display()
                    )]
                }),
        });
        match checked {
            Ok((v, by)) => {
                outln!("OK {} {} {}", esc_path(p), v.schema, v.result_sha256);
                if let Some(by) = by {
                    outln!(
                        "  attestation {} signed by {}",
                        esc_path(&qual_attest::envelope_path(p)),
                        esc(&by.keyid)
                    );
                }
            }
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

/// Reads one result once through the document table and checks it (`qual-oracle` dispatches
/// on its schema).
fn check_document(p: &Path, opts: &CheckOptions) -> Result<qual_oracle::check::Valid, Vec<String>> {
    let src = qual_documents::read_limited(p, qual_oracle::check::MAX_RESULT_BYTES)
        .map_err(|e| vec![e.to_string()])?;
    let value = src.value().map_err(|e| vec![e.to_string()])?;
    qual_oracle::check::check_value(value, opts)
}

fn reference(a: ReferenceArgs) -> i32 {
    let ids: Vec<i64> = match read_json(&a.token_ids, "token ids") {
        Ok(ids) => ids,
        Err(e) => {
            errln!("kiln-qual oracle reference: {}", esc(&e));
            return exit::FAILED;
        }
    };
    let spec = qual_oracle::worker::WorkerRequest {
        python: a.python,
        worker: a.worker,
        model: a.model,
        sequences: vec![qual_oracle::worker::Sequence {
            token_ids: ids,
            from_position: a.from_position,
            output: a.output.clone(),
        }],
        timeout: std::time::Duration::from_secs(a.timeout_seconds),
        device: match a.device {
            WorkerDeviceArg::Cpu => qual_oracle::worker::Device::Cpu,
            WorkerDeviceArg::Cuda => qual_oracle::worker::Device::Cuda,
        },
    };
    match qual_oracle::worker::run(&spec) {
        Ok(ev) => {
            let on = ev.worker.device.as_ref().map_or_else(
                || "cpu".to_string(),
                |d| match &d.name {
                    Some(n) => format!("{} {}", d.kind, esc(n)),
                    None => d.kind.clone(),
                },
            );
            errln!(
                "reference: {} ({} positions x {} vocabulary) on {on} in {:.1} s, worker peak RSS {} bytes",
                esc_path(&a.output),
                ev.worker.outputs[0].positions,
                ev.worker.vocab,
                ev.elapsed_seconds,
                ev.worker.max_rss_bytes
            );
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&ev).expect("serializes"));
            }
            exit::OK
        }
        Err(e) => {
            errln!(
                "kiln-qual oracle reference: failed to {}",
                esc(&e.to_string())
            );
            exit::FAILED
        }
    }
}

/// Arguments of `oracle greedy`.
#[derive(Args, Debug)]
pub struct GreedyArgs {
    /// The engine's launch recipe (`kiln-qual.serve-launch.v1`).
    #[arg(long, value_parser = super::args::Path, value_name = "RECIPE.json")]
    pub launch: PathBuf,
    /// Directory substituted for `${model_path}` in the recipe.
    #[arg(long, value_parser = super::args::Path, value_name = "DIR")]
    pub model_path: Option<PathBuf>,
    /// Prompt file (`kiln-qual.oracle-prompts.v1`, prompts as token ids).
    #[arg(long, value_parser = super::args::Path, value_name = "PROMPTS.json")]
    pub prompts: PathBuf,
    /// Greedy steps per prompt (1..=256).
    #[arg(long, default_value_t = 16, value_parser = count::<usize>(1..=256))]
    pub steps: usize,
    /// Vocabulary size (the engine is asked for the whole distribution; 1..=1000000).
    #[arg(long, value_parser = count::<usize>(1..=1_000_000))]
    pub vocab: usize,
    /// Ask the engine for only its top N log-probabilities per step (`n_probs` = N below the
    /// vocabulary): the comparison then reports only what a top-k view establishes (argmax,
    /// rank, overlap, lower bounds) and marks full KL, cosine, max and mean error as not
    /// established.
    #[arg(long, value_parser = count::<usize>(1..=1_000_000), value_name = "N")]
    pub n_probs: Option<usize>,
    /// The reference model: a `.gguf` file (the same weights the engine serves) or a
    /// safetensors directory; a relative path is taken inside `--model-path` when that is
    /// given (a workload passes `${model_path}` there and the file name here).
    #[arg(long, value_parser = super::args::Path, value_name = "PATH")]
    pub reference_model: PathBuf,
    /// Python interpreter of the reference environment.
    #[arg(long, value_parser = super::args::Program, default_value = ".cache/venv-reference/bin/python")]
    pub python: PathBuf,
    /// The worker program.
    #[arg(long, value_parser = super::args::Path, default_value = "tools/reference/worker.py")]
    pub worker: PathBuf,
    /// Reference worker deadline in seconds (1..=86400).
    #[arg(long, default_value_t = 900, value_parser = count::<u64>(1..=86_400))]
    pub worker_timeout_seconds: u64,
    /// Per-request deadline in seconds (1..=86400).
    #[arg(long, default_value_t = 300, value_parser = count::<u64>(1..=86_400))]
    pub request_timeout_seconds: u64,
    /// Tolerance file (`kiln-qual.oracle-tolerances.v1`).
    #[arg(long, value_parser = super::args::Path, value_name = "TOLERANCES.json")]
    pub tolerances: Option<PathBuf>,
    /// Engine seed (recorded; greedy decoding does not sample).
    #[arg(long, default_value_t = 17)]
    pub seed: u64,
    /// Case id of the case result.
    #[arg(long, default_value = "oracle-greedy")]
    pub case_id: String,
    /// Case-result path (default: `$KILN_QUALIFICATION_CASE_RESULT`); the oracle result is
    /// written next to it as `<stem>.oracle-result.json`, the reference tensors as
    /// `<stem>.reference-<prompt>.safetensors`.
    #[arg(long, value_parser = super::args::Path, value_name = "PATH")]
    pub result: Option<PathBuf>,
    /// Config object echoed as the case result's `effective_config`.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub effective_config: String,
}

fn greedy_inputs(
    a: &GreedyArgs,
) -> Result<
    (
        qual_oracle::greedy::GreedyOptions,
        PathBuf,
        serde_json::Value,
    ),
    String,
> {
    let result = a
        .result
        .clone()
        .or_else(|| std::env::var_os("KILN_QUALIFICATION_CASE_RESULT").map(PathBuf::from))
        .ok_or("no case-result path: pass --result or set KILN_QUALIFICATION_CASE_RESULT")?;
    let config = qual_json::from_str(&a.effective_config)
        .ok()
        .and_then(|v| v.to_serde())
        .filter(serde_json::Value::is_object)
        .ok_or("--effective-config must be a JSON object")?;
    let tolerances = load_tolerances(a.tolerances.as_deref())?;
    let prompts: qual_oracle::greedy::PromptFile = read_json(&a.prompts, "prompts")?;
    let problems = prompts.problems();
    if !problems.is_empty() {
        return Err(format!(
            "failed to read the prompts: {}",
            problems.join("; ")
        ));
    }
    let recipe = qual_serve::recipe::load(&a.launch)
        .map_err(|e| format!("failed to read the launch recipe: {e}"))?;
    let model = a
        .model_path
        .as_ref()
        .map(|p| std::path::absolute(p).unwrap_or(p.clone()));
    let recipe = recipe
        .with_model_path(model.as_deref())
        .map_err(|e| format!("failed to apply the model path: {e}"))?;
    let stem = result
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "case-result".into());
    let output = result.with_file_name(format!("{stem}.oracle-result.json"));
    let opts = qual_oracle::greedy::GreedyOptions {
        protect: qual_serve::case::protected_paths(&result),
        recipe,
        prompts: prompts.prompts,
        steps: a.steps,
        vocab: a.vocab,
        n_probs: match a.n_probs {
            Some(n) if n > a.vocab => {
                return Err(format!("--n-probs {n} is larger than --vocab {}", a.vocab))
            }
            Some(n) => n,
            None => a.vocab,
        },
        seed: a.seed,
        request_timeout: std::time::Duration::from_secs(a.request_timeout_seconds),
        reference: qual_oracle::worker::WorkerRequest {
            python: a.python.clone(),
            worker: a.worker.clone(),
            model: match (&model, a.reference_model.is_relative()) {
                (Some(dir), true) => dir.join(&a.reference_model),
                _ => a.reference_model.clone(),
            },
            sequences: Vec::new(),
            timeout: std::time::Duration::from_secs(a.worker_timeout_seconds),
            device: qual_oracle::worker::Device::Cpu,
        },
        reference_prefix: result.with_file_name(format!("{stem}.reference-")),
        top_k: qual_oracle::compare::DEFAULT_TOP_K,
        tolerances,
    };
    let extra = serde_json::json!({"config": config, "result": result.display().to_string()});
    Ok((opts, output, extra))
}

/// `oracle greedy`: runs the engine and the reference, writes the oracle result and the case
/// result.
pub fn greedy(a: GreedyArgs) -> i32 {
    let (opts, output, extra) = match greedy_inputs(&a) {
        Ok(x) => x,
        Err(e) => {
            errln!("kiln-qual oracle greedy: {}", esc(&e));
            return exit::FAILED;
        }
    };
    let tool = concat!("kiln-qual ", env!("CARGO_PKG_VERSION"));
    let out = qual_oracle::greedy::run(&opts, tool);
    for c in &out.result.cases {
        errln!("prompt {}:", esc(&c.id));
        print_case(c);
    }
    let line = qual_oracle::greedy::divergence_line(&out.result);
    errln!("{}", esc(&line));
    for f in &out.failures {
        errln!("  failure: {}", esc(f));
    }
    for r in &out.result.verdict.reasons {
        errln!("  {}", esc(r));
    }
    let written = result::write_new(&output, &out.doc);
    let mut reasons: Vec<String> = out.failures.clone();
    reasons.extend(out.result.verdict.reasons.iter().cloned());
    if let Err(e) = &written {
        reasons.push(format!("failed to {e}"));
    }
    let passed = qual_oracle::greedy::passed(&out) && written.is_ok();
    let case_result = qual_oracle::greedy::case_result(
        &a.case_id,
        passed,
        out.duration.as_secs_f64(),
        extra["config"].clone(),
        &out.result,
        &reasons,
        &line,
    );
    let path = PathBuf::from(extra["result"].as_str().unwrap_or_default());
    if let Err(e) = result::write_new(&path, &case_result) {
        errln!("kiln-qual oracle greedy: failed to {}", esc(&e.to_string()));
        return exit::FAILED;
    }
    errln!(
        "oracle result: {} {}",
        esc_path(&output),
        out.result.result_sha256
    );
    if passed {
        errln!("verdict: passed");
        exit::OK
    } else {
        errln!("verdict: failed");
        exit::FAILED
    }
}

/// `oracle attribute`: the §9.5 verdict per prompt of two greedy results.
fn attribute(a: AttributeArgs) -> i32 {
    use qual_oracle::attribution::PromptOutcome;
    let tool = concat!("kiln-qual ", env!("CARGO_PKG_VERSION"));
    let (doc, res) = match qual_oracle::attribution::build(tool, &a.candidate_a, &a.candidate_b) {
        Ok(x) => x,
        Err(e) => {
            errln!(
                "kiln-qual oracle attribute: failed to {}",
                esc(&e.to_string())
            );
            return exit::FAILED;
        }
    };
    errln!("candidate A: {}", esc(&res.candidate_a.candidate));
    errln!("candidate B: {}", esc(&res.candidate_b.candidate));
    let text = |t: &qual_oracle::attribution::Token| {
        format!(
            "{} {}",
            t.token_id,
            serde_json::to_string(&t.text).expect("serializes")
        )
    };
    for p in &res.prompts {
        match &p.outcome {
            PromptOutcome::Identical { steps } => {
                errln!("prompt {}: identical over {steps} steps", esc(&p.id))
            }
            PromptOutcome::Diverged {
                step,
                candidate_a,
                candidate_b,
                reference_argmax,
                attribution,
            } => errln!(
                "prompt {}: step {step}: A {}, B {}, reference argmax {} -> {}",
                esc(&p.id),
                esc(&text(candidate_a)),
                esc(&text(candidate_b)),
                esc(&text(reference_argmax)),
                serde_json::to_value(attribution)
                    .expect("serializes")
                    .as_str()
                    .unwrap_or("")
            ),
            PromptOutcome::Refused { reason } => {
                errln!("prompt {}: refused: {}", esc(&p.id), esc(reason))
            }
        }
    }
    let c = &res.counts;
    errln!(
        "attributed: candidate_a {}, candidate_b {}, neither {}; identical {}; refused {}",
        c.candidate_a,
        c.candidate_b,
        c.neither,
        c.identical,
        c.refused
    );
    if let Err(e) = result::write_new(&a.output, &doc) {
        errln!(
            "kiln-qual oracle attribute: failed to {}",
            esc(&e.to_string())
        );
        return exit::FAILED;
    }
    errln!("attribution: {} {}", esc_path(&a.output), res.result_sha256);
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("serializes")
        );
    }
    exit::OK
}
