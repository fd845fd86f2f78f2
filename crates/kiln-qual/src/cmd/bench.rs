//! `kiln-qual bench` and `kiln-qual bench compare`: argument parsing and printing. The load
//! engine is qual-serve's; workloads, sweeps, search, statistics and outputs live in
//! qual-bench.
//!
//! Exit codes (the table in docs/bench.md; constants in `crate::exit`): 0 the benchmark ran,
//! some run is valid and no run failed more requests than `--max-failure-rate`; 1 the
//! workload, tokenizer file or target failed; 2 usage errors (no tokenizer at all for a
//! workload that needs one among them); 5 the server failed (measured requests failed above
//! the allowed rate, none succeeded, or its `--metrics-path` counters account for less than
//! the client saw); 6 the measurement was refused (every run by the validity gate, or
//! nothing measured); 7 an output could not be written (refused before anything ran, or its
//! write failed); 130 when SIGINT/SIGTERM stopped it (the points finished so far are
//! summarised and written). After a run the first of 7, 5, 6 that applies wins; the outputs
//! are written in every case.
//!
//! Output files (`--output`, `--csv`, `--records`) are checked before anything else happens:
//! each must not exist, its directory must, and no two may be the same path; `--json` prints
//! the result document on stdout (the human summary is on stderr). The tokenizer is the
//! `--tokenizer` file or, without one, the server's `/tokenize`; which one is said on stderr
//! and recorded in the result's workload (`tokenizer`).

use crate::exit;
use crate::output::{self, err, errln, esc, esc_path, outln};
use clap::{Args, Subcommand};
use qual_bench::run::{self, BenchConfig, Point, Search, HEADLINE};
use qual_bench::stats;
use qual_bench::telemetry::{Memory, ServerMetrics, Telemetry};
use qual_bench::tokenizer::Tok;
use qual_bench::workload::{self, BodyOptions, Lengths, Synthetic, Workload};
use qual_serve::client::{Target, Tls};
use qual_serve::load::{EarlyStop, EngineOptions, TokenCounter};
use qual_serve::record::Endpoint;
use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::args::{count, f64_in, seconds_in};
use super::serve::{ArrivalKind, LoadArgs};

/// Endpoint flavour.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointKind {
    /// `/v1/chat/completions`
    Chat,
    /// `/v1/completions`
    Completions,
}

