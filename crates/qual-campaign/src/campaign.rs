//! The campaign runner: one server (owned or attached), the selected profiles in fixed order,
//! staged receipts finalized after the server's shutdown, publication without clobbering,
//! and the summary written last.
//!
//! Phases: preflight (identifiers, sweep, out-dir collisions, identities) → server start and
//! readiness → per profile: warmup, then every (size, repeat) row → server shutdown →
//! finalization checks (model, runtime artifacts, runtime manifest, shutdown) and reference
//! pairing per profile → staged receipts → publication (temporary file, fsync, hard link: an
//! existing file is never replaced) → summary.

use crate::identity;
use crate::manifest;
use crate::memory::{self, Sampler, SourceRequest};
use crate::pairing::{self, ReferenceRole};
use crate::profiles::Profile;
use crate::progress::{CampaignProgress, NoProgress, RowProgress};
use crate::prompts::{self, LONG_PROMPT_REPETITIONS, TEMPLATE_VERSION};
use crate::records::{
    self, CheckStatus, Completion, EngineIdentity, ExecutionPolicy, Failure, LaunchBinding,
    ProfileLine, ProfileStatus, Receipt, RequestError, Row, SamplerIdentity, Sampling, ServerOwner,
    SloBounds, Summary, Tool, Verdict, VerdictEffect, Warmup, Workload,
};
use crate::row::{self, EvidenceMode, GateConfig, RowPlan};
use qual_serve::kiln_launch::{self, BaseUrl};
use qual_serve::lifecycle::OwnedServer;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The server under test.
#[derive(Clone, Debug)]
pub enum ServerSpec {
    /// Launched and shut down by the campaign through `qual-serve`'s lifecycle.
    Owned {
        /// Launch recipe (either schema `qual-serve` reads).
        launch: PathBuf,
        /// Server URL for a recipe without a port.
        base_url: Option<BaseUrl>,
    },
    /// Already running.
    Attached {
        /// Its origin.
        base_url: BaseUrl,
        /// Its pid (the memory source measures its process tree).
        server_pid: Option<u32>,
    },
}

/// Everything a campaign needs.
#[derive(Clone, Debug)]
pub struct CampaignOptions {
    /// Engine name (`[a-z0-9][a-z0-9._-]{0,63}`), part of every file name.
    pub engine: String,
    /// The server.
    pub server: ServerSpec,
    /// Model id to request (default: the first served id).
    pub model: Option<String>,
    /// Model directory, fingerprinted before and after traffic (and substituted for
    /// `${model_path}` in a launch recipe).
    pub model_path: Option<PathBuf>,
    /// Campaign id.
    pub campaign_id: String,
    /// Prompt-set id (each profile appends `-<profile>`).
    pub prompt_set_id: String,
    /// Profiles in campaign order.
    pub profiles: Vec<Profile>,
    /// Concurrency sweep, strictly increasing.
    pub sizes: Vec<usize>,
    /// Repeats per size.
    pub repeats: usize,
    /// `max_tokens` of measured requests.
    pub max_tokens: u64,
    /// Warmup requests per profile.
    pub warmup: usize,
    /// Base seed.
    pub seed: u64,
    /// Goodput SLO.
    pub slo: SloBounds,
    /// Dispatch spread bound, ms.
    pub max_dispatch_spread_ms: f64,
    /// Memory ceiling, bytes.
    pub memory_limit_bytes: u64,
    /// Memory source.
    pub memory: SourceRequest,
    /// Sampling interval.
    pub memory_interval_ms: u64,
    /// Prometheus path to scrape around rows (`/metrics`), if the engine has one.
    pub metrics_path: Option<String>,
    /// Output evidence mode.
    pub evidence: EvidenceMode,
    /// Fail-fast or not.
    pub policy: ExecutionPolicy,
    /// Output directory (must exist).
    pub out_dir: PathBuf,
    /// A reference campaign's directory (pairs `<profile>.<reference_engine>.json`).
    pub reference_dir: Option<PathBuf>,
    /// The reference campaign's engine name.
    pub reference_engine: Option<String>,
    /// How the reference bears on the verdict.
    pub reference_role: ReferenceRole,
    /// Extra files bound by digest.
    pub runtime_artifacts: Vec<PathBuf>,
    /// A runtime manifest bound by digest.
    pub runtime_manifest: Option<PathBuf>,
    /// Per-request deadline.
    pub request_timeout: Duration,
    /// The server's tokenizer endpoint (`/tokenize` on llama.cpp and the reference engine)
    /// for the prompt-context preflight.
    pub tokenize_path: Option<String>,
    /// Context ceiling: prompt + `max_tokens` must fit (checked before traffic with the
    /// tokenizer endpoint, after each row with usage).
    pub context_tokens: Option<u64>,
}

/// What a campaign produced.
#[derive(Clone, Debug)]
pub struct CampaignOutcome {
    /// The summary.
    pub summary: Summary,
    /// Where it was written.
    pub summary_path: PathBuf,
    /// Published receipts.
    pub receipts: Vec<PathBuf>,
}

/// Why no summary could be written.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// Invalid options (nothing ran).
    #[error("check the campaign options: {}", .0.join("; "))]
    Options(Vec<String>),
    /// Output could not be written.
    #[error("write {path}: {reason}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

fn is_id(s: &str, min: usize, max: usize) -> bool {
    let b = s.as_bytes();
    (min..=max).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
}

fn is_engine(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=64).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'_' || c == b'-'
        })
}

