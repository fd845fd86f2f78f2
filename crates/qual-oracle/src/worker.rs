//! The Hugging Face reference worker (`tools/reference/worker.py`) run as a contained process.
//!
//! Owns the containment recipe and the reading of the worker's evidence:
//! - spawned through `qual_exec::execute` (the one home for children): own session, process
//!   group, PID/mount namespaces, no capabilities, seccomp, a cgroup v2 sub-tree where the host
//!   delegates one; **network forbidden** (a private namespace with only loopback); a finite
//!   deadline with TERM → grace → KILL; nothing survives it.
//! - a closed environment: `HOME` and `TMPDIR` in a private temporary directory, `LANG`,
//!   `LC_ALL`, `PATH=/usr/bin:/bin`, `PYTHONHASHSEED`, `TOKENIZERS_PARALLELISM=false`,
//!   `OMP_NUM_THREADS=1`, `HF_HUB_OFFLINE=1`, `TRANSFORMERS_OFFLINE=1`, `HF_HOME` private —
//!   nothing inherited, except on [`Device::Cuda`]: `CUBLAS_WORKSPACE_CONFIG=:4096:8`
//!   (cuBLAS's deterministic workspace) is set, and the operator's `LD_LIBRARY_PATH` and
//!   `CUDA_VISIBLE_DEVICES`, where set, are passed on (container images put the NVIDIA
//!   driver's user-space libraries on `LD_LIBRARY_PATH`; without it torch finds no
//!   `libcuda.so.1`). The worker reports the device it ran on (`device`: kind, name, compute
//!   capability, CUDA runtime, TF32 off) and a report for another device than the one asked
//!   for is refused.
//! - a start gate: an absolute file created exclusively with `go\n` before the spawn, which the
//!   worker requires (regular, exact content) before it imports anything.
//! - the evidence: exactly one `KILN_QUAL_HF_LOGITS_PASS {json}` line (strict JSON, closed key
//!   set), exit 0, and an output file that re-reads to the reported shape, digest and token ids.
//!
//! Memory: the cgroup on this kind of host has no memory controller (`memory.peak` absent), so
//! the peak recorded is the worker's own `ru_maxrss` (its largest resident set); the cgroup
//! peak is not claimed.

use crate::tensor::read_tensor_file;
use qual_exec::{execute, CaptureLimits, ExecSpec, NetworkPolicy, Termination};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// The marker the worker prints once on success.
pub const MARKER: &str = "KILN_QUAL_HF_LOGITS_PASS ";
/// The worker's evidence schema.
pub const WORKER_SCHEMA: &str = "kiln-qual.hf-logits.v1";
/// `PYTHONHASHSEED` (the worker's seed too).
pub const SEED: &str = "20260715";

/// The most the reference worker script may hold.
const WORKER_FILE_LIMIT: usize = 16 << 20;

/// Where the worker computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    /// The CPU (one thread).
    #[default]
    Cpu,
    /// The first CUDA device torch sees.
    Cuda,
}

impl Device {
    /// The worker's `--device` value and the evidence's `device.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct WorkerRequest {
    /// The reference environment's interpreter.
    pub python: PathBuf,
    /// `tools/reference/worker.py`.
    pub worker: PathBuf,
    /// A model directory or `.gguf` file.
    pub model: PathBuf,
    /// The sequences, all run in one worker process (one model load).
    pub sequences: Vec<Sequence>,
    /// Deadline.
    pub timeout: Duration,
    /// Where the worker computes.
    pub device: Device,
}

/// One input sequence and where its logits go.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    /// Input token ids.
    pub token_ids: Vec<i64>,
    /// First position whose logits are written (default: the last).
    pub from_position: Option<usize>,
    /// Output safetensors path (must not exist).
    pub output: PathBuf,
}

/// The worker's report on one output file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputEvidence {
    /// Absolute output path.
    pub file: String,
    /// First position written.
    pub from_position: usize,
    /// Input length.
    pub input_token_count: usize,
    /// Canonical hash of the input ids.
    pub input_token_ids_sha256: String,
    /// `sha256:` of the contiguous little-endian f32 logits.
    pub logits_sha256: String,
    /// Output file size.
    pub output_bytes: u64,
    /// `sha256:` of the output file.
    pub output_sha256: String,
    /// Rows written.
    pub positions: usize,
    /// Row length.
    pub vocab: usize,
}

/// The device the worker ran on, as it reported it (closed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceEvidence {
    /// `cpu` or `cuda`.
    pub kind: String,
    /// The CUDA device's name (torch's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `major.minor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    /// The CUDA runtime torch was built for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_runtime: Option<String>,
    /// TF32 in matrix products and cuDNN (always `false`: full float32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_tf32: Option<bool>,
}

