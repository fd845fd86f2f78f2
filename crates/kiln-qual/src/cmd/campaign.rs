//! `kiln-qual campaign`, `kiln-qual campaign verify` and `kiln-qual runtime-manifest`:
//! argument parsing and printing only; every rule lives in `qual-campaign`.
//!
//! Exit codes (the one table, `crate::exit`): `campaign` 0 when the summary passed, 1 when it
//! failed (receipts and summary are written and say why), 2 for usage errors, 7 when a
//! receipt, the summary or the case result could not be written, 130 when
//! SIGINT/SIGTERM stopped it (the receipts and summary are still written and say so);
//! `campaign verify` 0 when every hash, verdict and pairing recomputes, 1 otherwise;
//! `runtime-manifest` 0 when two byte-identical captures were published, 1 otherwise.

use crate::exit;
use crate::output::{errln, esc, esc_path, outln};
use clap::{Args, Subcommand};
use qual_campaign::campaign::{self, CampaignOptions, ServerSpec};
use qual_campaign::memory::SourceRequest;
use qual_campaign::pairing::ReferenceRole;
use qual_campaign::profiles;
use qual_campaign::records::{ExecutionPolicy, SloBounds, Verdict};
use qual_campaign::row::EvidenceMode;
use qual_serve::kiln_launch::BaseUrl;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::args::{count, f64_in, seconds_in};

/// `kiln-qual campaign ...`
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CampaignCli {
    /// `verify` (without a subcommand: run a campaign).
    #[command(subcommand)]
    pub command: Option<CampaignCommand>,
    /// Campaign arguments.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Campaign subcommands.
#[derive(Subcommand, Debug)]
pub enum CampaignCommand {
    /// Re-check a published campaign: summary and receipt hashes, row evidence, verdicts and
    /// the pairing with its reference.
    Verify(VerifyArgs),
}

/// Memory sources.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySourceArg {
    /// DRM when exactly one counter exists, NVML with exactly one GPU, else the server's
    /// process tree.
    Auto,
    /// `/sys/class/drm/card*/device/mem_info_vram_used`.
    Drm,
    /// NVML (libnvidia-ml.so.1, loaded at run time).
    Nvml,
    /// Summed PSS of the server's process tree.
    ProcessTree,
}

/// The memory source the flags name (`campaign`, and `bench --memory-source`).
pub fn memory_request(
    source: MemorySourceArg,
    path: Option<PathBuf>,
    device_index: Option<u32>,
) -> Result<SourceRequest, String> {
    Ok(match (source, path, device_index) {
        (MemorySourceArg::Auto, Some(p), _) | (MemorySourceArg::Drm, Some(p), _) => {
            SourceRequest::Drm(Some(p))
        }
        (MemorySourceArg::Auto, None, Some(i)) | (MemorySourceArg::Nvml, None, Some(i)) => {
            SourceRequest::Nvml(i)
        }
        (MemorySourceArg::Auto, None, None) => SourceRequest::Auto,
        (MemorySourceArg::Drm, None, None) => SourceRequest::Drm(None),
        (MemorySourceArg::Nvml, None, None) => SourceRequest::Nvml(0),
        (MemorySourceArg::ProcessTree, None, None) => SourceRequest::ProcessTree,
        _ => {
            return Err(
                "--memory-path and --memory-device-index do not fit that --memory-source".into(),
            )
        }
    })
}

/// Output evidence.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvidenceArg {
    /// Hashes and sizes.
    Hashes,
    /// Hashes and the exact text (≤ 1 MiB per request).
    Full,
}

/// Reference roles.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleArg {
    /// A mismatch with the reference fails the receipt.
    QualificationGate,
    /// The pairing is recorded only.
    Evidence,
}