/// Every option problem, before anything runs.
pub fn check_options(o: &CampaignOptions) -> Vec<String> {
    let mut e = Vec::new();
    if !is_engine(&o.engine) {
        e.push("engine must match ^[a-z0-9][a-z0-9._-]{0,63}$".into());
    }
    for (what, v) in [
        ("campaign id", &o.campaign_id),
        ("prompt-set id", &o.prompt_set_id),
    ] {
        if !is_id(v, 3, 64) {
            e.push(format!(
                "{what} must match ^[A-Za-z0-9][A-Za-z0-9._-]{{2,63}}$"
            ));
        }
    }
    if o.profiles.is_empty() {
        e.push("at least one profile is needed".into());
    }
    if o.sizes.is_empty()
        || o.sizes.windows(2).any(|w| w[0] >= w[1])
        || o.sizes.iter().any(|&s| !(1..=4096).contains(&s))
    {
        e.push("sizes must be unique, strictly increasing integers in 1..=4096".into());
    }
    if !(1..=1000).contains(&o.repeats) {
        e.push("repeats must be in 1..=1000".into());
    }
    if !(1..=1u64 << 31).contains(&o.max_tokens) {
        e.push("max tokens must be in 1..=2147483648".into());
    }
    if o.warmup > 4096 {
        e.push("warmup must be in 0..=4096".into());
    }
    let top = o.sizes.iter().copied().max().unwrap_or(1).max(o.warmup) as u64;
    if o.seed.checked_add(top.saturating_sub(1)).is_none() {
        e.push("seed + largest request index must fit in 64 bits".into());
    }
    if !(1..=60_000).contains(&o.memory_interval_ms) {
        e.push("memory sample interval must be in 1..=60000 ms".into());
    }
    for (n, v) in [
        ("slo ttft", o.slo.ttft_ms),
        ("slo itl", o.slo.client_visible_itl_ms),
        ("slo e2e", o.slo.e2e_ms),
        ("max dispatch spread", o.max_dispatch_spread_ms),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            e.push(format!("{n} must be a finite number >= 0"));
        }
    }
    if o.reference_dir.is_some() != o.reference_engine.is_some() {
        e.push("a reference dir needs the reference engine name and vice versa".into());
    }
    if o.reference_engine.as_deref() == Some(o.engine.as_str()) {
        e.push("the reference engine must differ from the engine".into());
    }
    let parent = match o.out_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if std::fs::symlink_metadata(&o.out_dir).is_err() {
        // A missing out dir is created when the campaign starts; its parent must exist.
        if !parent.is_dir() {
            e.push(format!(
                "out dir {} does not exist and neither does its parent {} (create the parent first)",
                qual_json::escape_path(&o.out_dir),
                qual_json::escape_path(&parent)
            ));
        }
    } else if !o.out_dir.is_dir() {
        e.push(format!(
            "out dir {} is not a directory",
            o.out_dir.display()
        ));
    } else {
        let mut names = vec![records::summary_name(&o.engine)];
        names.extend(
            o.profiles
                .iter()
                .map(|p| records::receipt_name(*p, &o.engine)),
        );
        for n in names {
            if o.out_dir.join(&n).exists() {
                e.push(format!(
                    "{n} already exists in the out dir; refusing to replace it"
                ));
            }
        }
    }
    e
}

struct Server {
    addr: SocketAddr,
    base_url: String,
    pid: Option<u32>,
    owned: Option<OwnedServer>,
    launch: Option<(LaunchBinding, Vec<records::FileDigest>)>,
}

fn start_server(
    o: &CampaignOptions,
    rt: &tokio::runtime::Runtime,
    epoch: Instant,
) -> Result<(Server, Vec<String>), (String, Option<serde_json::Value>)> {
    match &o.server {
        ServerSpec::Attached {
            base_url,
            server_pid,
        } => {
            let addr = SocketAddr::new(base_url.host, base_url.port);
            match rt.block_on(qual_serve::client::probe_models(
                addr,
                Duration::from_secs(10),
            )) {
                qual_serve::client::Probe::Ready { ids, .. } => Ok((
                    Server {
                        addr,
                        base_url: base_url.text.clone(),
                        pid: *server_pid,
                        owned: None,
                        launch: None,
                    },
                    ids,
                )),
                qual_serve::client::Probe::NotReady(r) => {
                    Err((format!("the attached server is not ready: {r}"), None))
                }
            }
        }
        ServerSpec::Owned { launch, base_url } => {
            let recipe = kiln_launch::load_launch(launch, base_url.as_ref())
                .and_then(|r| {
                    let m = o
                        .model_path
                        .as_ref()
                        .filter(|_| r.uses_model_path())
                        .map(|p| std::path::absolute(p).unwrap_or(p.clone()));
                    r.with_model_path(m.as_deref()).map_err(|e| {
                        qual_serve::recipe::RecipeError::Invalid {
                            path: launch.display().to_string(),
                            violations: vec![e],
                        }
                    })
                })
                .map_err(|e| (format!("failed to read the launch recipe: {e}"), None))?;
            let binding = LaunchBinding {
                path: launch.display().to_string(),
                file_sha256: recipe.file_sha256.clone(),
                canonical_sha256: recipe.canonical_sha256.clone(),
            };
            let exes = identity::executables(&recipe.command, &recipe.working_directory)
                .map_err(|e| (format!("failed to bind the server executable: {e}"), None))?;
            // The out dir, and the repository's git directory and `.qualification/`, exactly
            // as `serve` protects them.
            let protect = qual_serve::case::protected_paths(
                &o.out_dir.join(records::summary_name(&o.engine)),
            );
            let mut server = match OwnedServer::launch(&recipe, epoch, &protect) {
                Ok(s) => s,
                Err(s) => {
                    let rec = s.into_record();
                    return Err((
                        format!("the server did not start: {}", rec.failures.join("; ")),
                        serde_json::to_value(rec).ok(),
                    ));
                }
            };
            let ready = server.wait_ready(rt);
            let ids = match ready {
                Some((_, ids)) if server.check_listener() => ids,
                _ => {
                    let rec = server.shutdown();
                    return Err((
                        format!(
                            "the server did not become ready: {}",
                            rec.failures.join("; ")
                        ),
                        serde_json::to_value(rec).ok(),
                    ));
                }
            };
            Ok((
                Server {
                    addr: server.addr(),
                    base_url: recipe.base_url(),
                    pid: server.record.pid,
                    owned: Some(server),
                    launch: Some((binding, exes)),
                },
                ids,
            ))
        }
    }
}