/// Arguments of `kiln-qual bench`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// Server root URL: `http[s]://HOST[:PORT][/PREFIX]` (a trailing `/v1` is accepted).
    #[arg(long, value_name = "URL")]
    #[arg(help_heading = "Target")]
    pub url: Option<String>,
    /// Model id (default: the first id served by /v1/models).
    #[arg(long)]
    #[arg(help_heading = "Target")]
    pub model: Option<String>,
    /// Environment variable holding an API key, sent as `Authorization: Bearer` (the key is
    /// never printed or recorded; the result says only that one was present).
    #[arg(long, value_name = "VAR")]
    #[arg(help_heading = "Target")]
    pub api_key_env: Option<String>,
    /// An extra request header `NAME:VALUE`, sent on every request (repeatable; the names
    /// are recorded, the values never: they may be credentials).
    #[arg(long = "header", value_name = "NAME:VALUE", value_parser = super::args::header)]
    #[arg(help_heading = "Target")]
    pub headers: Vec<(String, String)>,
    /// Extra trusted CA certificates (PEM) for an https URL, beside the system's roots.
    #[arg(value_parser = super::args::Path, long, value_name = "PEM")]
    #[arg(help_heading = "Target")]
    pub ca_cert: Option<PathBuf>,
    /// Endpoint.
    #[arg(long, value_enum, default_value = "chat")]
    #[arg(help_heading = "Target")]
    pub endpoint: EndpointKind,
    /// Send non-streamed requests (only E2E and throughput are defined then).
    #[arg(long)]
    #[arg(help_heading = "Target")]
    pub no_stream: bool,
    /// Tokenizer for exact-length prompts and client-side counts: a `tokenizer.json`, a
    /// Hugging Face model or tokenizer directory holding one, or the GGUF tokenizer view
    /// `tools/gguf_sidecars.py` writes beside a GGUF (default: the server's own `/tokenize`,
    /// as llama.cpp, vLLM and SGLang serve it).
    #[arg(value_parser = super::args::Path, long, value_name = "FILE")]
    #[arg(help_heading = "Workload")]
    pub tokenizer: Option<PathBuf>,
    /// Prompt lengths in tokens: `N`, `uniform:MIN:MAX`, `normal:MEAN:SD`, `file:PATH`.
    #[arg(long, default_value = "128", value_parser = Lengths::parse)]
    #[arg(help_heading = "Workload")]
    pub input_tokens: Lengths,
    /// Output lengths (`max_tokens`), same forms.
    #[arg(long, default_value = "64", value_parser = Lengths::parse)]
    #[arg(help_heading = "Workload")]
    pub output_tokens: Lengths,
    /// Shared prefixes `COUNT:TOKENS`: request i starts with prefix i mod COUNT.
    #[arg(long, value_name = "COUNT:TOKENS", value_parser = shared_prefix)]
    #[arg(help_heading = "Workload")]
    pub shared_prefix: Option<(usize, u64)>,
    /// Turns per conversation (history carried; per-turn metrics).
    #[arg(long, default_value_t = 1, value_parser = count::<usize>(1..=1000))]
    #[arg(help_heading = "Workload")]
    pub turns: usize,
    /// Distinct synthetic sessions generated (default: --requests).
    #[arg(long, value_parser = count::<usize>(1..=10_000_000))]
    #[arg(help_heading = "Workload")]
    pub sessions: Option<usize>,
    /// ShareGPT-style conversations (JSONL) to replay.
    #[arg(value_parser = super::args::Path, long, value_name = "FILE", conflicts_with_all = ["lengths_file", "trace"])]
    #[arg(help_heading = "Workload")]
    pub sharegpt: Option<PathBuf>,
    /// Prompt/output-length list (JSONL `{"input_length", "output_length"}`).
    #[arg(value_parser = super::args::Path, long, value_name = "FILE", conflicts_with = "trace")]
    #[arg(help_heading = "Workload")]
    pub lengths_file: Option<PathBuf>,
    /// Trace to replay (JSONL `{"timestamp" (ms), "input_length", "output_length",
    /// "hash_ids"?}`; lines sharing a hash id share that prompt block).
    #[arg(value_parser = super::args::Path, long, value_name = "FILE")]
    #[arg(help_heading = "Workload")]
    pub trace: Option<PathBuf>,
    /// Tokens per `hash_ids` block of a trace or length list (the Mooncake traces' 512).
    #[arg(long, default_value_t = 512, value_parser = count::<u64>(1..=1 << 20))]
    #[arg(help_heading = "Workload")]
    pub trace_block_size: u64,
    /// Trace time scale (0.5 replays twice as fast).
    #[arg(long, default_value = "1", value_parser = f64_in(0.0..=1000.0), requires = "trace")]
    #[arg(help_heading = "Workload")]
    pub trace_time_scale: f64,
    /// Send `ignore_eos: true` (servers that support it produce exactly max_tokens).
    #[arg(long)]
    #[arg(help_heading = "Workload")]
    pub ignore_eos: bool,
    /// Sampling temperature sent with every request.
    #[arg(long, value_parser = f64_in(0.0..=100.0))]
    #[arg(help_heading = "Workload")]
    pub temperature: Option<f64>,
    /// Closed loop at these concurrencies (a sweep when several: `1,2,4`).
    #[arg(long, value_delimiter = ',', conflicts_with = "rate", value_parser = count::<usize>(1..=65_536))]
    #[arg(help_heading = "Load")]
    pub concurrency: Vec<usize>,
    /// Open loop at these rates, sessions per second (a sweep when several).
    #[arg(long, value_delimiter = ',', value_parser = f64_in(0.001..=1e6))]
    #[arg(help_heading = "Load")]
    pub rate: Vec<f64>,
    /// Measured sessions per run (default 64; with --duration-seconds, a cap, default none).
    #[arg(long, value_parser = count::<usize>(1..=10_000_000))]
    #[arg(help_heading = "Load")]
    pub requests: Option<usize>,
    /// Warmup sessions per run.
    #[arg(long, default_value_t = 2, value_parser = count::<usize>(0..=1_000_000))]
    #[arg(help_heading = "Load")]
    pub warmup: usize,
    /// Stop starting requests this long after measurement began.
    #[arg(long, value_parser = seconds_in(0.001..=604_800.0))]
    #[arg(help_heading = "Load")]
    pub duration_seconds: Option<f64>,
    /// Ramp-up: closed loop starts workers evenly over it; open loop raises the rate linearly.
    #[arg(long, default_value = "0", value_parser = seconds_in(0.0..=86_400.0))]
    #[arg(help_heading = "Load")]
    pub ramp_up_seconds: f64,
    /// Seed of the workload and of Poisson arrivals.
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Load")]
    pub seed: u64,
    /// SLA search: lowest level (concurrency or rate, whichever is given).
    #[arg(long, requires = "search_high")]
    #[arg(help_heading = "SLA search")]
    pub search_low: Option<f64>,
    /// SLA search: highest level.
    #[arg(long, requires = "search_low")]
    #[arg(help_heading = "SLA search")]
    pub search_high: Option<f64>,
    /// SLA search: bracket width at which bisection stops.
    #[arg(long, default_value = "1", value_parser = f64_in(0.0001..=1e6))]
    #[arg(help_heading = "SLA search")]
    pub search_resolution: f64,
    /// SLA search: fraction of measured requests that must meet every SLO.
    #[arg(long, default_value = "0.99", value_parser = f64_in(0.0..=1.0))]
    #[arg(help_heading = "SLA search")]
    pub search_min_attainment: f64,
    /// Early stop when the error rate exceeds this fraction.
    #[arg(long, value_parser = f64_in(0.0..=1.0))]
    #[arg(help_heading = "Early stop")]
    pub early_stop_error_rate: Option<f64>,
    /// Early stop when this fraction of sends lags the schedule by more than --late-send-ms.
    #[arg(long, value_parser = f64_in(0.0..=1.0))]
    #[arg(help_heading = "Early stop")]
    pub early_stop_late_fraction: Option<f64>,
    /// Completions before the early-stop rules apply.
    #[arg(long, default_value_t = 10)]
    #[arg(help_heading = "Early stop")]
    pub early_stop_min_requests: usize,
    /// Percentiles to report.
    #[arg(long, default_value = "50,90,99", value_parser = percentile_list)]
    #[arg(help_heading = "Statistics")]
    pub percentiles: PercentileList,
    /// Runs per load point (the result gives a 95% t-interval over them).
    #[arg(long, default_value_t = 1, value_parser = count::<usize>(1..=1000))]
    #[arg(help_heading = "Statistics")]
    pub repeats: usize,
    /// The largest fraction of a run's measured requests that may fail before the command
    /// exits 5 (default 0: any failed request fails it).
    #[arg(long, default_value = "0", value_parser = f64_in(0.0..=1.0), value_name = "F")]
    #[arg(help_heading = "Statistics")]
    pub max_failure_rate: f64,
    /// Prometheus path scraped before and after every run (`/metrics` for llama.cpp
    /// `--metrics`, vLLM, SGLang); the counters that overlap the client's counts are checked.
    #[arg(long, value_name = "PATH")]
    #[arg(help_heading = "Telemetry")]
    pub metrics_path: Option<String>,
    /// Sample memory during every run: auto, drm, nvml or process-tree (the campaign's
    /// sources; process-tree needs --server-pid).
    #[arg(long, value_enum, value_name = "SOURCE")]
    #[arg(help_heading = "Telemetry")]
    pub memory_source: Option<super::campaign::MemorySourceArg>,
    /// DRM counter file (with --memory-source drm or auto).
    #[arg(long, value_parser = super::args::Path, value_name = "FILE", requires = "memory_source")]
    #[arg(help_heading = "Telemetry")]
    pub memory_path: Option<PathBuf>,
    /// NVML device index (with --memory-source nvml or auto).
    #[arg(long, conflicts_with = "memory_path", requires = "memory_source")]
    #[arg(help_heading = "Telemetry")]
    pub memory_device_index: Option<u32>,
    /// Memory sampling interval, ms (1..=60000).
    #[arg(long, default_value_t = 50, value_parser = count::<u64>(1..=60_000))]
    #[arg(help_heading = "Telemetry")]
    pub memory_sample_ms: u64,
    /// The server's pid, for --memory-source process-tree (or auto without a device counter).
    #[arg(long, value_name = "PID")]
    #[arg(help_heading = "Telemetry")]
    pub server_pid: Option<u32>,
    #[command(flatten)]
    #[command(next_help_heading = "Load engine and gates")]
    pub load: LoadArgs,
    /// Print the result document as JSON on stdout (`--json PATH`, which wrote it to a
    /// file, is deprecated: use --output PATH).
    #[arg(value_parser = super::args::Path, long, value_name = "PATH", num_args = 0..=1)]
    #[arg(help_heading = "Outputs")]
    pub json: Option<Option<PathBuf>>,
    /// Write the result document here (never overwritten; checked before anything runs).
    #[arg(value_parser = super::args::Path, long, value_name = "PATH")]
    #[arg(help_heading = "Outputs")]
    pub output: Option<PathBuf>,
    /// Write the CSV here (never overwritten; checked before anything runs).
    #[arg(value_parser = super::args::Path, long, value_name = "PATH")]
    #[arg(help_heading = "Outputs")]
    pub csv: Option<PathBuf>,
    /// Write the per-request records (JSONL) here (never overwritten; checked before anything
    /// runs).
    #[arg(value_parser = super::args::Path, long, value_name = "PATH")]
    #[arg(help_heading = "Outputs")]
    pub records: Option<PathBuf>,
}

