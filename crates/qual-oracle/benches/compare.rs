//! `oracle compare` throughput: a 50 000-vocabulary × 256-position pair of logits, written as
//! safetensors and `.npy` files, read back and compared on one core. Prints the read time,
//! the comparison time, the comparison's throughput over the bytes of both tensors and the
//! ratio to the 1 GB/s target; it asserts nothing about time (a benchmark prints ratios).

use qual_oracle::compare::{compare, summarize, DEFAULT_TOP_K};
use qual_oracle::tensor::{encode_safetensors, read_tensor_file, Logits};
use std::collections::BTreeMap;
use std::time::Instant;

const VOCAB: usize = 50_000;
const POSITIONS: usize = 256;

/// A deterministic pseudo-random row (xorshift), logits in about −10..15.
fn tensor(seed: u64, noise: f32) -> Logits {
    let mut s = seed | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    let data: Vec<f32> = (0..VOCAB * POSITIONS)
        .map(|i| {
            let base = ((i * 2_654_435_761) % 100_003) as f32 / 4_000.0 - 10.0;
            base + noise * (next() - 0.5)
        })
        .collect();
    Logits {
        positions: POSITIONS,
        vocab: VOCAB,
        data,
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let r = tensor(1, 0.0);
    let c = tensor(2, 0.01);
    let rp = dir.path().join("reference.safetensors");
    let cp = dir.path().join("candidate.npy");
    std::fs::write(&rp, encode_safetensors(&r, None, &BTreeMap::new())).expect("write");
    std::fs::write(
        &cp,
        qual_oracle::npy::encode_f32(&[POSITIONS, VOCAB], &c.data),
    )
    .expect("write");
    let logit_bytes = (2 * POSITIONS * VOCAB * 4) as f64;
    let mut best_read = f64::INFINITY;
    let mut best_cmp = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        let a = read_tensor_file(&rp).expect("read reference");
        let b = read_tensor_file(&cp).expect("read candidate");
        best_read = best_read.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let rows = compare(&a.logits, &b.logits, DEFAULT_TOP_K).expect("compare");
        let s = summarize(&rows, VOCAB, DEFAULT_TOP_K).expect("rows");
        best_cmp = best_cmp.min(t.elapsed().as_secs_f64());
        std::hint::black_box(s);
    }
    let gbps = logit_bytes / best_cmp / 1e9;
    println!(
        "oracle compare {POSITIONS} x {VOCAB} (two f32 tensors, {:.1} MB): read both files {:.1} ms ({:.2} GB/s), compare {:.1} ms ({:.2} GB/s of logits, one core); ratio to the 1 GB/s target {:.2}; compare / read {:.2}",
        logit_bytes / 1e6,
        best_read * 1e3,
        logit_bytes / best_read / 1e9,
        best_cmp * 1e3,
        gbps,
        gbps / 1.0,
        best_cmp / best_read
    );
}