/// A profile's receipt before finalization.
struct Draft {
    profile: Profile,
    workload: Workload,
    prompt_context: Option<records::PromptContext>,
    warmup: Warmup,
    runs: Vec<Row>,
    failures: Vec<Failure>,
}

fn failure(phase: &str, detail: impl Into<String>) -> Failure {
    let mut d: String = detail.into();
    if d.chars().count() > 4096 {
        d = d.chars().take(4095).collect::<String>() + "…";
    }
    Failure {
        phase: phase.into(),
        detail: d,
    }
}

fn workload(o: &CampaignOptions, p: Profile, model: &str) -> Workload {
    let c = p.contract();
    Workload {
        schema: records::WORKLOAD_SCHEMA.into(),
        prompt_template_version: TEMPLATE_VERSION.into(),
        long_prompt_repetitions: LONG_PROMPT_REPETITIONS as u64,
        run_id: format!("{}-{}-{}", o.campaign_id, o.engine, p.name()),
        prompt_set_id: format!("{}-{}", o.prompt_set_id, p.name()),
        model: model.into(),
        endpoint: "/v1/chat/completions".into(),
        stream_include_usage: true,
        sizes: o.sizes.iter().map(|&s| s as u64).collect(),
        repeats: o.repeats as u64,
        warmup_requests: o.warmup as u64,
        max_tokens: o.max_tokens,
        sampling: Sampling {
            temperature: c.temperature,
            top_p: c.top_p,
            seed: o.seed,
            ignore_eos: true,
        },
        arrival_pattern: "all_at_once".into(),
        require_max_tokens: true,
        prompt_tokens: c.prompt_tokens,
        max_dispatch_spread_ms: o.max_dispatch_spread_ms,
        slo: o.slo,
        profile: p,
        comparison_mode: c.comparison_mode,
        memory_limit_bytes: o.memory_limit_bytes,
        request_timeout_s: o.request_timeout.as_secs_f64(),
    }
}

/// Canonical hash of a workload without `run_id`.
pub fn workload_fingerprint(w: &Workload) -> String {
    records::self_hash(w, "run_id")
}

struct Env<'a> {
    o: &'a CampaignOptions,
    rt: &'a tokio::runtime::Runtime,
    server: &'a Server,
    model: &'a str,
    sampler: Option<&'a Sampler>,
    epoch: Instant,
    progress: &'a dyn CampaignProgress,
    rows_done: std::cell::Cell<u64>,
}

impl Env<'_> {
    /// Tells the progress observer that `phase` of `profile` is about to run.
    fn report(&self, profile: Profile, phase: &str) {
        let o = self.o;
        self.progress.update(RowProgress {
            done: self.rows_done.get(),
            total: (o.profiles.len() * o.sizes.len() * o.repeats) as u64,
            profile: profile.name(),
            phase,
        });
    }
}

fn run_warmup(env: &Env, w: &Workload, d: &mut Draft) -> bool {
    let o = env.o;
    let max_tokens = o.max_tokens.min(16);
    let mut warm = Warmup {
        requests: o.warmup as u64,
        max_tokens,
        outcome: Verdict::Passed,
        errors: Vec::new(),
    };
    if o.warmup > 0 {
        let phase = prompts::warmup_phase(o.warmup);
        env.report(d.profile, &phase);
        let contract = d.profile.contract();
        let plan = prompts::row_prompts(
            &w.prompt_set_id,
            &phase,
            o.warmup,
            contract.prompt_profile,
            LONG_PROMPT_REPETITIONS,
        )
        .map(|prompts| RowPlan {
            concurrency: o.warmup,
            repeat: None,
            phase,
            prompts,
            max_tokens,
            seed: o.seed,
            contract,
        });
        match plan.and_then(|p| {
            row::execute(&p, env.server.addr, env.model, o.request_timeout, env.epoch)
        }) {
            Ok(recs) => {
                for (i, r) in recs.iter().enumerate() {
                    if let qual_serve::record::Outcome::Failed { reason } = &r.outcome {
                        warm.errors.push(RequestError {
                            index: i as u64,
                            error: reason.clone(),
                        });
                    }
                }
            }
            Err(e) => warm.errors.push(RequestError { index: 0, error: e }),
        }
    }
    let ok = warm.errors.is_empty();
    if !ok {
        warm.outcome = Verdict::Failed;
        d.failures.push(failure(
            "warmup",
            format!(
                "{} warmup request(s) failed; first: {}",
                warm.errors.len(),
                warm.errors[0].error
            ),
        ));
    }
    d.warmup = warm;
    ok
}

