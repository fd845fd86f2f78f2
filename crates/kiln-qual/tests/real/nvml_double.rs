//! The NVML memory source (`qual_campaign::memory::nvml`) against a test double of
//! `libnvidia-ml.so.1`, through the real `kiln-qual` binary.
//!
//! No NVIDIA GPU exists on the machines that build and test kiln-qual, nor in CI, so the
//! library is stood in for: `crates/qual-campaign/tests/fixtures/fake_nvml.c` is compiled here
//! with the system C compiler (`cc -shared -fPIC`) into a temporary directory as
//! `libnvidia-ml.so.1`, and `kiln-qual` runs with `LD_LIBRARY_PATH` naming that directory, which
//! `dlopen` honours. The binding, `resolve` (explicit and `auto`), the sampler and the evidence
//! of `campaign` (receipts, gates, `campaign verify`) and `bench` (result documents) therefore
//! run for real against it; the double's behaviour comes from `FAKE_NVML` (see the C file).
//! Covered: a working GPU sampled (identity, baseline, peak, samples); `auto` picking the one
//! GPU; "library present, no device", a failed init, a missing symbol and a bad index each
//! refused by name before any traffic; `auto` passing over a device-less NVML and saying so;
//! a GPU lost mid-run failing the row's memory evidence by name, never read again.
//!
//! Needs `cc` (the Rust toolchain links with it): missing, each trial is ignored loudly, and
//! fails under CI=true.

use crate::common::{self, free_port, mock_server, KilledOnDrop};
use qual_test_fixtures::harness::Trial;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KQ: &str = env!("CARGO_BIN_EXE_kiln-qual");
/// What the double reports (fake_nvml.c).
const NAME: &str = "Fake NVML H0";
const UUID: &str = "GPU-f4ce0000-0000-4000-8000-00000000000f";
const TOTAL: u64 = 80 << 30;
const LOST: &str = "memory sampling failed: reach the GPU: nvmlDeviceGetMemoryInfo returned NVML_ERROR_GPU_IS_LOST (15): the GPU fell off the bus or is otherwise inaccessible; it is not read again (a lost GPU needs a reset or a reboot)";
const NO_DEVICE: &str = "find a GPU: NVML loaded but enumerates no GPU: is the NVIDIA driver's device node (/dev/nvidia*) present? choose --memory-source process-tree for a CPU server";

fn cc_present() -> Result<(), String> {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(())
    } else {
        Err("needs a C compiler as cc on PATH (to build the NVML double)".into())
    }
}

/// The double compiled with `defines` into `dir/lib/libnvidia-ml.so.1`; returns `dir/lib`.
fn double(dir: &Path, defines: &[&str]) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../qual-campaign/tests/fixtures/fake_nvml.c");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(lib.join("libnvidia-ml.so.1"))
        .args(defines)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// `kiln-qual ARGS` with the double at `lib` in mode `mode` (and its call log at `log`).