/// What the worker reported (closed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerEvidence {
    /// [`WORKER_SCHEMA`].
    pub schema: String,
    /// `eager`.
    pub attention_implementation: String,
    /// `true`.
    pub deterministic_algorithms: bool,
    /// The device it ran on (absent in results written before workers reported it: the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceEvidence>,
    /// `float32`.
    pub dtype: String,
    /// Worker wall time.
    pub duration_seconds: f64,
    /// gguf package version.
    pub gguf_version: String,
    /// The worker's peak resident set (`ru_maxrss`).
    pub max_rss_bytes: u64,
    /// One entry per sequence, in order.
    pub outputs: Vec<OutputEvidence>,
    /// `name==version` of every imported installed package.
    pub packages: Vec<String>,
    /// Canonical hash of `packages`.
    pub packages_sha256: String,
    /// Interpreter version.
    pub python_version: String,
    /// safetensors version.
    pub safetensors_version: String,
    /// Seed.
    pub seed: u64,
    /// Threads.
    pub threads: u32,
    /// torch version.
    pub torch_version: String,
    /// transformers version.
    pub transformers_version: String,
    /// Vocabulary size.
    pub vocab: usize,
}

/// The evidence of one contained run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceEvidence {
    /// Wall time observed by the runner.
    pub elapsed_seconds: f64,
    /// Deadline.
    pub timeout_seconds: f64,
    /// The network isolation applied (qual-exec's mechanism id; never `none`).
    pub network: String,
    /// Containment mechanism (`cgroup_v2` or `process_group_subreaper`).
    pub mechanism: String,
    /// Whether nothing of the worker outlived it.
    pub clean: bool,
    /// `sha256:` of the worker program.
    pub worker_sha256: String,
    /// The worker's own report.
    pub worker: WorkerEvidence,
}