/// `kiln-qual bench` subcommands.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Compare result documents side by side (differences from the first, with intervals).
    Compare {
        /// Two or more result documents (`bench --output`).
        #[arg(value_parser = super::args::Path, required = true, num_args = 2..)]
        results: Vec<PathBuf>,
        /// Print the comparison as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

/// Parsed `--percentiles`.
#[derive(Clone, Debug)]
pub struct PercentileList(pub Vec<f64>);

fn percentile_list(s: &str) -> Result<PercentileList, String> {
    stats::parse_percentiles(s).map(PercentileList)
}

fn shared_prefix(s: &str) -> Result<(usize, u64), String> {
    let (a, b) = s.split_once(':').ok_or("expected COUNT:TOKENS")?;
    let c: usize = a
        .parse()
        .ok()
        .filter(|c| (1..=100_000).contains(c))
        .ok_or("COUNT must be in 1..=100000")?;
    let t: u64 = b
        .parse()
        .ok()
        .filter(|t| (1..=1 << 20).contains(t))
        .ok_or("TOKENS must be in 1..=1048576")?;
    Ok((c, t))
}

/// A parsed `--url`.
struct Url {
    tls: bool,
    host: String,
    port: u16,
    prefix: String,
}

fn parse_url(s: &str) -> Result<Url, String> {
    let (tls, rest) = match (s.strip_prefix("https://"), s.strip_prefix("http://")) {
        (Some(r), _) => (true, r),
        (None, Some(r)) => (false, r),
        _ => return Err("the url must start with http:// or https://".into()),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err("credentials in the url are refused; use --api-key-env".into());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            let port = p
                .parse::<u16>()
                .map_err(|_| "the url's port is not a number in 1..=65535")?;
            (h.to_string(), port)
        }
        _ => (authority.to_string(), if tls { 443 } else { 80 }),
    };
    if host.is_empty() {
        return Err("the url has no host".into());
    }
    let mut prefix = path.trim_end_matches('/').to_string();
    if let Some(p) = prefix.strip_suffix("/v1") {
        prefix = p.to_string();
    }
    if prefix.contains(['?', '#']) {
        return Err("the url must not carry a query or fragment".into());
    }
    Ok(Url {
        tls,
        host,
        port,
        prefix,
    })
}