fn run_profile(env: &Env, p: Profile) -> Draft {
    let o = env.o;
    let w = workload(o, p, env.model);
    let mut d = Draft {
        profile: p,
        workload: w.clone(),
        prompt_context: None,
        warmup: Warmup {
            requests: o.warmup as u64,
            max_tokens: o.max_tokens.min(16),
            outcome: Verdict::Failed,
            errors: Vec::new(),
        },
        runs: Vec::new(),
        failures: Vec::new(),
    };
    if !preflight(env, &w, &mut d) || !run_warmup(env, &w, &mut d) {
        return d;
    }
    let cfg = GateConfig {
        max_dispatch_spread_ms: o.max_dispatch_spread_ms,
        memory_limit_bytes: o.memory_limit_bytes,
        slo: o.slo,
        evidence: o.evidence,
        metrics_scraped: o.metrics_path.is_some(),
    };
    let contract = p.contract();
    for &c in &o.sizes {
        for r in 0..o.repeats {
            if qual_exec::signals::interrupted().is_some() {
                d.failures
                    .push(failure("measurement", "interrupted by a signal"));
                return d;
            }
            let phase = prompts::measured_phase(c, r);
            env.report(p, &phase);
            let prompts = match prompts::row_prompts(
                &w.prompt_set_id,
                &phase,
                c,
                contract.prompt_profile,
                LONG_PROMPT_REPETITIONS,
            ) {
                Ok(v) => v,
                Err(e) => {
                    d.failures.push(failure("measurement", e));
                    return d;
                }
            };
            let plan = RowPlan {
                concurrency: c,
                repeat: Some(r),
                phase,
                prompts,
                max_tokens: o.max_tokens,
                seed: o.seed,
                contract,
            };
            let renv = RowEnv {
                rt: env.rt,
                addr: env.server.addr,
                model: env.model,
                sampler: env.sampler,
                metrics_path: o.metrics_path.as_deref(),
                timeout: o.request_timeout,
                epoch: env.epoch,
            };
            let (row, fail) = measure_row(&renv, &plan, &cfg);
            env.rows_done.set(env.rows_done.get() + 1);
            if let Some(f) = fail {
                d.failures.push(f);
            }
            match row {
                Some(row) => {
                    if let Some(ctx) = o.context_tokens {
                        if row.prompt_tokens_max + o.max_tokens > ctx {
                            d.failures.push(failure(
                                "prompt_context",
                                format!(
                                    "{}: {} prompt tokens + {} output tokens exceed the context ceiling {ctx}",
                                    row.phase, row.prompt_tokens_max, o.max_tokens
                                ),
                            ));
                        }
                    }
                    d.runs.push(row)
                }
                None => return d,
            }
        }
    }
    d
}

/// The prompt-context preflight (before any traffic of the profile): the longest prompt of
/// the warmup and of every row, tokenized by the server. `false` stops the profile.
fn preflight(env: &Env, w: &Workload, d: &mut Draft) -> bool {
    let o = env.o;
    let Some(path) = &o.tokenize_path else {
        return true;
    };
    let profile = d.profile.contract().prompt_profile;
    let mut phases: Vec<(String, usize)> = Vec::new();
    if o.warmup > 0 {
        phases.push((prompts::warmup_phase(o.warmup), o.warmup));
    }
    for &c in &o.sizes {
        for r in 0..o.repeats {
            phases.push((prompts::measured_phase(c, r), c));
        }
    }
    let mut max_tokens_seen = 0u64;
    for (phase, n) in &phases {
        let longest = (0..*n)
            .map(|i| prompts::prompt(&w.prompt_set_id, phase, i, profile, LONG_PROMPT_REPETITIONS))
            .max_by_key(|p| p.len())
            .unwrap_or_default();
        let body =
            serde_json::to_vec(&serde_json::json!({"content": longest})).expect("body serializes");
        let got = env
            .rt
            .block_on(qual_serve::client::fetch(
                env.server.addr,
                path,
                Some(body),
                Duration::from_secs(60),
                64 * 1024 * 1024,
            ))
            .and_then(|(status, b)| {
                if status != 200 {
                    return Err(format!("{path} answered http {status}"));
                }
                let v = qual_json::from_slice(&b).map_err(|e| format!("{path}: {e}"))?;
                v.get("tokens")
                    .and_then(|t| t.as_array().map(|a| a.len() as u64))
                    .ok_or(format!("{path} answered without a tokens array"))
            });
        match got {
            Ok(n) => max_tokens_seen = max_tokens_seen.max(n),
            Err(e) => {
                d.failures.push(failure("prompt_context", e));
                return false;
            }
        }
    }
    let headroom = o
        .context_tokens
        .map(|c| c as i64 - max_tokens_seen as i64 - o.max_tokens as i64);
    d.prompt_context = Some(records::PromptContext {
        endpoint: path.clone(),
        checked_prompt_count: phases.len() as u64,
        max_prompt_tokens: max_tokens_seen,
        context_tokens: o.context_tokens,
        min_headroom_tokens: headroom,
    });
    if let Some(h) = headroom.filter(|h| *h < 0) {
        d.failures.push(failure(
            "prompt_context",
            format!(
                "the longest prompt ({max_tokens_seen} tokens) plus {} output tokens is {} tokens above the context ceiling",
                o.max_tokens, -h
            ),
        ));
        return false;
    }
    true
}

/// What one row needs besides its plan.
pub struct RowEnv<'a> {
    /// Runtime for side-channel requests (scrapes).
    pub rt: &'a tokio::runtime::Runtime,
    /// The server.
    pub addr: SocketAddr,
    /// Model id requested.
    pub model: &'a str,
    /// Memory sampler, if one could be started.
    pub sampler: Option<&'a Sampler>,
    /// Prometheus path, if scraped.
    pub metrics_path: Option<&'a str>,
    /// Per-request deadline.
    pub timeout: Duration,
    /// Campaign clock origin.
    pub epoch: Instant,
}