/// Arguments of `kiln-qual campaign`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Engine name, part of every file name (`^[a-z0-9][a-z0-9._-]{0,63}$`).
    #[arg(long, required = true)]
    #[arg(help_heading = "Server")]
    pub engine: Option<String>,
    /// Launch recipe of an owned server (`kiln-qual.serve-launch.v1`, or Kiln's
    /// `kiln.serving-benchmark-server-launch.v1` with --base-url).
    #[arg(long, value_parser = super::args::Path, value_name = "RECIPE.json")]
    #[arg(help_heading = "Server")]
    pub launch: Option<PathBuf>,
    /// Server origin: with --launch for a recipe without a port; alone, an attached server.
    #[arg(long, value_name = "URL")]
    #[arg(help_heading = "Server")]
    pub base_url: Option<BaseUrl>,
    /// Pid of an attached server (its process tree is the CPU memory source).
    #[arg(long, conflicts_with = "launch")]
    #[arg(help_heading = "Server")]
    pub server_pid: Option<u32>,
    /// Model id to request (default: the first id served by /v1/models).
    #[arg(long)]
    #[arg(help_heading = "Server")]
    pub model: Option<String>,
    /// Model directory: fingerprinted before and after traffic (and `${model_path}`).
    #[arg(long, value_parser = super::args::Path, value_name = "DIR")]
    #[arg(help_heading = "Server")]
    pub model_path: Option<PathBuf>,
    /// Campaign id (`^[A-Za-z0-9][A-Za-z0-9._-]{2,63}$`).
    #[arg(long, required = true)]
    #[arg(help_heading = "Campaign")]
    pub campaign_id: Option<String>,
    /// Prompt-set id; profiles append `-<profile>`. Campaigns that must pair share it.
    #[arg(long, required = true)]
    #[arg(help_heading = "Campaign")]
    pub prompt_set_id: Option<String>,
    /// Profiles (comma-separated): greedy-short, api-default-sampled, long-prefill,
    /// prefix-hit, mixed.
    #[arg(
        long,
        default_value = "greedy-short,api-default-sampled,long-prefill,prefix-hit,mixed"
    )]
    #[arg(help_heading = "Campaign")]
    pub profiles: String,
    /// Concurrency sweep (comma-separated, strictly increasing, 1..=4096).
    #[arg(long, default_value = "1,8,16,32,64,128")]
    #[arg(help_heading = "Campaign")]
    pub sizes: String,
    /// Repeats per size (1..=1000).
    #[arg(long, default_value_t = 3, value_parser = count::<usize>(1..=1000))]
    #[arg(help_heading = "Campaign")]
    pub repeats: usize,
    /// `max_tokens` of measured requests (sent with `ignore_eos`).
    #[arg(long, default_value_t = 64, value_parser = count::<u64>(1..=2_147_483_648))]
    #[arg(help_heading = "Campaign")]
    pub max_tokens: u64,
    /// Warmup requests per profile (0..=4096; `max_tokens = min(16, --max-tokens)`).
    #[arg(long, default_value_t = 1, value_parser = count::<usize>(0..=4096))]
    #[arg(help_heading = "Campaign")]
    pub warmup: usize,
    /// Base seed (request `i` sends `seed + i`).
    #[arg(long, default_value_t = 17)]
    #[arg(help_heading = "Campaign")]
    pub seed: u64,
    /// Goodput SLO: TTFT bound, ms.
    #[arg(long, default_value = "5000", value_parser = f64_in(0.001..=86_400_000.0))]
    #[arg(help_heading = "Gates")]
    pub slo_ttft_ms: f64,
    /// Goodput SLO: largest client-visible ITL bound, ms.
    #[arg(long, default_value = "250", value_parser = f64_in(0.001..=86_400_000.0))]
    #[arg(help_heading = "Gates")]
    pub slo_itl_ms: f64,
    /// Goodput SLO: end-to-end bound, ms.
    #[arg(long, default_value = "60000", value_parser = f64_in(0.001..=86_400_000.0))]
    pub slo_e2e_ms: f64,
    /// Gate: largest dispatch spread of a row, ms.
    #[arg(long, default_value = "250", value_parser = f64_in(0.0..=86_400_000.0))]
    #[arg(help_heading = "Gates")]
    pub max_dispatch_spread_ms: f64,
    /// Gate: memory ceiling in bytes (peak of every row).
    #[arg(long, required = true)]
    #[arg(help_heading = "Gates")]
    pub memory_limit_bytes: Option<u64>,
    /// Memory source.
    #[arg(long, value_enum, default_value = "auto")]
    #[arg(help_heading = "Memory and metrics")]
    pub memory_source: MemorySourceArg,
    /// DRM counter file (with --memory-source drm or auto).
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    #[arg(help_heading = "Memory and metrics")]
    pub memory_path: Option<PathBuf>,
    /// NVML device index (with --memory-source nvml or auto).
    #[arg(long, conflicts_with = "memory_path")]
    #[arg(help_heading = "Memory and metrics")]
    pub memory_device_index: Option<u32>,
    /// Memory sampling interval, ms (1..=60000).
    #[arg(long, default_value_t = 50, value_parser = count::<u64>(1..=60_000))]
    #[arg(help_heading = "Memory and metrics")]
    pub memory_sample_ms: u64,
    /// Prometheus path scraped before and after every row (e.g. `/metrics` for llama.cpp
    /// `--metrics` or vLLM).
    #[arg(long, value_name = "PATH")]
    #[arg(help_heading = "Memory and metrics")]
    pub metrics_path: Option<String>,
    /// Output evidence.
    #[arg(long, value_enum, default_value = "hashes")]
    #[arg(help_heading = "Outputs and policy")]
    pub output_evidence: EvidenceArg,
    /// Run every profile even after one failed (default: fail fast).
    #[arg(long)]
    #[arg(help_heading = "Outputs and policy")]
    pub continue_after_failure: bool,
    /// Output directory (receipts `<profile>.<engine>.json`, summary `campaign.<engine>.json`;
    /// created when missing, its parent must exist).
    #[arg(long, value_parser = super::args::Path, value_name = "DIR", required = true)]
    #[arg(help_heading = "Outputs and policy")]
    pub out_dir: Option<PathBuf>,
    /// Directory of the reference engine's campaign to pair with.
    #[arg(long, value_parser = super::args::Path, value_name = "DIR", requires = "reference_engine")]
    #[arg(help_heading = "Reference")]
    pub reference_dir: Option<PathBuf>,
    /// The reference campaign's engine name.
    #[arg(long, requires = "reference_dir")]
    #[arg(help_heading = "Reference")]
    pub reference_engine: Option<String>,
    /// How the reference bears on the verdict.
    #[arg(long, value_enum, default_value = "qualification-gate")]
    #[arg(help_heading = "Reference")]
    pub reference_role: RoleArg,
    /// Extra runtime file bound by digest and re-checked after traffic (repeatable).
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    #[arg(help_heading = "Runtime binding")]
    pub runtime_artifact: Vec<PathBuf>,
    /// Runtime manifest (`kiln-qual runtime-manifest`) bound and re-checked after traffic.
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    #[arg(help_heading = "Runtime binding")]
    pub runtime_manifest: Option<PathBuf>,
    /// Per-request deadline, seconds.
    #[arg(long, default_value = "600", value_parser = seconds_in(0.001..=86_400.0))]
    #[arg(help_heading = "Requests and context")]
    pub request_timeout_seconds: f64,
    /// Prompt-context preflight: the server's tokenizer endpoint (`/tokenize` on llama.cpp),
    /// asked for the longest prompt of every row before any traffic.
    #[arg(long, value_name = "PATH")]
    #[arg(help_heading = "Requests and context")]
    pub tokenize_path: Option<String>,
    /// Context ceiling in tokens: prompt + --max-tokens must fit (preflight and every row's
    /// usage).
    #[arg(long, value_parser = count::<u64>(1..=u64::MAX))]
    #[arg(help_heading = "Requests and context")]
    pub context_tokens: Option<u64>,
    /// Also write a case result for the runner here (default:
    /// `$KILN_QUALIFICATION_CASE_RESULT` when set).
    #[arg(long, value_parser = super::args::Path, value_name = "PATH")]
    #[arg(help_heading = "Case result")]
    pub result: Option<PathBuf>,
    /// Case id of the case result (default: the campaign id).
    #[arg(long)]
    #[arg(help_heading = "Case result")]
    pub case_id: Option<String>,
    /// Config object echoed as the case result's `effective_config`.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    #[arg(help_heading = "Case result")]
    pub effective_config: String,
}