fn load_workload(a: &BenchArgs, tok: Option<&Tok>) -> Result<Workload, String> {
    let body = BodyOptions {
        endpoint: match a.endpoint {
            EndpointKind::Chat => Endpoint::Chat,
            EndpointKind::Completions => Endpoint::Completions,
        },
        ignore_eos: a.ignore_eos,
        temperature: a.temperature,
    };
    let need = |what: &str| format!("{what} needs --tokenizer (exact token lengths)");
    let r = if let Some(p) = &a.sharegpt {
        let fallback = match &a.output_tokens {
            Lengths::Fixed { n } => *n,
            _ => 64,
        };
        workload::sharegpt(p, tok, &body, a.turns.max(1), fallback)
    } else if let Some(p) = a.trace.as_ref().or(a.lengths_file.as_ref()) {
        let tok = tok.ok_or_else(|| need("a trace or length list"))?;
        workload::lengths_file(p, a.trace.is_some(), tok, &body, a.seed, a.trace_block_size)
    } else {
        let tok = tok.ok_or_else(|| need("a synthetic workload"))?;
        workload::synthetic(
            &Synthetic {
                sessions: a.sessions.unwrap_or(a.requests.unwrap_or(64).min(100_000)),
                turns: a.turns,
                input: a.input_tokens.clone(),
                output: a.output_tokens.clone(),
                shared_prefix: a.shared_prefix,
                seed: a.seed,
            },
            tok,
            &body,
        )
    };
    r.map_err(|e| e.to_string())
}

fn points(a: &BenchArgs) -> Vec<Point> {
    if a.trace.is_some() {
        return vec![Point::Trace {
            time_scale: a.trace_time_scale,
        }];
    }
    if !a.rate.is_empty() {
        return a
            .rate
            .iter()
            .map(|&r| Point::Rate {
                rate_per_second: r,
                poisson: a.load.arrival == ArrivalKind::Poisson,
                gamma_shape: (a.load.arrival == ArrivalKind::Gamma).then_some(a.load.gamma_shape),
            })
            .collect();
    }
    let cs = if a.concurrency.is_empty() {
        vec![1]
    } else {
        a.concurrency.clone()
    };
    cs.into_iter()
        .map(|c| Point::Concurrency { concurrency: c })
        .collect()
}

fn resolve(a: &BenchArgs, url: &Url) -> Result<(std::net::SocketAddr, Target, String), String> {
    let bare = url.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<std::net::SocketAddr> = (bare, url.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolve {}: {e}", esc(&url.host)))?
        .collect();
    let addr = addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("resolve {}: no address", esc(&url.host)))?;
    let mut target = Target::plain(addr);
    if url.tls {
        target = target.with_tls(Tls::new(bare, a.ca_cert.as_deref())?);
    } else if a.ca_cert.is_some() {
        return Err("use --ca-cert with an https url".into());
    }
    let default_port = if url.tls { 443 } else { 80 };
    target.host = if url.port == default_port {
        url.host.clone()
    } else {
        format!("{}:{}", url.host, url.port)
    };
    target.base_path = url.prefix.clone();
    for (name, value) in &a.headers {
        target = target
            .with_header(name, value)
            .map_err(|e| format!("use --header {}: {e}", esc(name)))?;
    }
    if let Some(var) = &a.api_key_env {
        let key = std::env::var(var).map_err(|_| {
            format!(
                "the environment variable {} (--api-key-env) is not set",
                esc(var)
            )
        })?;
        target = target.with_bearer(&key)?;
    }
    let model = match &a.model {
        Some(m) => m.clone(),
        // A server that cannot be reached is said as such, not as a model to pass.
        None => run::discover_model(addr, &target).map_err(|why| {
            if why.starts_with("connect: ") || why == "probe timed out" {
                format!(
                    "reach the server at {}: {}; is it running? start it or fix --url",
                    esc(&a.url.clone().unwrap_or_default()),
                    esc(&why)
                )
            } else {
                format!("find the model (pass --model): {}", esc(&why))
            }
        })?,
    };
    Ok((addr, target, model))
}