/// One row with its telemetry: scrape, memory reset, requests (all at once), memory
/// snapshot, scrape, then the row record. `None` when the load engine could not run.
pub fn measure_row(
    env: &RowEnv,
    plan: &RowPlan,
    cfg: &GateConfig,
) -> (Option<Row>, Option<Failure>) {
    let scrape = |path: &str| crate::prom::scrape(env.rt, env.addr, path, Duration::from_secs(10));
    let before = env.metrics_path.map(scrape);
    if let Some(s) = env.sampler {
        s.reset();
    }
    let recs = match row::execute(plan, env.addr, env.model, env.timeout, env.epoch) {
        Ok(r) => r,
        Err(e) => return (None, Some(failure("measurement", e))),
    };
    let (memory, mem_fail) = match env.sampler.map(Sampler::snapshot) {
        Some(Ok(m)) => (Some(m), None),
        Some(Err(e)) => (None, Some(failure("memory_sampler", e))),
        None => (None, None),
    };
    let after = env.metrics_path.map(scrape);
    let server = match (before, after) {
        (Some(Ok(b)), Some(Ok(a))) => Some(Ok(crate::prom::delta(&b, &a))),
        (Some(Err(e)), _) | (_, Some(Err(e))) => Some(Err(e)),
        _ => None,
    };
    (
        Some(row::summarize(plan, &recs, memory, server, cfg)),
        mem_fail,
    )
}

