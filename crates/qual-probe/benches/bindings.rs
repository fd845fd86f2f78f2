//! Binding benchmarks (`cargo bench -p qual-probe --bench bindings`), each against a baseline
//! measured in the same run on the same files:
//!
//! 1. source-tree digest of a generated git repository with 20 000 tracked files (370 MB):
//!    this crate vs the original algorithm in Python (`git ls-files -s -z`, `read_bytes`,
//!    `hashlib.sha256`), when `python3` is available, and against the hashing floor: the same
//!    files hashed by `openssl dgst -sha256` split across the cores (target: at most 1.3x the
//!    floor). The two digests must be equal. The original tools themselves, whole process,
//!    are compared by `scripts/bench-vs-original`.
//! 2. model fingerprint of a generated 2 GiB model directory (4 shards): this crate vs
//!    single-process `sha256sum` over the same files (target: at least 1.6x the throughput).
//!
//! Set `KILN_BENCH_SCALE` (default 1.0) to shrink the generated data, e.g. `0.1` for a smoke
//! run. Everything is generated into a temporary directory that is removed at the end. Files
//! are read once before timing so both sides measure hashing from the page cache.

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use qual_probe::source_tree::{self, SourceTreeProfile};

fn scale() -> f64 {
    std::env::var("KILN_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| *s > 0.0 && *s <= 1.0)
        .unwrap_or(1.0)
}

/// A small deterministic generator (xorshift) so the data does not compress to nothing.
struct Gen(u64);

impl Gen {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            let b = self.0.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }
}

fn git(root: &Path, args: &[&str]) {
    let st = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .status()
        .expect("git runs");
    assert!(st.success(), "git {args:?}");
}

fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..n {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        last = Some(v);
    }
    (best, last.expect("n > 0"))
}

const PY_SOURCE_TREE: &str = r#"
import hashlib, subprocess, sys
root = sys.argv[1]
out = subprocess.run(["git", "-C", root, "ls-files", "-s", "-z"], check=True, capture_output=True).stdout
entries = []
for rec in out.split(b"\0"):
    if not rec:
        continue
    meta, path = rec.split(b"\t", 1)
    path = path.decode("utf-8")
    if path.startswith("qualification/receipts/"):
        continue
    entries.append((meta.split(b" ", 1)[0].decode(), path))
entries.sort(key=lambda e: e[1].encode("utf-8"))
h = hashlib.sha256()
h.update(b"kiln-source-tree-v1\0")
from pathlib import Path
for mode, path in entries:
    data = (Path(root) / path).read_bytes()
    h.update(mode.encode() + b"\0" + path.encode() + b"\0" + str(len(data)).encode() + b"\0" + hashlib.sha256(data).hexdigest().encode() + b"\0")
print("sha256:" + h.hexdigest())
"#;

fn bench_source_tree(dir: &Path, s: f64) {
    let files = ((20_000.0 * s) as usize).max(10);
    let total: usize = (370.0 * 1024.0 * 1024.0 * s) as usize;
    let avg = total / files;
    let root = dir.join("repo");
    std::fs::create_dir_all(&root).unwrap();
    git(&root, &["init", "-q"]);
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let mut buf = vec![0u8; avg * 2];
    let t = Instant::now();
    for i in 0..files {
        let sub = root.join(format!("crates/c{:03}/src", i % 200));
        std::fs::create_dir_all(&sub).unwrap();
        // Sizes vary between 0.5x and 1.5x of the average.
        let len = avg / 2 + (i * 7919) % avg.max(1);
        g.fill(&mut buf[..len]);
        std::fs::File::create(sub.join(format!("f{i:05}.rs")))
            .and_then(|mut f| f.write_all(&buf[..len]))
            .unwrap();
    }
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "bench"]);
    eprintln!(
        "generated {files} files in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let (ours, tree) = best_of(3, || {
        source_tree::compute(&root, SourceTreeProfile::Generic).unwrap()
    });
    let bytes: u64 = tree.files.iter().map(|f| f.bytes).sum();
    println!(
        "source-tree digest: {} files, {:.0} MB in {:.3} s ({:.0} MB/s)",
        tree.files.len(),
        bytes as f64 / 1e6,
        ours.as_secs_f64(),
        bytes as f64 / 1e6 / ours.as_secs_f64()
    );
    floor(&root, &tree, ours);
    let py = Command::new("python3").arg("-c").arg("1").status();
    if py.map(|s| s.success()).unwrap_or(false) {
        let (base, out) = best_of(3, || {
            Command::new("python3")
                .args(["-c", PY_SOURCE_TREE])
                .arg(&root)
                .output()
                .unwrap()
        });
        let py_digest = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(
            py_digest, tree.digest,
            "the Python baseline disagrees with this crate"
        );
        println!(
            "source-tree baseline (original algorithm in python3): {:.3} s; speed-up {:.2}x (target >= 4x)",
            base.as_secs_f64(),
            base.as_secs_f64() / ours.as_secs_f64()
        );
    } else {
        println!("source-tree baseline skipped: python3 is not available");
    }
}