/// Runs `kiln-qual bench`.
pub fn run(a: BenchArgs) -> i32 {
    if let Some(BenchCommand::Compare { results, json }) = &a.command {
        return compare(results, *json);
    }
    let Some(url_text) = a.url.clone() else {
        errln!("kiln-qual: failed to start the benchmark: --url is required");
        return exit::USAGE;
    };
    let url = match parse_url(&url_text) {
        Ok(u) => u,
        Err(e) => {
            errln!("kiln-qual: failed to parse --url: {}", esc(&e));
            return exit::USAGE;
        }
    };
    let outputs = match output_files(&a) {
        Ok(o) => o,
        Err(e) => {
            errln!("kiln-qual: failed to start the benchmark: {e}");
            return exit::OUTPUT_FAILED;
        }
    };
    // The memory source first: a GPU or counter that is not there is refused by name before
    // the server is contacted at all (model discovery and /tokenize included).
    let memory = match memory_source(&a) {
        Ok(m) => m,
        Err(e) => {
            errln!("kiln-qual: failed to set up the telemetry: {}", esc(&e));
            return exit::FAILED;
        }
    };
    let (addr, target, model) = match resolve(&a, &url) {
        Ok(x) => x,
        Err(e) => {
            errln!("kiln-qual: failed to {e}");
            return exit::FAILED;
        }
    };
    let tok = match tokenizer(&a, addr, &target, &model) {
        Ok(t) => t.map(Arc::new),
        Err(code) => return code,
    };
    let wl = match load_workload(&a, tok.as_deref()) {
        Ok(w) => w,
        Err(e) => {
            errln!("kiln-qual: failed to build the workload: {}", esc(&e));
            return exit::FAILED;
        }
    };
    let points = points(&a);
    let search = a.search_low.zip(a.search_high).map(|(low, high)| Search {
        low: low.min(high),
        high: low.max(high),
        resolution: a.search_resolution,
        min_attainment: a.search_min_attainment,
    });
    let slo = a.load.slo();
    if search.is_some() && !slo.is_declared() {
        errln!("kiln-qual: failed to start the search: declare at least one --slo-* bound");
        return exit::USAGE;
    }
    let cfg = BenchConfig {
        addr,
        url: url_text,
        target,
        model,
        points,
        search,
        warmup: a.warmup,
        measured: a.requests.unwrap_or(if a.duration_seconds.is_some() {
            10_000_000
        } else {
            64
        }),
        seed: a.seed,
        max_in_flight: a.load.max_in_flight,
        request_timeout: a.load.request_timeout(),
        rules: a.load.rules(),
        pin_cpu: a.load.pin_cpu,
        realtime_reader: a.load.realtime_reader,
        engine: engine_options(&a, tok.as_ref()),
        slo,
        validity: a.load.gate.limits(),
        percentiles: a.percentiles.0.clone(),
        repeats: a.repeats,
        max_failure_rate: a.max_failure_rate,
    };
    if let Err(e) = qual_exec::signals::install_forwarding() {
        errln!("kiln-qual: failed to install signal forwarding: {e}");
        return exit::FAILED;
    }
    let bar = Arc::new(crate::progress::Bar::requests());
    let sink = bar
        .is_shown()
        .then(|| bar.clone() as Arc<dyn qual_serve::load::ProgressSink>);
    let telemetry = match telemetry(&a, &cfg, memory) {
        Ok(t) => t,
        Err(e) => {
            errln!("kiln-qual: failed to set up the telemetry: {}", esc(&e));
            return exit::FAILED;
        }
    };
    let result = run::bench(&cfg, &wl, &telemetry, sink);
    bar.finish();
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            errln!("kiln-qual: failed to run the benchmark: {}", esc(&e));
            return exit::FAILED;
        }
    };
    if qual_exec::signals::interrupted().is_some() {
        errln!("kiln-qual: interrupted; the points finished so far are reported and written");
    }
    if !crate::output::quiet() {
        err!("{}", summary(&result, &cfg));
    }
    let written = write_outputs(&outputs, &result, &cfg);
    if a.json == Some(None) {
        output::print_json(&result);
    }
    let verdict = verdict_code(&result);
    // An output that could not be written outranks the verdict (docs/bench.md, "Exit codes").
    if written != exit::OK {
        written
    } else {
        verdict
    }
}

/// The exit code of the verdict (docs/bench.md, "Failures and exit codes"), said on stderr.
fn verdict_code(result: &run::BenchResult) -> i32 {
    match &result.verdict {
        run::Verdict::Passed => exit::OK,
        run::Verdict::ServerFailed { reasons } => {
            for r in reasons {
                errln!("kiln-qual: the server failed: {}", esc(r));
            }
            if result
                .points
                .iter()
                .flat_map(|p| &p.runs)
                .any(|r| r.metrics.failed_requests > 0)
            {
                errln!("kiln-qual: a failed request fails the benchmark; --max-failure-rate F allows that fraction of a run's measured requests to fail");
            }
            exit::SERVER_FAILED
        }
        run::Verdict::MeasurementRefused { reason } => {
            errln!("kiln-qual: measurement refused: {}", esc(reason));
            exit::MEASUREMENT_REFUSED
        }
    }
}

