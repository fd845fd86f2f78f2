//! Telemetry around each run, outside its timed window: the server's Prometheus counters
//! scraped before and after (`--metrics-path`; deltas checked against the client's own
//! counts where they overlap) and the device or process memory sampled during it
//! (`--memory-source`). Both are the campaign's (`qual_campaign::prom`,
//! `qual_campaign::memory`); this module owns when they are taken and what a run records.
//! The sampler is its own thread reading a counter every interval; nothing here runs on
//! the load engine's thread.

use qual_campaign::memory::{Sampler, Source};
use qual_campaign::prom::{self, Accounting};
use qual_campaign::records::{MemorySnapshot, SamplerIdentity, ServerMetricsDelta};
use qual_serve::client::Target;
use qual_serve::record::RequestRecord;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// What to take around each run (nothing by default).
pub struct Telemetry {
    metrics: Option<Scraper>,
    memory: Option<(Sampler, SamplerIdentity)>,
}

struct Scraper {
    rt: tokio::runtime::Runtime,
    addr: SocketAddr,
    target: Target,
    path: String,
}

/// The server's counters over one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ServerMetrics {
    /// Both scrapes worked.
    Scraped {
        /// The path scraped.
        path: String,
        /// Every counter's delta and the ones read as requests and tokens.
        delta: ServerMetricsDelta,
        /// The overlapping counters against the client's counts (null when the engine has
        /// neither a request nor a token counter the campaign knows).
        accounting: Option<Accounting>,
    },
    /// A scrape failed (the run itself is kept).
    Failed {
        /// The path scraped.
        path: String,
        /// Why (reads after "failed to scrape: ").
        reason: String,
    },
}

/// The memory sampled during one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Memory {
    /// Sampled throughout.
    Sampled {
        /// What was measured.
        source: SamplerIdentity,
        /// Baseline, peak and samples.
        snapshot: MemorySnapshot,
    },
    /// A read failed.
    Failed {
        /// What was measured.
        source: SamplerIdentity,
        /// Why.
        reason: String,
    },
}

/// What [`Telemetry::begin`] took before a run.
pub struct Before(Option<Result<BTreeMap<String, f64>, String>>);

impl Telemetry {
    /// Nothing taken.
    pub fn none() -> Telemetry {
        Telemetry {
            metrics: None,
            memory: None,
        }
    }

    /// Scrapes `path` on `target` around each run.
    pub fn with_metrics(
        mut self,
        addr: SocketAddr,
        target: Target,
        path: &str,
    ) -> Result<Telemetry, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("start the scrape runtime: {e}"))?;
        self.metrics = Some(Scraper {
            rt,
            addr,
            target,
            path: path.to_string(),
        });
        Ok(self)
    }

    /// Samples `source` every `interval` during each run.
    pub fn with_memory(mut self, source: Source, interval: Duration) -> Telemetry {
        let identity = source.identity(interval.as_millis() as u64);
        self.memory = Some((Sampler::start(source, interval), identity));
        self
    }

    /// Before a run: the first scrape and the memory baseline.
    pub fn begin(&self) -> Before {
        if let Some((sampler, _)) = &self.memory {
            sampler.reset();
        }
        Before(self.metrics.as_ref().map(|s| s.scrape()))
    }

    /// After a run over `records`: the second scrape, checked against the successful
    /// requests (warmup included: the scrapes span the whole run) and their output tokens,
    /// and the memory snapshot.
    pub fn end(
        &self,
        before: Before,
        records: &[RequestRecord],
    ) -> (Option<ServerMetrics>, Option<Memory>) {
        let server = self.metrics.as_ref().map(|s| {
            let after = s.scrape();
            match (before.0, after) {
                (Some(Ok(b)), Ok(a)) => {
                    let delta = prom::delta(&b, &a);
                    let ok: Vec<&RequestRecord> =
                        records.iter().filter(|r| r.outcome.is_success()).collect();
                    let tokens: u64 = ok
                        .iter()
                        .filter_map(|r| r.output_tokens.map(|t| t.value))
                        .sum();
                    let accounting = prom::account(&delta, ok.len() as u64, tokens);
                    ServerMetrics::Scraped {
                        path: s.path.clone(),
                        delta,
                        accounting,
                    }
                }
                (Some(Err(e)), _) | (_, Err(e)) => ServerMetrics::Failed {
                    path: s.path.clone(),
                    reason: e,
                },
                (None, Ok(_)) => ServerMetrics::Failed {
                    path: s.path.clone(),
                    reason: "no scrape before the run".into(),
                },
            }
        });
        let memory = self
            .memory
            .as_ref()
            .map(|(sampler, id)| match sampler.snapshot() {
                Ok(snapshot) => Memory::Sampled {
                    source: id.clone(),
                    snapshot,
                },
                Err(reason) => Memory::Failed {
                    source: id.clone(),
                    reason,
                },
            });
        (server, memory)
    }
}

impl Scraper {
    fn scrape(&self) -> Result<BTreeMap<String, f64>, String> {
        prom::scrape_at(
            &self.rt,
            self.addr,
            &self.target,
            &self.path,
            Duration::from_secs(10),
        )
    }
}