/// Arguments of `kiln-qual campaign verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The campaign directory.
    #[arg(value_parser = super::args::Path, value_name = "DIR")]
    pub dir: PathBuf,
    /// The engine whose summary to check (default: the only one in DIR).
    #[arg(long)]
    pub engine: Option<String>,
    /// Also require the campaign's attestation (`campaign.<engine>.json.intoto.jsonl`, made
    /// by `receipt sign` on the summary) signed by a key of FILE, covering the summary and
    /// every receipt it lists by digest.
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    pub trusted_keys: Option<PathBuf>,
}

/// Arguments of `kiln-qual runtime-manifest`.
#[derive(Args, Debug)]
pub struct ManifestArgs {
    /// The runtime's Python interpreter (a path, or a name looked up on PATH: `python3`).
    #[arg(long, value_parser = super::args::Program, value_name = "PYTHON")]
    pub python: PathBuf,
    /// Take the launch environment from this recipe.
    #[arg(long, value_parser = super::args::Path, value_name = "RECIPE.json")]
    pub launch: Option<PathBuf>,
    /// Launch environment entry `NAME=VALUE` (repeatable; added to the recipe's).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Where to publish the manifest (never replaced).
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    pub out: PathBuf,
}

fn options(a: RunArgs) -> Result<CampaignOptions, String> {
    let list = |s: &str, what: &str| -> Result<Vec<usize>, String> {
        s.split(',')
            .map(|x| {
                x.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("--{what}: not an integer list"))
            })
            .collect()
    };
    let server = match (a.launch, a.base_url) {
        (Some(launch), base_url) => ServerSpec::Owned { launch, base_url },
        (None, Some(base_url)) => ServerSpec::Attached {
            base_url,
            server_pid: a.server_pid,
        },
        (None, None) => return Err("pass --launch (owned server) or --base-url (attached)".into()),
    };
    let memory = memory_request(a.memory_source, a.memory_path, a.memory_device_index)?;
    Ok(CampaignOptions {
        engine: a.engine.unwrap_or_default(),
        server,
        model: a.model,
        model_path: a.model_path,
        campaign_id: a.campaign_id.unwrap_or_default(),
        prompt_set_id: a.prompt_set_id.unwrap_or_default(),
        profiles: profiles::parse_list(&a.profiles).map_err(|e| format!("--profiles: {e}"))?,
        sizes: list(&a.sizes, "sizes")?,
        repeats: a.repeats,
        max_tokens: a.max_tokens,
        warmup: a.warmup,
        seed: a.seed,
        slo: SloBounds {
            ttft_ms: a.slo_ttft_ms,
            client_visible_itl_ms: a.slo_itl_ms,
            e2e_ms: a.slo_e2e_ms,
        },
        max_dispatch_spread_ms: a.max_dispatch_spread_ms,
        memory_limit_bytes: a.memory_limit_bytes.unwrap_or(0),
        memory,
        memory_interval_ms: a.memory_sample_ms,
        metrics_path: a.metrics_path,
        evidence: match a.output_evidence {
            EvidenceArg::Hashes => EvidenceMode::Hashes,
            EvidenceArg::Full => EvidenceMode::Full,
        },
        policy: if a.continue_after_failure {
            ExecutionPolicy::ContinueAfterFailure
        } else {
            ExecutionPolicy::FailFast
        },
        out_dir: a.out_dir.unwrap_or_default(),
        reference_dir: a.reference_dir,
        reference_engine: a.reference_engine,
        reference_role: match a.reference_role {
            RoleArg::QualificationGate => ReferenceRole::QualificationGate,
            RoleArg::Evidence => ReferenceRole::Evidence,
        },
        runtime_artifacts: a.runtime_artifact,
        runtime_manifest: a.runtime_manifest,
        request_timeout: Duration::from_secs_f64(a.request_timeout_seconds),
        tokenize_path: a.tokenize_path,
        context_tokens: a.context_tokens,
    })
}