/// The memory source `--memory-source` asks for (none without the flag), resolved.
fn memory_source(a: &BenchArgs) -> Result<Option<qual_campaign::memory::Source>, String> {
    let Some(src) = a.memory_source else {
        return Ok(None);
    };
    let req = super::campaign::memory_request(src, a.memory_path.clone(), a.memory_device_index)?;
    qual_campaign::memory::resolve(&req, a.server_pid)
        .map(Some)
        .map_err(|e| format!("use --memory-source: {e}"))
}

/// The scrapes and memory sampling asked for (`--metrics-path`, `--memory-source`).
fn telemetry(
    a: &BenchArgs,
    cfg: &BenchConfig,
    memory: Option<qual_campaign::memory::Source>,
) -> Result<Telemetry, String> {
    let mut t = Telemetry::none();
    if let Some(path) = &a.metrics_path {
        if !path.starts_with('/') {
            return Err(format!("--metrics-path {} must start with /", esc(path)));
        }
        t = t.with_metrics(cfg.addr, cfg.target.clone(), path)?;
    }
    if let Some(source) = memory {
        t = t.with_memory(source, Duration::from_millis(a.memory_sample_ms));
    }
    Ok(t)
}

/// The load engine's options: streaming, ramp-up, duration, early stop, token counting.
fn engine_options(a: &BenchArgs, tok: Option<&Arc<Tok>>) -> EngineOptions {
    EngineOptions {
        target: None,
        stream: !a.no_stream,
        ramp_up: Duration::from_secs_f64(a.ramp_up_seconds),
        duration: a.duration_seconds.map(Duration::from_secs_f64),
        early_stop: (a.early_stop_error_rate.is_some() || a.early_stop_late_fraction.is_some())
            .then_some(EarlyStop {
                max_error_fraction: a.early_stop_error_rate,
                max_late_send_fraction: a.early_stop_late_fraction,
                late_send_ms: a.load.gate.late_send_ms,
                min_requests: a.early_stop_min_requests,
            }),
        trace_time_scale: None,
        // The server's tokenizer never counts during a measurement (each count would be a
        // request to the server under test); the server's usage counts then.
        token_counter: tok
            .filter(|t| !t.is_server())
            .cloned()
            .map(|t| TokenCounter(Arc::new(move |s: &str| t.count(s)))),
    }
}

/// The files the benchmark writes: `--output` (or the deprecated `--json PATH`), `--csv`,
/// `--records`.
struct Outputs {
    result: Option<PathBuf>,
    csv: Option<PathBuf>,
    records: Option<PathBuf>,
}

/// Checks the output files before anything runs (each must not exist, its directory must,
/// no two the same); says so when the deprecated `--json PATH` names one.
fn output_files(a: &BenchArgs) -> Result<Outputs, String> {
    let result = match (&a.output, &a.json) {
        (Some(_), Some(Some(_))) => {
            return Err("--output and --json PATH both name the result file; keep --output".into())
        }
        (Some(p), _) => Some(p.clone()),
        (None, Some(Some(p))) => {
            errln!("kiln-qual: warning: --json PATH is deprecated (--json now prints the result on stdout); use --output PATH");
            Some(p.clone())
        }
        (None, _) => None,
    };
    let o = Outputs {
        result,
        csv: a.csv.clone(),
        records: a.records.clone(),
    };
    let named = [
        ("--output", &o.result),
        ("--csv", &o.csv),
        ("--records", &o.records),
    ];
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    for (flag, p) in named {
        let Some(p) = p else { continue };
        if std::fs::symlink_metadata(p).is_ok() {
            return Err(format!(
                "{flag} {} already exists (outputs are never overwritten; remove it or choose another path)",
                esc_path(p)
            ));
        }
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(format!(
                "{flag} {}: the directory {} does not exist (create it first)",
                esc_path(p),
                esc_path(&dir)
            ));
        }
        let abs = std::path::absolute(p).unwrap_or_else(|_| p.clone());
        if let Some((other, _)) = seen.iter().find(|(_, q)| *q == abs) {
            return Err(format!(
                "{flag} and {other} name the same file {}",
                esc_path(p)
            ));
        }
        seen.push((flag, abs));
    }
    Ok(o)
}