fn kq(lib: &Path, mode: &str, log: Option<&Path>, cwd: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(KQ);
    c.current_dir(cwd)
        .env("LD_LIBRARY_PATH", lib)
        .env("FAKE_NVML", mode)
        .env_remove("FAKE_NVML_LOG")
        .args(args);
    if let Some(log) = log {
        c.env("FAKE_NVML_LOG", log);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// How many times the double's log records `call`.
fn calls(log: &Path, call: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == call)
        .count()
}

/// A launch recipe in `dir` for an owned mock server, and the stand-in model beside it;
/// returns the recipe's path.
fn recipe(dir: &Path) -> PathBuf {
    let p = dir.join("launch.json");
    common::mock_launch_recipe(
        &p,
        "nvml-double-mock",
        KQ,
        free_port(),
        &["--itl-ms", "0.2"],
        Value::Null,
    );
    common::stand_in_model(dir);
    p
}

/// `campaign --memory-source nvml` of one row (greedy-short, c = 1) against an owned mock,
/// in `dir`, writing `dir/out`.
fn campaign(dir: &Path, lib: &Path, mode: &str, log: Option<&Path>) -> Output {
    let launch = recipe(dir);
    kq(
        lib,
        mode,
        log,
        dir,
        &[
            "campaign",
            "--engine",
            "mock",
            "--launch",
            launch.to_str().unwrap(),
            "--campaign-id",
            "nvml-double",
            "--prompt-set-id",
            "nvml-double-prompts",
            "--profiles",
            "greedy-short",
            "--sizes",
            "1",
            "--repeats",
            "1",
            "--max-tokens",
            "4",
            "--memory-limit-bytes",
            "1099511627776",
            "--memory-source",
            "nvml",
            "--memory-sample-ms",
            "1",
            "--out-dir",
            dir.join("out").to_str().unwrap(),
            "--model-path",
            dir.join("model").to_str().unwrap(),
        ],
    )
}

/// `bench --json` against `url` (two closed-loop runs, c = 1 and 2) with `memory` flags.
fn bench(
    lib: &Path,
    mode: &str,
    log: Option<&Path>,
    dir: &Path,
    url: &str,
    memory: &[&str],
) -> Output {
    let tok = qual_test_fixtures::word_level_tokenizer(dir, &qual_bench::workload::WORDS);
    let mut args = vec![
        "bench",
        "--url",
        url,
        "--model",
        "mock",
        "--tokenizer",
        tok.to_str().unwrap(),
        "--requests",
        "4",
        "--warmup",
        "0",
        "--output-tokens",
        "3",
        "--concurrency",
        "1,2",
        "--memory-sample-ms",
        "1",
        "--json",
    ];
    args.extend(memory);
    let out = dir.join("bench.json");
    args.extend(["--output", out.to_str().unwrap()]);
    kq(lib, mode, log, dir, &args)
}

/// The bench runs' `memory` records (a run the validity gate refused keeps them: exit 6).
fn bench_memory(o: &Output) -> Vec<Value> {
    assert!(matches!(o.status.code(), Some(0 | 6)), "{}", stderr(o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs: Vec<Value> = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["runs"].as_array().unwrap().clone())
        .map(|r| r["memory"].clone())
        .collect();
    assert_eq!(runs.len(), 2, "{doc}");
    runs
}

fn assert_double_identity(device: &Value, selector: &str) {
    assert_eq!(device["selector"], selector, "{device}");
    assert_eq!(device["index"], 0, "{device}");
    assert_eq!(device["enumerated_device_count"], 1, "{device}");
    assert_eq!(device["name"], NAME, "{device}");
    assert_eq!(device["uuid"], UUID, "{device}");
    assert_eq!(device["total_bytes"], TOTAL, "{device}");
    assert_eq!(device["library"], "libnvidia-ml.so.1", "{device}");
}

/// `--memory-source nvml` with a working GPU: the receipt's `memory_sampler` is `nvml_used`
/// with the double's identity, the row's memory has a baseline, a higher peak (the double's
/// used bytes rise with every read, and the row ends with a read after its baseline) and at
/// least two samples; the gates pass and `campaign verify` recomputes them.
fn campaign_samples_a_working_gpu() {
    let d = tempfile::tempdir().unwrap();
    let lib = double(d.path(), &[]);
    let o = campaign(d.path(), &lib, "ok", None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let receipt = read_json(&d.path().join("out/greedy-short.mock.json"));
    let sampler = &receipt["memory_sampler"];
    assert_eq!(sampler["source"], "nvml_used", "{sampler}");
    assert_eq!(sampler["interval_ms"], 1, "{sampler}");
    assert_double_identity(&sampler["device"], "explicit_index");
    let runs = receipt["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let m = &runs[0]["memory"];
    let (baseline, peak) = (
        m["baseline_bytes"].as_u64().unwrap(),
        m["peak_bytes"].as_u64().unwrap(),
    );
    assert!(baseline >= 1 << 30, "{m}");
    assert!(peak > baseline, "{m}");
    assert_eq!(m["peak_delta_bytes"].as_u64(), Some(peak - baseline), "{m}");
    assert!(m["samples"].as_u64().unwrap() >= 2, "{m}");
    let gates = runs[0]["gates"].as_array().unwrap();
    for name in ["memory_measured", "absolute_memory_limit"] {
        let g = gates.iter().find(|g| g["name"] == name).unwrap();
        assert_eq!(g["outcome"], "passed", "{g}");
    }
    let v = Command::new(KQ)
        .args(["campaign", "verify"])
        .arg(d.path().join("out"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("OK campaign verifies"),
        "{v:?}"
    );
}

/// `auto` with the library present and exactly one GPU picks NVML (on a host with no DRM
/// counter; with one, auto must refuse the ambiguity instead), recorded as chosen by auto.
fn auto_picks_nvml_with_exactly_one_gpu() {
    let d = tempfile::tempdir().unwrap();
    let lib = double(d.path(), &[]);
    let (_m, port) = mock_server(KQ, &[]);
    let url = format!("http://127.0.0.1:{port}");
    let o = bench(
        &lib,
        "ok",
        None,
        d.path(),
        &url,
        &["--memory-source", "auto"],
    );
    if !qual_campaign::memory::drm_candidates().is_empty() {
        assert!(
            stderr(&o).contains("both DRM and NVML counters exist"),
            "{}",
            stderr(&o)
        );
        return;
    }
    for m in bench_memory(&o) {
        assert_eq!(m["status"], "sampled", "{m}");
        assert_eq!(m["source"]["source"], "nvml_used", "{m}");
        assert_double_identity(&m["source"]["device"], "auto_single_device");
        let s = &m["snapshot"];
        assert!(
            s["peak_bytes"].as_u64() > s["baseline_bytes"].as_u64(),
            "{m}"
        );
        assert!(s["samples"].as_u64().unwrap() >= 2, "{m}");
    }
}

/// Each state in which an explicit NVML source cannot read is refused by name before any
/// traffic. `bench` is pointed at a port nobody listens on: had it contacted the server
/// before refusing, it would have said the server cannot be reached; it writes no document.
/// `campaign` refuses before starting its server: no out dir, no server logs.
fn explicit_nvml_refusals_are_named_before_any_traffic() {
    let d = tempfile::tempdir().unwrap();
    let lib = double(d.path(), &[]);
    let no_uuid = double(&d.path().join("no-uuid"), &["-DFAKE_NVML_OMIT_UUID"]);
    let dead = format!("http://127.0.0.1:{}", free_port());
    let cases: [(&Path, &str, &[&str], &str); 4] = [
        (&lib, "no-device", &[], NO_DEVICE),
        (
            &lib,
            "init-fails",
            &[],
            "initialise NVML: nvmlInit_v2 returned NVML_ERROR_DRIVER_NOT_LOADED (9): the NVIDIA driver is not loaded",
        ),
        (
            &lib,
            "ok",
            &["--memory-device-index", "1"],
            "open NVML device 1: NVML enumerates 1 GPU, indices 0 to 0; select one with --memory-device-index",
        ),
        (
            &no_uuid,
            "ok",
            &[],
            "load libnvidia-ml.so.1 (NVML): it exports no nvmlDeviceGetUUID, which this binding calls",
        ),
    ];
    for (lib, mode, extra, want) in cases {
        let mut memory = vec!["--memory-source", "nvml"];
        memory.extend(extra);
        let o = bench(lib, mode, None, d.path(), &dead, &memory);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{mode}: {err}");
        assert!(
            err.contains(&format!(
                "kiln-qual: failed to set up the telemetry: use --memory-source: {want}"
            )),
            "{mode}: {err}"
        );
        assert!(!err.contains("reach the server"), "{mode}: {err}");
        assert!(!d.path().join("bench.json").exists(), "{mode}");
    }
    let c = d.path().join("campaign");
    std::fs::create_dir(&c).unwrap();
    let o = campaign(&c, &lib, "no-device", None);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "kiln-qual: failed to run the campaign: check the campaign options: failed to {NO_DEVICE}"
        )),
        "{err}"
    );
    assert!(!c.join("out").exists() && !c.join("logs").exists(), "{err}");
}

/// `auto` with the library present but no device falls through as without NVML (here to the
/// server's process tree) and says so in what it records: never NVML, never silently.
fn auto_passes_over_a_device_less_nvml_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let lib = double(d.path(), &[]);
    let (m, port) = mock_server(KQ, &[]);
    let KilledOnDrop(child) = &m;
    let pid = child.id().to_string();
    let url = format!("http://127.0.0.1:{port}");
    let o = bench(
        &lib,
        "no-device",
        None,
        d.path(),
        &url,
        &["--memory-source", "auto", "--server-pid", &pid],
    );
    // On a host with DRM counters auto takes the one (or refuses several), as without NVML.
    match qual_campaign::memory::drm_candidates().len() {
        0 => {}
        1 => {
            for m in bench_memory(&o) {
                assert_eq!(m["source"]["source"], "drm_vram_used", "{m}");
            }
            return;
        }
        _ => {
            assert!(stderr(&o).contains("DRM counters found"), "{}", stderr(&o));
            return;
        }
    }
    for m in bench_memory(&o) {
        assert_eq!(m["status"], "sampled", "{m}");
        assert_eq!(m["source"]["source"], "process_tree_pss", "{m}");
        assert_eq!(
            m["source"]["measures"],
            format!("summed PSS of the server's process tree (CPU server: host memory), bytes; auto passed over NVML: {NO_DEVICE}"),
            "{m}"
        );
    }
}

/// A GPU lost mid-run (`NVML_ERROR_GPU_IS_LOST` after the open and the row's baseline): the
/// campaign row's memory evidence fails with the named reason (receipt failure, both memory
/// gates, stderr) and the campaign still verifies as evidence; in `bench` both runs record
/// the named failure and NVML's memory is read exactly three times (open, baseline, the read
/// that found the GPU lost): the second run inherits the loss without reading again.
fn a_gpu_lost_mid_run_fails_the_memory_evidence_by_name() {
    let d = tempfile::tempdir().unwrap();
    let lib = double(d.path(), &[]);
    let c = d.path().join("campaign");
    std::fs::create_dir(&c).unwrap();
    let o = campaign(&c, &lib, "lost-after:2", None);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "kiln-qual:   greedy-short: memory_sampler: {LOST}"
        )),
        "{err}"
    );
    let receipt = read_json(&c.join("out/greedy-short.mock.json"));
    assert_eq!(receipt["verdict"], "failed");
    let failures = receipt["completion"]["failures"].as_array().unwrap();
    assert!(
        failures
            .iter()
            .any(|f| f["phase"] == "memory_sampler" && f["detail"] == LOST),
        "{failures:?}"
    );
    let run = &receipt["runs"][0];
    assert!(run["memory"].is_null(), "{run}");
    for name in ["memory_measured", "absolute_memory_limit"] {
        let g = run["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .unwrap();
        assert_eq!(g["outcome"], "failed", "{g}");
    }
    let v = Command::new(KQ)
        .args(["campaign", "verify"])
        .arg(c.join("out"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("OK campaign verifies"),
        "{v:?}"
    );

    let log = d.path().join("calls.log");
    let (_m, port) = mock_server(KQ, &[]);
    let url = format!("http://127.0.0.1:{port}");
    let o = bench(
        &lib,
        "lost-after:2",
        Some(&log),
        d.path(),
        &url,
        &["--memory-source", "nvml"],
    );
    for m in bench_memory(&o) {
        assert_eq!(m["status"], "failed", "{m}");
        assert_eq!(m["reason"], LOST, "{m}");
        assert_eq!(m["source"]["source"], "nvml_used", "{m}");
    }
    assert_eq!(calls(&log, "nvmlDeviceGetMemoryInfo"), 3);
    assert_eq!(calls(&log, "nvmlInit_v2"), 1);
    assert!(
        stderr(&o).contains(&format!("c=2 run 0: memory (nvml_used): {LOST}")),
        "{}",
        stderr(&o)
    );
}

pub fn trials() -> Vec<Trial> {
    [
        (
            "campaign_samples_a_working_gpu",
            campaign_samples_a_working_gpu as fn(),
        ),
        (
            "auto_picks_nvml_with_exactly_one_gpu",
            auto_picks_nvml_with_exactly_one_gpu,
        ),
        (
            "explicit_nvml_refusals_are_named_before_any_traffic",
            explicit_nvml_refusals_are_named_before_any_traffic,
        ),
        (
            "auto_passes_over_a_device_less_nvml_and_says_so",
            auto_passes_over_a_device_less_nvml_and_says_so,
        ),
        (
            "a_gpu_lost_mid_run_fails_the_memory_evidence_by_name",
            a_gpu_lost_mid_run_fails_the_memory_evidence_by_name,
        ),
    ]
    .into_iter()
    .map(|(name, body)| Trial::new(name, body).needs(cc_present()))
    .collect()
}