/// Publishes `bytes` as `dir/name` through the document layer's exclusive publish
/// (`qual_json::publish`: a temporary file, fsync, then a hard link, which fails rather than
/// replace an existing file; the directory sync is best effort).
pub fn publish(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, CampaignError> {
    use qual_json::PublishError;
    let fin = dir.join(name);
    let opts = qual_json::PublishOptions {
        mode: None,
        require_dir_sync: false,
    };
    qual_json::publish_exclusive(&fin, bytes, opts).map_err(|e| match e {
        PublishError::Exists(p) => CampaignError::Write {
            path: p.display().to_string(),
            reason: "file already exists; refusing to replace it".into(),
        },
        e @ PublishError::BadPath(_) => CampaignError::Write {
            path: fin.display().to_string(),
            reason: e.to_string(),
        },
        PublishError::Io { at, source, .. } => CampaignError::Write {
            path: at.display().to_string(),
            reason: source.to_string(),
        },
    })?;
    Ok(fin)
}

struct Bound {
    engine: EngineIdentity,
    sampler_identity: SamplerIdentity,
    lifecycle: Option<serde_json::Value>,
    lifecycle_passed: Option<bool>,
    model_changed: Option<bool>,
    artifacts_changed: Vec<String>,
    manifest_changed: Option<bool>,
}

fn finalize(o: &CampaignOptions, b: &Bound, d: Draft) -> Receipt {
    let mut failures = d.failures;
    let mut checks = BTreeMap::new();
    let mut check = |name: &str, v: Option<bool>, detail: String, failures: &mut Vec<Failure>| {
        let st = match v {
            None => CheckStatus::NotApplicable,
            Some(true) => CheckStatus::Passed,
            Some(false) => {
                failures.push(failure(name, detail));
                CheckStatus::Failed
            }
        };
        checks.insert(name.to_string(), st);
    };
    check(
        "model_identity_unchanged",
        b.model_changed.map(|c| !c),
        "the model directory changed during the campaign".into(),
        &mut failures,
    );
    let bound_files = !b.engine.executables.is_empty() || !b.engine.runtime_artifacts.is_empty();
    check(
        "runtime_artifact_unchanged",
        bound_files.then_some(b.artifacts_changed.is_empty()),
        format!(
            "changed during the campaign: {}",
            b.artifacts_changed.join(", ")
        ),
        &mut failures,
    );
    check(
        "runtime_manifest_unchanged",
        b.manifest_changed.map(|c| !c),
        "the runtime manifest changed during the campaign".into(),
        &mut failures,
    );
    check(
        "server_shutdown",
        b.lifecycle_passed,
        "the owned server's lifecycle failed (see server_lifecycle)".into(),
        &mut failures,
    );
    let fingerprint = workload_fingerprint(&d.workload);
    let expected = (o.sizes.len() * o.repeats) as u64;
    let mut r = Receipt {
        schema: records::RECEIPT_SCHEMA.into(),
        tool: Tool::current(),
        created_at: records::now_utc(),
        campaign_id: o.campaign_id.clone(),
        engine: b.engine.clone(),
        workload: d.workload,
        workload_fingerprint: fingerprint,
        memory_sampler: b.sampler_identity.clone(),
        metrics_endpoint: o.metrics_path.clone(),
        prompt_context: d.prompt_context,
        warmup: d.warmup,
        completion: Completion {
            expected_run_count: expected,
            completed_run_count: d.runs.len() as u64,
            failures: Vec::new(),
            finalization_checks: checks,
        },
        runs: d.runs,
        server_lifecycle: b.lifecycle.clone(),
        reference_role: o.reference_role.name().into(),
        comparison: None,
        verdict: Verdict::Failed,
        receipt_sha256: String::new(),
    };
    if let (Some(dir), Some(reng)) = (&o.reference_dir, &o.reference_engine) {
        // Canonical, so that `verify` can re-pair from any working directory.
        let dir = std::fs::canonicalize(dir).unwrap_or(dir.clone());
        let path = dir.join(records::receipt_name(d.profile, reng));
        if r.runs.len() as u64 == expected {
            match pairing::compare(&r, &path, o.reference_role) {
                Ok(c) => r.comparison = Some(c),
                Err(e) => failures.push(failure("reference_comparison", e)),
            }
        } else {
            failures.push(failure(
                "reference_comparison",
                "not every run completed; nothing was compared",
            ));
        }
    }
    r.completion.failures = failures;
    r.verdict = receipt_verdict(&r);
    r.receipt_sha256 = records::self_hash(&r, "receipt_sha256");
    r
}

/// A receipt's verdict from its content (also used by `verify`).
pub fn receipt_verdict(r: &Receipt) -> Verdict {
    let comparison_ok = r.comparison.as_ref().is_none_or(|c| {
        c.result == records::Match::Matched || c.verdict_effect == VerdictEffect::EvidenceOnly
    });
    Verdict::of(
        r.completion.failures.is_empty()
            && r.completion
                .finalization_checks
                .values()
                .all(|s| *s != CheckStatus::Failed)
            && r.completion.completed_run_count == r.completion.expected_run_count
            && r.runs.len() as u64 == r.completion.expected_run_count
            && r.runs.iter().all(|x| x.verdict == Verdict::Passed)
            && r.warmup.outcome == Verdict::Passed
            && comparison_ok,
    )
}

/// What is bound before traffic: the model, runtime artifacts and the runtime manifest.
type Identities = (
    Option<records::ModelIdentity>,
    Vec<records::FileDigest>,
    Option<records::ManifestBinding>,
);

fn bind_identity(o: &CampaignOptions) -> Result<Identities, Vec<String>> {
    let mut errs = Vec::new();
    let model = o.model_path.as_ref().and_then(|p| {
        identity::model_identity(p, None)
            .map_err(|e| errs.push(format!("failed to fingerprint the model: {e}")))
            .ok()
    });
    let mut artifacts = Vec::new();
    for a in &o.runtime_artifacts {
        match identity::digest_file(a) {
            Ok(d) => artifacts.push(d),
            Err(e) => errs.push(format!("failed to bind runtime artifact: {e}")),
        }
    }
    let manifest = o.runtime_manifest.as_ref().and_then(|m| {
        manifest::bind(m)
            .map_err(|e| errs.push(format!("failed to bind the runtime manifest: {e}")))
            .ok()
    });
    if errs.is_empty() {
        Ok((model, artifacts, manifest))
    } else {
        Err(errs)
    }
}

/// Runs a campaign and publishes its receipts and summary.
pub fn run(o: &CampaignOptions) -> Result<CampaignOutcome, CampaignError> {
    run_observed(o, &NoProgress)
}

/// [`run`], telling `progress` about every warmup and row before it is dispatched.
pub fn run_observed(
    o: &CampaignOptions,
    progress: &dyn CampaignProgress,
) -> Result<CampaignOutcome, CampaignError> {
    let errs = check_options(o);
    if !errs.is_empty() {
        return Err(CampaignError::Options(errs));
    }
    let (model_identity, artifacts, manifest) = bind_identity(o).map_err(CampaignError::Options)?;
    // An NVML device needs no server pid: it is resolved before the server starts, so a GPU
    // that is not there (no library, no device, a failed init) is refused by name before any
    // traffic. The other sources are resolved once the server's pid is known.
    let mut early_source = match &o.memory {
        SourceRequest::Nvml(_) => Some(
            memory::resolve(&o.memory, None)
                .map_err(|e| CampaignError::Options(vec![format!("failed to {e}")]))?,
        ),
        _ => None,
    };
    match std::fs::create_dir(&o.out_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && o.out_dir.is_dir() => {}
        Err(e) => {
            return Err(CampaignError::Options(vec![format!(
                "failed to create the out dir {}: {}",
                qual_json::escape_path(&o.out_dir),
                qual_json::show::io_error(&e)
            )]))
        }
    }
    let epoch = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CampaignError::Options(vec![format!("failed to start a runtime: {e}")]))?;
    let interval = Duration::from_millis(o.memory_interval_ms);
    let started = start_server(o, &rt, epoch);
    let mut drafts: Vec<Draft> = Vec::new();
    let mut lines: Vec<ProfileLine> = Vec::new();
    let mut sampler_identity =
        memory::unavailable(o.memory_interval_ms, "the server did not start");
    let mut engine = EngineIdentity {
        name: o.engine.clone(),
        base_url: String::new(),
        available_models: Vec::new(),
        model_identity: model_identity.clone(),
        executables: Vec::new(),
        runtime_artifacts: artifacts.clone(),
        runtime_manifest: manifest.clone(),
        launch_recipe: None,
    };
    let (lifecycle, lifecycle_passed) = match started {
        Err((reason, lc)) => {
            for p in &o.profiles {
                let model = o.model.as_deref().unwrap_or("");
                drafts.push(failed_draft(o, *p, model, reason.clone()));
            }
            let owned = matches!(o.server, ServerSpec::Owned { .. });
            (lc, owned.then_some(false))
        }
        Ok((mut server, ids)) => {
            engine.base_url = server.base_url.clone();
            engine.available_models = ids.clone();
            if let Some((b, exes)) = &server.launch {
                engine.launch_recipe = Some(b.clone());
                engine.executables = exes.clone();
            }
            let model = o.model.clone().unwrap_or_else(|| ids[0].clone());
            let source = match early_source.take() {
                Some(s) => Ok(s),
                None => memory::resolve(&o.memory, server.pid),
            };
            let sampler = match &source {
                Ok(s) => {
                    sampler_identity = s.identity(o.memory_interval_ms);
                    Some(Sampler::start(s.clone(), interval))
                }
                Err(e) => {
                    sampler_identity = memory::unavailable(o.memory_interval_ms, &e.to_string());
                    None
                }
            };
            let env = Env {
                o,
                rt: &rt,
                server: &server,
                model: &model,
                sampler: sampler.as_ref(),
                epoch,
                progress,
                rows_done: std::cell::Cell::new(0),
            };
            run_profiles(&env, &ids, &mut drafts, &mut lines);
            drop(sampler);
            match server.owned.take() {
                Some(s) => {
                    let rec = s.shutdown();
                    let passed = rec.passed;
                    (serde_json::to_value(rec).ok(), Some(passed))
                }
                None => (None, None),
            }
        }
    };
    let (artifacts_changed, model_changed, manifest_changed) =
        bindings_changed(o, &engine, model_identity.as_ref(), manifest.as_ref());
    let bound = Bound {
        artifacts_changed,
        model_changed,
        manifest_changed,
        engine,
        sampler_identity: sampler_identity.clone(),
        lifecycle,
        lifecycle_passed,
    };
    let receipts: Vec<Receipt> = drafts.into_iter().map(|d| finalize(o, &bound, d)).collect();
    publish_all(o, receipts, lines, sampler_identity)
}