/// The tokenizer: the `--tokenizer` file, else (for a workload that needs exact lengths) the
/// server's `/tokenize`, else `Err(2)` with the fix. Says on stderr which one is used.
fn tokenizer(
    a: &BenchArgs,
    addr: std::net::SocketAddr,
    target: &Target,
    model: &str,
) -> Result<Option<Tok>, i32> {
    if let Some(p) = &a.tokenizer {
        return match Tok::load(p) {
            Ok(t) => {
                errln!(
                    "tokenizer: {} ({}, {})",
                    esc_path(t.file.as_deref().unwrap_or(p)),
                    t.kind,
                    t.sha256.as_deref().unwrap_or("")
                );
                Ok(Some(t))
            }
            Err(e) => {
                errln!("kiln-qual: failed to {}", esc(&e.to_string()));
                Err(exit::FAILED)
            }
        };
    }
    if a.sharegpt.is_some() {
        // A conversation replay needs no exact lengths; counts come from the server's usage.
        return Ok(None);
    }
    match Tok::server(addr, target.clone(), model) {
        Err(qual_bench::tokenizer::TokError::NoServerTokenizer(why))
            if why.starts_with("connect: ") =>
        {
            errln!(
                "kiln-qual: failed to reach the server at {}: {}; is it running? start it or fix --url",
                esc(&a.url.clone().unwrap_or_default()),
                esc(&why)
            );
            Err(exit::FAILED)
        }
        Ok(t) => {
            errln!(
                "tokenizer: the server's {} (no --tokenizer; exact lengths as the server counts them)",
                qual_bench::tokenizer::TOKENIZE_PATH
            );
            Ok(Some(t))
        }
        Err(e) => {
            let why = match e {
                qual_bench::tokenizer::TokError::NoServerTokenizer(why) => why,
                other => other.to_string(),
            };
            errln!(
                "kiln-qual: failed to find a tokenizer for exact prompt lengths: no --tokenizer was given and the server offers none ({}); pass --tokenizer FILE (the model's tokenizer.json, or the GGUF view tools/gguf_sidecars.py writes), or bench a server with /tokenize (llama.cpp, vLLM, SGLang)",
                esc(&why)
            );
            Err(exit::USAGE)
        }
    }
}

/// Writes the result, CSV and records files that were asked for (each created new);
/// `exit::OUTPUT_FAILED` when one could not be written.
fn write_outputs(o: &Outputs, result: &run::BenchResult, cfg: &BenchConfig) -> i32 {
    let mut code = exit::OK;
    let writes: [(&Option<PathBuf>, Vec<u8>); 3] = [
        (
            &o.result,
            if o.result.is_some() {
                // serde's pretty format of the typed result (its field order is the format),
                // not `qual_json::to_pretty_json`.
                serde_json::to_vec_pretty(result).unwrap_or_default()
            } else {
                Vec::new()
            },
        ),
        (
            &o.csv,
            if o.csv.is_some() {
                run::csv(result, &cfg.percentiles).into_bytes()
            } else {
                Vec::new()
            },
        ),
        (
            &o.records,
            if o.records.is_some() {
                run::records_jsonl(result).into_bytes()
            } else {
                Vec::new()
            },
        ),
    ];
    for (path, bytes) in writes {
        if let Some(p) = path {
            match qual_json::publish::write_new(p, &bytes) {
                Ok(()) => errln!("kiln-qual: wrote {}", esc_path(p)),
                Err(e) => {
                    errln!("kiln-qual: failed to write {}: {e}", esc_path(p));
                    code = exit::OUTPUT_FAILED;
                }
            }
        }
    }
    code
}

fn fmt(v: Option<f64>) -> String {
    match v {
        Some(x) if x.abs() >= 100.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.3}"),
        None => "-".into(),
    }
}

/// A run's failed requests by kind: the count, then one example (its index in `--records`
/// and its reason).
fn failure_lines(label: &str, run: &run::RunResult) -> String {
    let mut s = format!(
        "{label} run {}: {} of {} measured requests failed:\n",
        run.repeat, run.metrics.failed_requests, run.metrics.measured_requests
    );
    for g in &run.failures {
        s.push_str(&format!(
            "  {} {}, e.g. request {}: {}\n",
            g.count,
            g.kind,
            g.example_index,
            esc(&g.example)
        ));
    }
    s
}

/// A run's server counters and memory, when they were taken.
fn telemetry_lines(label: &str, run: &run::RunResult) -> String {
    let mut s = String::new();
    match &run.server_metrics {
        Some(ServerMetrics::Scraped {
            path, accounting, ..
        }) => {
            let check = match accounting {
                Some(a) if a.passed => format!("accounts for the client's counts: {}", a.detail),
                Some(a) => format!("accounts for less than the client saw: {}", a.detail),
                None => "no request or token counter known for this engine".into(),
            };
            s.push_str(&format!(
                "{label} run {}: server {path}: {}\n",
                run.repeat,
                esc(&check)
            ));
        }
        Some(ServerMetrics::Failed { path, reason }) => s.push_str(&format!(
            "{label} run {}: server {path}: failed to scrape: {}\n",
            run.repeat,
            esc(reason)
        )),
        None => {}
    }
    match &run.memory {
        Some(Memory::Sampled { source, snapshot }) => s.push_str(&format!(
            "{label} run {}: memory ({}): baseline {} bytes, peak {} (+{}), {} samples\n",
            run.repeat,
            source.source,
            snapshot.baseline_bytes,
            snapshot.peak_bytes,
            snapshot.peak_delta_bytes,
            snapshot.samples
        )),
        Some(Memory::Failed { source, reason }) => s.push_str(&format!(
            "{label} run {}: memory ({}): {}\n",
            run.repeat,
            source.source,
            esc(reason)
        )),
        None => {}
    }
    s
}

