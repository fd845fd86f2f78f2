//! `kiln-latency-fixture-bench`: a tiny CPU microbenchmark used as a real fixture command in
//! tests. It times a fixed integer workload (one warmup, then the mean of N iterations) and
//! prints human output plus `KILN_LATENCY_METRIC` lines, like Kiln's benchmarks.
//!
//! Usage: `kiln-latency-fixture-bench [--iterations N] [--skip] [--fail] [--extra-metric] [--leak]`.
//! `--leak` leaves a `sleep 30` child behind.
//! `--skip` prints only a skip notice (no metric lines); `--fail` exits 3 after printing.

use std::time::Instant;

fn workload(n: u64) -> u64 {
    let mut acc = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        acc = acc.rotate_left(7) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    acc
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut iterations = 20u32;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--iterations" => {
                iterations = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(20);
                i += 1;
            }
            "--skip" => {
                println!("fixture skipped: no hardware device");
                return;
            }
            _ => {}
        }
        i += 1;
    }
    println!("warmup: {}", workload(10_000));
    let start = Instant::now();
    let mut sink = 0u64;
    for _ in 0..iterations {
        sink ^= workload(100_000);
    }
    let per_iter_ms = start.elapsed().as_secs_f64() * 1e3 / f64::from(iterations.max(1));
    eprintln!("sink={sink}");
    println!("mix_100k                 per_iter={per_iter_ms:.3} ms");
    println!("KILN_LATENCY_METRIC mix_100k_ms {per_iter_ms:.6} ms");
    let throughput = 100_000.0 / (per_iter_ms / 1e3).max(1e-9);
    println!("KILN_LATENCY_METRIC mix_100k_ops_per_s {throughput:.6} ops/s");
    if args.iter().any(|a| a == "--extra-metric") {
        println!("KILN_LATENCY_METRIC undeclared_ms 1.000000 ms");
    }
    if args.iter().any(|a| a == "--leak") {
        // Leave a process behind in our group; the runner must find and kill it.
        let _ = std::process::Command::new("sleep").arg("30").spawn();
    }
    if args.iter().any(|a| a == "--fail") {
        std::process::exit(3);
    }
}