/// The hashing floor: the same files hashed by `openssl dgst -sha256`, the list split into
/// one part per core, the parts run in parallel.
fn floor(root: &Path, tree: &source_tree::SourceTree, ours: Duration) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let paths: Vec<&str> = tree.files.iter().map(|f| f.path.as_str()).collect();
    let per = paths.len().div_ceil(cores);
    let (t, ok) = best_of(3, || {
        let children: Vec<_> = paths
            .chunks(per)
            .map(|part| {
                Command::new("openssl")
                    .args(["dgst", "-sha256"])
                    .args(part)
                    .current_dir(root)
                    .stdout(std::process::Stdio::null())
                    .spawn()
            })
            .collect();
        children
            .into_iter()
            .all(|c| c.and_then(|mut c| c.wait()).is_ok_and(|s| s.success()))
    });
    if ok {
        println!(
            "source-tree hashing floor (openssl dgst -sha256 on {cores} cores): {:.3} s; source-tree / floor {:.2}x (target <= 1.3x)",
            t.as_secs_f64(),
            ours.as_secs_f64() / t.as_secs_f64()
        );
    } else {
        println!("source-tree hashing floor skipped: openssl is not available");
    }
}

fn bench_model(dir: &Path, s: f64) {
    let m = dir.join("model");
    std::fs::create_dir_all(&m).unwrap();
    let shard = ((512.0 * 1024.0 * 1024.0 * s) as usize).max(1024 * 1024);
    let mut g = Gen(0x2545_f491_4f6c_dd1d);
    let mut buf = vec![0u8; 8 * 1024 * 1024];
    let mut paths = Vec::new();
    for i in 1..=4 {
        let p = m.join(format!("model-{i:05}-of-00004.safetensors"));
        let mut f = std::fs::File::create(&p).unwrap();
        let mut left = shard;
        while left > 0 {
            let n = left.min(buf.len());
            g.fill(&mut buf[..n]);
            f.write_all(&buf[..n]).unwrap();
            left -= n;
        }
        paths.push(p);
    }
    std::fs::write(m.join("config.json"), b"{\"hidden_size\": 4096}").unwrap();
    std::fs::write(m.join("tokenizer.json"), b"{\"model\": {}}").unwrap();
    paths.push(m.join("config.json"));
    paths.push(m.join("tokenizer.json"));

    let (ours, fp) = best_of(3, || qual_probe::model::fingerprint(&m, None).unwrap());
    let mb = fp.weight_bytes() as f64 / 1e6;
    let ours_rate = mb / ours.as_secs_f64();
    println!(
        "model fingerprint: {:.0} MB in {:.3} s ({:.0} MB/s, {} threads)",
        mb,
        ours.as_secs_f64(),
        ours_rate,
        qual_probe::model::HASH_THREADS
    );
    let (base, out) = best_of(3, || {
        Command::new("sha256sum").args(&paths).output().unwrap()
    });
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        let first = text.split_whitespace().next().unwrap_or("");
        let shard1 = fp
            .weight_files
            .iter()
            .find(|w| w.path.starts_with("model-00001"))
            .unwrap();
        assert_eq!(
            format!("sha256:{first}"),
            shard1.sha256,
            "sha256sum disagrees"
        );
        let base_rate = mb / base.as_secs_f64();
        println!(
            "model baseline (sha256sum, one process): {:.3} s ({:.0} MB/s); throughput ratio {:.2}x (target >= 1.6x)",
            base.as_secs_f64(),
            base_rate,
            ours_rate / base_rate
        );
    } else {
        println!("model baseline skipped: sha256sum is not available");
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing useful: run small.
    let s = if std::env::args().any(|a| a == "--bench") {
        scale()
    } else {
        0.01
    };
    let dir = tempfile::tempdir().expect("tempdir");
    bench_source_tree(dir.path(), s);
    bench_model(dir.path(), s);
}