/// A profile's draft that failed before any traffic: its workload, a failed warmup, `why`
/// as its `server_startup` failure.
fn failed_draft(o: &CampaignOptions, p: Profile, model: &str, why: String) -> Draft {
    Draft {
        profile: p,
        workload: workload(o, p, model),
        prompt_context: None,
        warmup: Warmup {
            requests: o.warmup as u64,
            max_tokens: o.max_tokens.min(16),
            outcome: Verdict::Failed,
            errors: Vec::new(),
        },
        runs: Vec::new(),
        failures: vec![failure("server_startup", why)],
    }
}

/// Runs every profile on the started server, in order; under fail-fast the profiles after a
/// failed one are listed as not run.
fn run_profiles(env: &Env, ids: &[String], drafts: &mut Vec<Draft>, lines: &mut Vec<ProfileLine>) {
    let (o, model) = (env.o, env.model);
    let mut blocked: Option<Profile> = None;
    let unserved = (!ids.iter().any(|i| i == model)).then(|| {
        format!(
            "model {} is not served (served: {})",
            qual_json::show::quote(model),
            qual_json::show::list(ids)
        )
    });
    for p in &o.profiles {
        if let Some(b) = blocked {
            lines.push(ProfileLine {
                profile: *p,
                status: ProfileStatus::NotRunAfterFailure,
                receipt: None,
                receipt_sha256: None,
                verdict: None,
                blocked_by_profile: Some(b),
            });
            continue;
        }
        let d = match &unserved {
            None => run_profile(env, *p),
            Some(why) => failed_draft(o, *p, model, why.clone()),
        };
        let failed = !d.failures.is_empty()
            || d.runs.iter().any(|r| r.verdict == Verdict::Failed)
            || d.runs.len() != o.sizes.len() * o.repeats;
        if failed && o.policy == ExecutionPolicy::FailFast {
            blocked = Some(*p);
        }
        drafts.push(d);
    }
}

/// Whether the bound executables and artifacts, the model and the runtime manifest changed
/// during the campaign (`None` where nothing was bound).
fn bindings_changed(
    o: &CampaignOptions,
    engine: &EngineIdentity,
    model_identity: Option<&records::ModelIdentity>,
    manifest: Option<&records::ManifestBinding>,
) -> (Vec<String>, Option<bool>, Option<bool>) {
    let artifacts_changed = identity::changed(
        &engine
            .executables
            .iter()
            .chain(&engine.runtime_artifacts)
            .cloned()
            .collect::<Vec<_>>(),
    );
    let model_changed = o.model_path.as_ref().zip(model_identity).map(|(p, m)| {
        identity::model_identity(p, None).map_or(true, |now| now.content_sha256 != m.content_sha256)
    });
    let manifest_changed = o
        .runtime_manifest
        .as_ref()
        .zip(manifest)
        .map(|(p, m)| manifest::bind(p).map_or(true, |now| now != *m));
    (artifacts_changed, model_changed, manifest_changed)
}

fn publish_all(
    o: &CampaignOptions,
    receipts: Vec<Receipt>,
    blocked_lines: Vec<ProfileLine>,
    sampler_identity: SamplerIdentity,
) -> Result<CampaignOutcome, CampaignError> {
    let mut staged = Vec::new();
    let mut lines = Vec::new();
    for r in &receipts {
        let name = records::receipt_name(r.workload.profile, &o.engine);
        let bytes = records::to_file_bytes(r);
        lines.push(ProfileLine {
            profile: r.workload.profile,
            status: ProfileStatus::Completed,
            receipt: Some(name.clone()),
            receipt_sha256: Some(qual_json::sha256_prefixed(&bytes)),
            verdict: Some(r.verdict),
            blocked_by_profile: None,
        });
        staged.push((name, bytes));
    }
    lines.extend(blocked_lines);
    lines.sort_by_key(|l| l.profile);
    let mut published = Vec::new();
    for (name, bytes) in &staged {
        published.push(publish(&o.out_dir, name, bytes)?);
    }
    let owner = match &o.server {
        ServerSpec::Owned { .. } => ServerOwner::OwnedProcessGroup {
            launch: receipts.iter().find_map(|r| r.engine.launch_recipe.clone()),
        },
        ServerSpec::Attached { server_pid, .. } => ServerOwner::AttachedServer {
            server_pid: *server_pid,
        },
    };
    let verdict = Verdict::of(
        lines
            .iter()
            .all(|l| l.status == ProfileStatus::Completed && l.verdict == Some(Verdict::Passed)),
    );
    let mut summary = Summary {
        schema: records::SUMMARY_SCHEMA.into(),
        tool: Tool::current(),
        created_at: records::now_utc(),
        campaign_id: o.campaign_id.clone(),
        prompt_set_id: o.prompt_set_id.clone(),
        engine: o.engine.clone(),
        reference_role: o.reference_role.name().into(),
        reference_dir: o.reference_dir.as_ref().map(|d| {
            std::fs::canonicalize(d)
                .unwrap_or(d.clone())
                .display()
                .to_string()
        }),
        output_evidence: o.evidence.name().into(),
        execution_policy: o.policy,
        memory_sampler: sampler_identity,
        server_owner: owner,
        profiles: lines,
        verdict,
        summary_sha256: String::new(),
    };
    summary.summary_sha256 = records::self_hash(&summary, "summary_sha256");
    let summary_path = publish(
        &o.out_dir,
        &records::summary_name(&o.engine),
        &records::to_file_bytes(&summary),
    )?;
    Ok(CampaignOutcome {
        summary,
        summary_path,
        receipts: published,
    })
}