fn summary(r: &run::BenchResult, cfg: &BenchConfig) -> String {
    let mut s = format!(
        "workload: {} sessions, {} requests, request set {}\n",
        r.workload["sessions"],
        r.workload["turns"],
        r.workload["request_set_sha256"].as_str().unwrap_or("")
    );
    if !cfg.engine.stream {
        s.push_str("non-streamed requests: only e2e and throughput are defined\n");
    }
    let cols = [
        "point",
        "run",
        "ok",
        "fail",
        "req/s",
        "out tok/s",
        "ttft p50",
        "ttft p99",
        "itl p50",
        "e2e p50",
        "e2e p99",
        "valid",
        "stop",
    ];
    let mut rows = Vec::new();
    for p in &r.points {
        for run in &p.runs {
            let h = |k: &str| fmt(run.headline.get(k).copied().flatten());
            rows.push(vec![
                p.label.clone(),
                run.repeat.to_string(),
                run.metrics.succeeded_requests.to_string(),
                run.metrics.failed_requests.to_string(),
                h("requests_per_second"),
                h("output_tokens_per_second"),
                h("ttft_ms.p50"),
                h("ttft_ms.p99"),
                h("itl_ms.p50"),
                h("e2e_ms.p50"),
                h("e2e_ms.p99"),
                if run.valid { "yes".into() } else { "no".into() },
                match &run.stop {
                    qual_serve::load::StopReason::Completed => "completed".into(),
                    qual_serve::load::StopReason::DurationElapsed { .. } => "duration".into(),
                    qual_serve::load::StopReason::EarlyStop { reason } => {
                        format!("early: {}", esc(reason))
                    }
                    qual_serve::load::StopReason::Interrupted { signal } => {
                        format!("signal {signal}")
                    }
                },
            ]);
            if !run.failures.is_empty() {
                s.push_str(&failure_lines(&p.label, run));
            }
            s.push_str(&telemetry_lines(&p.label, run));
            for reason in &run.invalid_reasons {
                s.push_str(&format!(
                    "{} run {}: {}\n",
                    p.label,
                    run.repeat,
                    esc(reason)
                ));
            }
            let few: Vec<String> = run
                .distributions
                .iter()
                .flat_map(|(name, d)| {
                    d.percentiles
                        .iter()
                        .filter(|x| x.below_minimum && x.n > 0)
                        .map(move |x| format!("{name}.{} (n={} < {})", x.label, x.n, x.min_samples))
                })
                .collect();
            if !few.is_empty() {
                s.push_str(&format!(
                    "{} run {}: below the sample minimum: {}\n",
                    p.label,
                    run.repeat,
                    few.join(", ")
                ));
            }
        }
        if p.runs.len() > 1 {
            for k in ["requests_per_second", "ttft_ms.p50", "e2e_ms.p50"] {
                if let Some(i) = p.intervals.get(k) {
                    s.push_str(&format!(
                        "{} {k}: {} ± {} (95% t-interval, {} runs)\n",
                        p.label,
                        fmt(Some(i.mean)),
                        fmt(i.half_width),
                        i.repeats
                    ));
                }
            }
        }
    }
    s.push_str(&output::table(&cols, &rows));
    if let Some(sr) = &r.search {
        s.push_str(&format!(
            "sla search: knee {} (first failing {}); {}\n",
            fmt(sr.knee),
            fmt(sr.first_failing),
            sr.conclusion
        ));
    }
    s
}

fn compare(paths: &[PathBuf], json: bool) -> i32 {
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let rows = match qual_bench::compare::compare(&refs) {
        Ok(r) => r,
        Err(e) => {
            errln!("kiln-qual: failed to compare: {}", esc(&e));
            return exit::FAILED;
        }
    };
    if json {
        output::print_json(&rows);
        return exit::OK;
    }
    let mut header = vec!["point".to_string(), "metric".to_string()];
    for (i, p) in paths.iter().enumerate() {
        header.push(if i == 0 {
            format!("A {}", esc_path(p))
        } else {
            format!("{} {}", (b'A' + i as u8) as char, esc_path(p))
        });
    }
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut v = vec![r.point.clone(), r.metric.clone()];
            for c in &r.cells {
                let val = c
                    .value
                    .as_ref()
                    .map_or("-".to_string(), |i| match i.half_width {
                        Some(h) => format!("{} ± {}", fmt(Some(i.mean)), fmt(Some(h))),
                        None => fmt(Some(i.mean)),
                    });
                let diff = match (c.difference, c.relative) {
                    (Some(d), Some(rel)) => format!(
                        " ({:+.3}, {:+.1}%{})",
                        d,
                        rel * 100.0,
                        c.difference_half_width
                            .map_or(String::new(), |h| format!(" ± {}", fmt(Some(h))))
                    ),
                    (Some(d), None) => format!(" ({d:+.3})"),
                    _ => String::new(),
                };
                v.push(format!("{val}{diff}"));
            }
            v
        })
        .collect();
    let h: Vec<&str> = header.iter().map(String::as_str).collect();
    outln!("{}", output::table(&h, &table_rows));
    let _ = HEADLINE;
    exit::OK
}