/// Why the reference could not be produced.
#[derive(Debug, Error)]
pub enum WorkerError {
    /// Preparing the run failed.
    #[error("prepare the reference worker: {0}")]
    Prepare(String),
    /// The contained execution could not run.
    #[error("run the reference worker: {0}")]
    Exec(#[from] qual_exec::ExecError),
    /// The worker failed or its evidence is not acceptable.
    #[error("accept the reference worker's result: {0}")]
    Evidence(String),
}

fn absolute(p: &Path) -> Result<PathBuf, WorkerError> {
    std::path::absolute(p).map_err(|e| WorkerError::Prepare(format!("{}: {e}", p.display())))
}

/// Runs the worker contained and verifies its output.
pub fn run(req: &WorkerRequest) -> Result<ReferenceEvidence, WorkerError> {
    let prep = |m: String| WorkerError::Prepare(m);
    for (what, p) in [("interpreter", &req.python), ("worker", &req.worker)] {
        if !p.exists() {
            return Err(prep(format!(
                "the {what} {} does not exist",
                qual_json::escape_path(p)
            )));
        }
    }
    if req.sequences.is_empty() {
        return Err(prep("no sequence to run".into()));
    }
    for s in &req.sequences {
        if s.output.exists() {
            return Err(prep(format!(
                "the output {} already exists",
                qual_json::escape_path(&s.output)
            )));
        }
    }
    let worker_bytes = qual_json::file::read_regular_bytes(&req.worker, WORKER_FILE_LIMIT)
        .map_err(|e| prep(e.to_string()))?;
    let home = tempfile::Builder::new()
        .prefix("kiln-qual-reference-")
        .tempdir()
        .map_err(|e| prep(e.to_string()))?;
    let gate = home.path().join("start-gate");
    qual_json::publish::write_new(&gate, b"go\n").map_err(|e| prep(e.to_string()))?;
    let tmp = home.path().join("tmp");
    std::fs::create_dir(&tmp).map_err(|e| prep(e.to_string()))?;
    let h = |p: &Path| p.display().to_string();
    let mut seqs = Vec::new();
    for s in &req.sequences {
        seqs.push(serde_json::json!({
            "token_ids": s.token_ids,
            "from_position": s.from_position,
            "output": h(&absolute(&s.output)?),
        }));
    }
    let requests = home.path().join("requests.json");
    std::fs::write(
        &requests,
        serde_json::json!({ "sequences": seqs }).to_string(),
    )
    .map_err(|e| prep(e.to_string()))?;
    let argv = vec![
        h(&absolute(&req.python)?),
        h(&absolute(&req.worker)?),
        "--model".into(),
        h(&absolute(&req.model)?),
        "--requests".into(),
        h(&requests),
        "--start-gate".into(),
        h(&gate),
        "--device".into(),
        req.device.as_str().into(),
    ];
    let mut env: Vec<(String, String)> = [
        ("HOME", h(home.path())),
        ("TMPDIR", h(&tmp)),
        ("HF_HOME", h(&home.path().join("hf"))),
        ("HF_HUB_OFFLINE", "1".into()),
        ("TRANSFORMERS_OFFLINE", "1".into()),
        ("HF_HUB_DISABLE_TELEMETRY", "1".into()),
        ("LANG", "C.UTF-8".into()),
        ("LC_ALL", "C.UTF-8".into()),
        ("PATH", "/usr/bin:/bin".into()),
        ("PYTHONHASHSEED", SEED.into()),
        ("PYTHONDONTWRITEBYTECODE", "1".into()),
        ("TOKENIZERS_PARALLELISM", "false".into()),
        ("OMP_NUM_THREADS", "1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if req.device == Device::Cuda {
        env.push(("CUBLAS_WORKSPACE_CONFIG".into(), ":4096:8".into()));
        for k in ["LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"] {
            if let Some(v) = std::env::var_os(k).and_then(|v| v.into_string().ok()) {
                env.push((k.into(), v));
            }
        }
    }
    let spec = ExecSpec {
        argv,
        cwd: std::env::current_dir().map_err(|e| prep(e.to_string()))?,
        env,
        timeout: req.timeout,
        term_grace: Duration::from_secs(15),
        capture: CaptureLimits::default(),
        network: NetworkPolicy::LoopbackOnly,
        sandbox: Default::default(),
    };
    let e = execute(&spec)?;
    let out = e.stdout.text_lossy();
    let bad = |m: String| {
        let tail: String = out.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
        WorkerError::Evidence(format!(
            "{m} (stdout tail: {})",
            qual_json::escape_text(&tail)
        ))
    };
    if e.containment.network == qual_exec::NetworkIsolation::None {
        return Err(bad("the worker ran with network access".into()));
    }
    if e.termination != (Termination::Exited { code: 0 }) {
        return Err(bad(format!("the worker ended with {:?}", e.termination)));
    }
    let markers: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix(MARKER)).collect();
    if markers.len() != 1 {
        return Err(bad(format!(
            "expected exactly one {MARKER:?}line, found {}",
            markers.len()
        )));
    }
    let v = qual_json::from_str(markers[0]).map_err(|e| bad(format!("marker JSON: {e}")))?;
    let w: WorkerEvidence = serde_json::from_value(v.to_serde().unwrap_or_default())
        .map_err(|e| bad(format!("marker JSON: {e}")))?;
    verify(&w, req)?;
    Ok(ReferenceEvidence {
        elapsed_seconds: e.wall.as_secs_f64(),
        timeout_seconds: req.timeout.as_secs_f64(),
        network: e.containment.network.mechanism_id().into(),
        mechanism: e.containment.mechanism.as_str().into(),
        clean: e.containment.clean,
        worker_sha256: qual_json::sha256_prefixed(&worker_bytes),
        worker: w,
    })
}

/// Every output must re-read to what the worker reported.
fn verify(w: &WorkerEvidence, req: &WorkerRequest) -> Result<(), WorkerError> {
    let ev = |m: String| WorkerError::Evidence(m);
    if w.schema != WORKER_SCHEMA
        || w.attention_implementation != "eager"
        || w.dtype != "float32"
        || !w.deterministic_algorithms
    {
        return Err(ev(
            "the worker's settings are not the pinned deterministic ones".into(),
        ));
    }
    let ran_on = w.device.as_ref().map_or("cpu", |d| d.kind.as_str());
    let tf32 = w
        .device
        .as_ref()
        .and_then(|d| d.allow_tf32)
        .unwrap_or(false);
    if ran_on != req.device.as_str() || tf32 {
        return Err(ev(format!(
            "the worker ran on {} (TF32 {}), not on the {} asked for",
            qual_json::escape_text(ran_on),
            if tf32 { "on" } else { "off" },
            req.device.as_str()
        )));
    }
    if w.outputs.len() != req.sequences.len() {
        return Err(ev("the worker reported another number of outputs".into()));
    }
    for (o, s) in w.outputs.iter().zip(&req.sequences) {
        let f = read_tensor_file(&s.output).map_err(|e| ev(e.to_string()))?;
        if f.file_sha256 != o.output_sha256 || f.bytes != o.output_bytes {
            return Err(ev(
                "an output file is not the one the worker reported".into()
            ));
        }
        if (f.logits.positions, f.logits.vocab) != (o.positions, o.vocab) {
            return Err(ev("an output shape is not the reported one".into()));
        }
        let want_rows = s.token_ids.len() - s.from_position.unwrap_or(s.token_ids.len() - 1);
        if o.positions != want_rows {
            return Err(ev("an output does not hold the requested positions".into()));
        }
        let bytes: Vec<u8> = f.logits.data.iter().flat_map(|x| x.to_le_bytes()).collect();
        if qual_json::sha256_prefixed(&bytes) != o.logits_sha256 {
            return Err(ev("a logits digest is not the reported one".into()));
        }
        if f.input_ids.as_deref() != Some(&s.token_ids[..]) {
            return Err(ev("an output's input ids are not the requested ones".into()));
        }
        if crate::result::token_ids_digest(&s.token_ids) != o.input_token_ids_sha256 {
            return Err(ev("an input token digest is not the requested one".into()));
        }
    }
    Ok(())
}
