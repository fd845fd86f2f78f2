//! Campaign overhead per row: everything a campaign does around a row's requests (prompt
//! generation, the row plan, memory reset and snapshot, two Prometheus scrapes, the row
//! record with metrics, gates and full exact-output evidence, and its serialization) against
//! a bare run of the same row's requests through the same load engine (what `serve` sends),
//! both against the zero-compute mock server in the same run, interleaved. Prints the median
//! per-row overhead in ms and whether it stays under the 20 ms budget; never asserts on time
//! (a benchmark, not a test).

use qual_campaign::campaign::{measure_row, RowEnv};
use qual_campaign::memory::{Sampler, Source};
use qual_campaign::profiles::Profile;
use qual_campaign::prompts;
use qual_campaign::records::{self, SloBounds};
use qual_campaign::row::{self, EvidenceMode, GateConfig, RowPlan};
use qual_serve::mock::MockConfig;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let cfg = MockConfig {
            metrics: true,
            ..MockConfig::default()
        };
        qual_serve::mock::run_blocking(cfg, |p| tx.send(p).unwrap()).unwrap();
    });
    let port = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sampler = Sampler::start(
        Source::process_tree(std::process::id()),
        Duration::from_millis(50),
    );
    let cfg = GateConfig {
        max_dispatch_spread_ms: 250.0,
        memory_limit_bytes: u64::MAX,
        slo: SloBounds {
            ttft_ms: 5000.0,
            client_visible_itl_ms: 250.0,
            e2e_ms: 60000.0,
        },
        evidence: EvidenceMode::Full,
        metrics_scraped: true,
    };
    let epoch = Instant::now();
    let env = RowEnv {
        rt: &rt,
        addr,
        model: "kiln-qual-mock",
        sampler: Some(&sampler),
        metrics_path: Some("/metrics"),
        timeout: Duration::from_secs(30),
        epoch,
    };
    for (profile, c, max_tokens) in [
        (Profile::GreedyShort, 8usize, 64u64),
        (Profile::Mixed, 32, 64),
    ] {
        let contract = profile.contract();
        let plan_for = |r: usize| RowPlan {
            concurrency: c,
            repeat: Some(r),
            phase: prompts::measured_phase(c, r),
            prompts: prompts::row_prompts(
                "bench",
                &prompts::measured_phase(c, r),
                c,
                contract.prompt_profile,
                61,
            )
            .unwrap(),
            max_tokens,
            seed: 17,
            contract,
        };
        let (mut bare, mut full) = (Vec::new(), Vec::new());
        for r in 0..41 {
            // Bare: the same row's requests through the load engine, nothing else.
            let plan = plan_for(r);
            let t = Instant::now();
            let recs = row::execute(
                &plan,
                addr,
                "kiln-qual-mock",
                Duration::from_secs(30),
                epoch,
            )
            .unwrap();
            bare.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(recs.iter().all(|x| x.outcome.is_success()));
            // Campaign: prompts, plan, telemetry, row record and its serialization.
            let t = Instant::now();
            let plan = plan_for(r);
            let (row, fail) = measure_row(&env, &plan, &cfg);
            let bytes = records::to_file_bytes(&row.expect("row ran"));
            full.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(fail.is_none() && !bytes.is_empty());
        }
        let (b, f) = (median(bare), median(full));
        let overhead = f - b;
        println!(
            "campaign_overhead {} c={c} max_tokens={max_tokens}: bare row {b:.2} ms, campaign row {f:.2} ms, overhead {overhead:.2} ms per row ({:.2}x), budget 20 ms: {}",
            profile.name(),
            f / b,
            if overhead < 20.0 { "ok" } else { "EXCEEDED" }
        );
    }
}