/// Runs `kiln-qual campaign`.
pub fn run(c: CampaignCli) -> i32 {
    match c.command {
        Some(CampaignCommand::Verify(v)) => verify(v),
        None => run_campaign(c.run),
    }
}

fn run_campaign(a: RunArgs) -> i32 {
    let result = a
        .result
        .clone()
        .or_else(|| std::env::var_os("KILN_QUALIFICATION_CASE_RESULT").map(PathBuf::from));
    let effective_config = match qual_json::from_str(&a.effective_config)
        .ok()
        .and_then(|v| v.to_serde())
        .filter(|v| v.is_object())
    {
        Some(v) => v,
        None => {
            errln!("kiln-qual: failed to parse --effective-config: not a JSON object");
            return exit::USAGE;
        }
    };
    let case_id = a
        .case_id
        .clone()
        .or(a.campaign_id.clone())
        .unwrap_or_default();
    let o = match options(a) {
        Ok(o) => o,
        Err(e) => {
            errln!("kiln-qual: {}", esc(&e));
            return exit::USAGE;
        }
    };
    if let Err(e) = qual_exec::signals::install_forwarding() {
        errln!("kiln-qual: failed to install signal forwarding: {e}");
        return exit::FAILED;
    }
    let started = Instant::now();
    let bar = crate::progress::Bar::steps("rows");
    let out = campaign::run_observed(&o, &bar);
    bar.finish();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            errln!(
                "kiln-qual: failed to run the campaign: {}",
                esc(&e.to_string())
            );
            // The one exit-code table (crate::exit): an unwritable output is 7, as in bench.
            return match e {
                campaign::CampaignError::Write { .. } => exit::OUTPUT_FAILED,
                _ => exit::FAILED,
            };
        }
    };
    for l in &out.summary.profiles {
        let v = match (l.verdict, &l.blocked_by_profile) {
            (Some(Verdict::Passed), _) => "passed".to_string(),
            (Some(Verdict::Failed), _) => "failed".to_string(),
            (None, Some(b)) => format!("not run (after {} failed)", b.name()),
            (None, None) => "not run".to_string(),
        };
        errln!("kiln-qual: profile {}: {v}", l.profile.name());
    }
    for p in &out.receipts {
        if let Ok((_, r)) = qual_campaign::pairing::read_receipt(p) {
            for reason in campaign::failure_reasons(&r).iter().take(8) {
                errln!(
                    "kiln-qual:   {}: {}",
                    r.workload.profile.name(),
                    esc(reason)
                );
            }
        }
        outln!("{}", esc_path(p));
    }
    outln!("{}", esc_path(&out.summary_path));
    if let Some(path) = result {
        let doc = campaign::case_result(
            &out,
            &case_id,
            effective_config,
            started.elapsed().as_secs_f64(),
        );
        // serde's pretty format, not `qual_json::to_pretty_json`: this document's bytes (field
        // order, raw UTF-8, serde's float spelling) are its format; the Python-compatible writer
        // would change them.
        let mut bytes = serde_json::to_vec_pretty(&doc).expect("case result serializes");
        bytes.push(b'\n');
        let written = qual_json::publish::write_new(&path, &bytes);
        if let Err(e) = written {
            errln!(
                "kiln-qual: failed to write the case result {}: {e}",
                esc_path(&path)
            );
            return exit::OUTPUT_FAILED;
        }
        errln!("kiln-qual: case result: {}", esc_path(&path));
    }
    match out.summary.verdict {
        Verdict::Passed => {
            errln!("kiln-qual: campaign passed");
            exit::OK
        }
        Verdict::Failed => {
            errln!("kiln-qual: campaign failed (the receipts say why)");
            exit::FAILED
        }
    }
}