/// The `qualification-case-result-v1` document for the runner: `passed` iff the summary
/// passed; metrics per profile and size (means over repeats of passed and failed rows
/// alike): `<profile>.c<size>.output_tokens_per_s`, `.requests_per_s`, `.ttft_ms.p50`,
/// `.e2e_ms.p50`, and `.peak_memory_bytes` (largest over repeats).
pub fn case_result(
    out: &CampaignOutcome,
    case_id: &str,
    effective_config: serde_json::Value,
    duration_seconds: f64,
) -> serde_json::Value {
    let mut metrics = Vec::new();
    for p in &out.receipts {
        let Ok((_, r)) = pairing::read_receipt(p) else {
            continue;
        };
        let mut sizes: Vec<u64> = r.runs.iter().map(|x| x.concurrency).collect();
        sizes.dedup();
        for c in sizes {
            let rows: Vec<&Row> = r.runs.iter().filter(|x| x.concurrency == c).collect();
            let mean = |f: &dyn Fn(&Row) -> Option<f64>| {
                let v: Vec<f64> = rows.iter().filter_map(|x| f(x)).collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            };
            let prefix = format!("{}.c{c:03}", r.workload.profile.name());
            let mut push = |name: &str, v: Option<f64>, unit: &str, agg: &str, lower: bool| {
                if let Some(v) = v.filter(|v| v.is_finite()) {
                    metrics.push(serde_json::json!({
                        "name": format!("{prefix}.{name}"),
                        "value": v,
                        "unit": unit,
                        "aggregation": agg,
                        "lower_is_better": lower,
                    }));
                }
            };
            push(
                "output_tokens_per_s",
                mean(&|x| Some(x.output_token_throughput_per_s)),
                "tokens/s",
                "mean",
                false,
            );
            push(
                "requests_per_s",
                mean(&|x| Some(x.request_throughput_per_s)),
                "requests/s",
                "mean",
                false,
            );
            push("ttft_ms.p50", mean(&|x| x.ttft_ms.p50), "ms", "mean", true);
            push("e2e_ms.p50", mean(&|x| x.e2e_ms.p50), "ms", "mean", true);
            let peak = rows
                .iter()
                .filter_map(|x| x.memory.map(|m| m.peak_bytes as f64))
                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
            push("peak_memory_bytes", peak, "bytes", "max", true);
        }
    }
    metrics.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let passed = out.summary.verdict == Verdict::Passed;
    let details = if passed {
        serde_json::Value::Null
    } else {
        let failed: Vec<String> = out
            .summary
            .profiles
            .iter()
            .filter(|l| l.verdict != Some(Verdict::Passed))
            .map(|l| match (l.status, l.verdict) {
                (ProfileStatus::NotRunAfterFailure, _) => {
                    format!("{} (not run after a failure)", l.profile.name())
                }
                _ => format!("{} (failed)", l.profile.name()),
            })
            .collect();
        serde_json::Value::String(format!(
            "campaign failed; profiles not passed: {}",
            failed.join(", ")
        ))
    };
    serde_json::json!({
        "schema_version": 1,
        "case_id": case_id,
        "status": if passed { "passed" } else { "failed" },
        "duration_seconds": duration_seconds,
        "effective_config": effective_config,
        "metrics": metrics,
        "tolerances": [],
        "details": details,
    })
}

/// Why a receipt failed, one line each: completion failures, failed gates per row, and the
/// comparison's mismatches.
pub fn failure_reasons(r: &Receipt) -> Vec<String> {
    let mut v: Vec<String> = r
        .completion
        .failures
        .iter()
        .map(|f| format!("{}: {}", f.phase, f.detail))
        .collect();
    for row in &r.runs {
        for g in row.gates.iter().filter(|g| g.outcome == Verdict::Failed) {
            v.push(format!("{} gate {}: {}", row.phase, g.name, g.detail));
        }
    }
    if let Some(c) = r
        .comparison
        .as_ref()
        .filter(|c| c.result == records::Match::Mismatched)
    {
        v.push(format!(
            "{} mismatch(es) with the reference {} ({})",
            c.mismatches.len(),
            c.reference_engine,
            c.reference_receipt
        ));
    }
    if r.warmup.outcome == Verdict::Failed && v.is_empty() {
        v.push("the warmup failed".into());
    }
    v
}