fn verify(v: VerifyArgs) -> i32 {
    let mut rep = qual_campaign::verify::verify(&v.dir, v.engine.as_deref());
    for p in rep.summary.iter().chain(&rep.receipts) {
        outln!("checked {}", esc_path(p));
    }
    let mut signed = None;
    if let (Some(keys), Some(summary)) = (&v.trusted_keys, &rep.summary) {
        let envelope = qual_attest::envelope_path(summary);
        let result = qual_attest::load_trusted_keys(keys)
            .map_err(qual_campaign::attest::CampaignAttestError::from)
            .and_then(|trusted| qual_campaign::attest::verify(summary, &trusted));
        match result {
            Ok(by) => signed = Some((envelope, by)),
            Err(e) => rep
                .findings
                .push(format!("{}: failed to {e}", envelope.display())),
        }
    }
    if rep.findings.is_empty() {
        outln!("OK campaign verifies");
        if let Some((envelope, by)) = signed {
            outln!(
                "  attestation {} signed by {}",
                esc_path(&envelope),
                esc(&by.keyid)
            );
        }
        exit::OK
    } else {
        for f in &rep.findings {
            errln!("FAILED {}", esc(f));
        }
        exit::FAILED
    }
}

/// Runs `kiln-qual runtime-manifest`.
pub fn runtime_manifest(a: ManifestArgs) -> i32 {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    if let Some(l) = &a.launch {
        match qual_serve::kiln_launch::load_launch(l, None) {
            Ok(r) => env.extend(r.environment.clone()),
            Err(e) => {
                errln!(
                    "kiln-qual: failed to read the launch recipe: {}",
                    esc(&e.to_string())
                );
                return exit::FAILED;
            }
        }
    }
    for kv in &a.env {
        match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                env.insert(k.to_string(), v.to_string());
            }
            _ => {
                errln!("kiln-qual: --env must be NAME=VALUE, got {}", esc(kv));
                return exit::USAGE;
            }
        }
    }
    let (m, bytes) = match qual_campaign::manifest::capture(&a.python, &env) {
        Ok(x) => x,
        Err(e) => {
            errln!("kiln-qual: failed to {}", esc(&e.to_string()));
            return exit::FAILED;
        }
    };
    let dir = a
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let name = a
        .out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match campaign::publish(dir, &name, &bytes) {
        Ok(p) => {
            outln!("{}", esc_path(&p));
            let files: u64 = m.distributions.iter().map(|d| d.verified_files).sum();
            errln!(
                "kiln-qual: runtime manifest: 2 identical captures, {} distributions, {files} files matching their RECORD, {}",
                m.distributions.len(),
                m.runtime_content_sha256
            );
            for f in m.findings() {
                errln!("kiln-qual: runtime manifest: {}", esc(&f));
            }
            exit::OK
        }
        Err(e) => {
            errln!("kiln-qual: failed to {}", esc(&e.to_string()));
            exit::FAILED
        }
    }
}

/// `kiln-qual compare BASELINE CANDIDATE` on two campaign receipts: the candidate's rows paired
/// with the baseline's. 0 when matched, 1 when mismatched or not comparable.
pub fn compare_read_receipts(
    baseline: &qual_documents::Source,
    candidate: &qual_documents::Source,
    json: bool,
) -> i32 {
    print_comparison(
        qual_campaign::pairing::compare_read(
            (&baseline.path, &baseline.bytes),
            (&candidate.path, &candidate.bytes),
        ),
        json,
    )
}

fn print_comparison(result: Result<qual_campaign::records::Comparison, String>, json: bool) -> i32 {
    match result {
        Ok(c) => {
            if json {
                crate::output::print_json(&c);
            } else {
                for m in &c.mismatches {
                    outln!("MISMATCH {}", esc(&qual_campaign::pairing::describe(m)));
                }
                let mode = serde_json::to_value(c.comparison_mode).unwrap_or_default();
                outln!(
                    "{} ({} comparison, {} mismatch(es))",
                    if c.mismatches.is_empty() {
                        "MATCHED"
                    } else {
                        "MISMATCHED"
                    },
                    mode.as_str().unwrap_or(""),
                    c.mismatches.len()
                );
            }
            if c.mismatches.is_empty() {
                exit::OK
            } else {
                exit::FAILED
            }
        }
        Err(e) => {
            errln!(
                "kiln-qual: failed to compare the campaign receipts: {}",
                esc(&e)
            );
            exit::FAILED
        }
    }
}
