//! The CUDA path as far as a machine without an NVIDIA GPU can take it (issue 28), for real:
//! - `qualification/workloads/cuda-environment-v1.json` through `kiln-qual run`: on a host
//!   without `nvidia-smi` the required device is refused by name (the probe's own failure, the
//!   device `unavailable`); on a host with a GPU the same trial expects it detected;
//! - the GPU a receipt records is the one the cases' own `CUDA_VISIBLE_DEVICES` /
//!   `CUDA_DEVICE_ORDER` choose, refused by name where the listing cannot tell (a stand-in
//!   `nvidia-smi` with two GPUs of different models);
//! - `scripts/device-check run` refuses in one line, naming what is missing, where there is no
//!   NVIDIA GPU (no `nvidia-smi` on `PATH`; a `nvidia-smi` that lists no GPU);
//! - `scripts/device-check run --rehearse-on-cpu`: the device script's whole plumbing (a
//!   throwaway checkout and `kiln-qual run`, a random-weight model made from the carried
//!   vocabulary, a paired campaign of two reference servers, the reference worker twice and
//!   `oracle compare`, the bundle) with the CPU on both sides, then `scripts/device-check
//!   import` of its bundle, which checks everything again;
//! - `oracle reference --device cuda` on a host where torch sees no GPU fails with the
//!   worker's reason.
//!
//! The rehearsal and the worker trial need `scripts/setup-reference-python` and
//! `scripts/setup-real-server` (SmolLM2's vocabulary); without them they are reported ignored
//! with the reason, and under `CI=true` they fail.

use crate::common;

use common::repo_root;

use qual_test_fixtures::harness::{self, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;

const WORKLOAD: &str = "qualification/workloads/cuda-environment-v1.json";
const SMOLLM2: &str = ".cache/real-server/root/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// Whether this host has an NVIDIA GPU the way the probe would see one.
fn host_has_nvidia_gpu() -> bool {
    Path::new("/dev/nvidiactl").exists()
        && Command::new("nvidia-smi")
            .arg("-L")
            .output()
            .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"GPU "))
}

fn the_cuda_environment_workload_states_what_it_found() {
    let d = common::example_checkout(&[WORKLOAD], "cuda example");
    let root = d.path();
    let receipt = ".qualification/receipts/cuda.json";
    let o = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["run", WORKLOAD, "--variant", "cuda", "--host-id", "ci-host"])
        .args(["--output", receipt])
        .current_dir(root)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(receipt)).unwrap()).unwrap();
    assert_eq!(v["qualification"]["backend"], "cuda", "{v:.2000}");
    let text = v.to_string();
    assert!(text.contains("cuda-device-probe"), "{text:.3000}");
    if host_has_nvidia_gpu() {
        assert_eq!(o.status.code(), Some(0), "{stderr}");
        let dev = &v["environment"]["device"];
        assert!(
            dev["device_uuid"].as_str().unwrap().starts_with("GPU-"),
            "{dev}"
        );
        assert!(dev["compute_capability"].is_string(), "{dev}");
    } else {
        assert_eq!(o.status.code(), Some(1), "{stderr}");
        assert_eq!(v["qualification"]["verdict"], "failed");
        assert!(
            text.contains("required cuda device was not detected"),
            "{text:.3000}"
        );
        assert_eq!(v["environment"]["device"]["name"], "unavailable");
        assert_eq!(
            v["environment"]["device"]["device_uuid"],
            serde_json::Value::Null
        );
    }
}

/// What a real `nvidia-smi --query-gpu` prints on a host with two GPUs of different models,
/// listed in PCI bus order.
const TWO_GPUS: &str = "0, NVIDIA GeForce RTX 3060, GPU-11111111-2222-3333-4444-555555555555, 00000000:01:00.0, 8.6, 12288, 11000, 580.95.05\n\
1, NVIDIA GeForce RTX 4090, GPU-66666666-7777-8888-9999-000000000000, 00000000:02:00.0, 8.9, 24564, 24000, 580.95.05\n";

/// The receipt records the GPU the cases use, chosen as their CUDA runtime would choose it
/// from their own `CUDA_VISIBLE_DEVICES` / `CUDA_DEVICE_ORDER`, and refuses by name where
/// that cannot be known. Through the real binary and runner; `nvidia-smi` is a stand-in (a
/// script printing what the real one prints for two GPUs: no host here has two), first on
/// the runner's `PATH`, root-owned outside any worktree so the trusted-program rule accepts
/// it. The cases run `true`: what is under test is the probe's choice.
fn the_receipt_records_the_gpu_the_cases_choose() {
    let d = common::example_checkout(&[WORKLOAD], "cuda selection");
    let root = d.path();
    let bin = tempfile::tempdir().unwrap();
    let smi = bin.path().join("nvidia-smi");
    std::fs::write(&smi, format!("#!/bin/sh\nprintf '%s' '{TWO_GPUS}'\n")).unwrap();
    std::fs::set_permissions(&smi, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let original: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(WORKLOAD)).unwrap()).unwrap();
    // Each case: the device query's case, running `true` with this environment.
    let run = |name: &str, envs: &[serde_json::Value]| {
        let mut w = original.clone();
        let template = w["variants"][0]["cases"][0].clone();
        let cases: Vec<serde_json::Value> = envs
            .iter()
            .enumerate()
            .map(|(i, env)| {
                let mut c = template.clone();
                c["id"] = format!("case-{i}").into();
                c["command"] = serde_json::json!(["true"]);
                c["output_assertions"] = serde_json::json!([]);
                c["environment"] = env.clone();
                c
            })
            .collect();
        w["variants"][0]["cases"] = cases.into();
        std::fs::write(
            root.join(WORKLOAD),
            serde_json::to_string_pretty(&w).unwrap(),
        )
        .unwrap();
        common::git(root, &["commit", "-q", "-am", name]);
        let receipt = format!(".qualification/receipts/{name}.json");
        let o = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
            .args(["run", WORKLOAD, "--variant", "cuda", "--host-id", "ci-host"])
            .args(["--output", &receipt])
            .env("PATH", &path)
            .current_dir(root)
            .output()
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join(&receipt)).unwrap()).unwrap();
        (o.status.code(), v)
    };
    let env = |pairs: &[(&str, &str)]| -> serde_json::Value {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };

    let (code, v) = run("by-uuid", &[env(&[("CUDA_VISIBLE_DEVICES", "GPU-6666")])]);
    let dev = &v["environment"]["device"];
    assert_eq!(code, Some(0), "{v:.3000}");
    assert_eq!(dev["name"], "NVIDIA GeForce RTX 4090", "{dev}");
    assert_eq!(dev["logical_index"], 1, "{dev}");
    assert_eq!(dev["architecture"], "sm_89", "{dev}");
    assert_eq!(
        v["environment"]["runtime"]["cuda_device_selection"],
        "nvidia-smi GPU 1 (GPU-66666666-7777-8888-9999-000000000000) of 2 listed is the \
         cases' CUDA device 0: first entry of CUDA_VISIBLE_DEVICES=\"GPU-6666\", by UUID"
    );

    let (code, v) = run("pci-order", &[env(&[("CUDA_DEVICE_ORDER", "PCI_BUS_ID")])]);
    assert_eq!(code, Some(0), "{v:.3000}");
    assert_eq!(
        v["environment"]["device"]["name"],
        "NVIDIA GeForce RTX 3060"
    );

    // Unset, the cases' device 0 is the one CUDA ranks fastest: not knowable from the
    // listing, so refused by name with what to set, the device unavailable.
    let (code, v) = run("unset", &[env(&[])]);
    assert_eq!(code, Some(1), "{v:.3000}");
    let text = v.to_string();
    assert!(
        text.contains("environment probe \\\"cuda-selected-device\\\" failed: the host has 2 GPUs of different models"),
        "{text:.3000}"
    );
    assert!(
        text.contains("CUDA_DEVICE_ORDER=PCI_BUS_ID"),
        "{text:.3000}"
    );
    assert_eq!(v["environment"]["device"]["name"], "unavailable");

    // Two cases on different GPUs: one receipt cannot record both.
    let (code, v) = run(
        "disagree",
        &[
            env(&[
                ("CUDA_VISIBLE_DEVICES", "0"),
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
            ]),
            env(&[
                ("CUDA_VISIBLE_DEVICES", "1"),
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
            ]),
        ],
    );
    assert_eq!(code, Some(1), "{v:.3000}");
    assert!(
        v.to_string().contains("choose their GPU differently"),
        "{v:.3000}"
    );
}

/// A `PATH` of links to the few programs the script itself uses, plus `extra`.
fn bare_path(dir: &Path, extra: &[(&str, &str)]) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["bash", "dirname", "head", "grep"] {
        let real = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is not in /usr/bin or /bin"));
        std::os::unix::fs::symlink(real, bin.join(tool)).unwrap();
    }
    for (name, body) in extra {
        let p = bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    bin
}

fn device_check_refuses_in_one_line_without_an_nvidia_gpu() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let run = |path: &Path| {
        Command::new(repo_root().join("scripts/device-check"))
            .arg("run")
            .env("PATH", path)
            .env("OUT", &out)
            .output()
            .unwrap()
    };
    let none = bare_path(&d.path().join("none"), &[]);
    let o = run(&none);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "device-check: refused: no NVIDIA GPU here (nvidia-smi is not on PATH)\n"
    );
    // nvidia-smi present (a stand-in: what the real one prints on a machine whose driver
    // finds no GPU), but no GPU behind it.
    let smi = bare_path(
        &d.path().join("smi"),
        &[(
            "nvidia-smi",
            "#!/bin/bash\necho 'No devices were found'\nexit 6\n",
        )],
    );
    let o = run(&smi);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    if Path::new("/dev/nvidiactl").exists() {
        assert_eq!(
            err,
            "device-check: refused: nvidia-smi -L failed: No devices were found\n"
        );
    } else {
        assert_eq!(
            err,
            "device-check: refused: no NVIDIA GPU here (/dev/nvidiactl does not exist)\n"
        );
    }
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing written"
    );
}

fn needs_reference() -> Result<(), String> {
    let root = repo_root();
    harness::needs_file(
        &root.join(SMOLLM2),
        "SmolLM2's vocabulary (run scripts/setup-real-server)",
    )?;
    harness::needs_file(
        &root.join(".cache/venv-reference/.requirements-sha256"),
        "the reference Python environment (run scripts/setup-reference-python)",
    )
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

fn the_device_script_rehearses_its_whole_plumbing_on_the_cpu() {
    let root = repo_root();
    let py = root.join(".cache/venv-reference/bin/python");
    let kq = env!("CARGO_BIN_EXE_kiln-qual");
    // Below the target folder, not /tmp: the servers' boxes have a private /tmp, and the
    // model and the checkout must be visible in them.
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let carry = base.path().join("carry");
    let o = Command::new(&py)
        .arg(root.join("tools/device_check.py"))
        .args([
            "prepare",
            "--kiln-qual",
            kq,
            "--no-downloads",
            "--vocab-from",
        ])
        .arg(root.join(SMOLLM2))
        .arg("--carry")
        .arg(&carry)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(carry.join("MANIFEST.json")).unwrap()).unwrap();
    assert!(manifest["files"]["vocab.gguf"]["bytes"].as_u64().unwrap() < 4 << 20);
    assert!(manifest["files"]["kiln-qual"]["sha256"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let out = base.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let o = Command::new(root.join("scripts/device-check"))
        .args([
            "run",
            "--rehearse-on-cpu",
            "--kiln-qual",
            kq,
            "--vocab-from",
        ])
        .arg(carry.join("vocab.gguf"))
        .arg("--work")
        .arg(base.path().join("work"))
        .env("OUT", &out)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{log}");
    let s = summary(&out);
    assert_eq!(s["mode"], "rehearsal-cpu");
    assert_eq!(s["failed_required_steps"], serde_json::json!([]), "{log}");
    assert_eq!(s["environment"]["verdict"], "passed", "{s}");
    let camp = s["campaign"].as_object().unwrap();
    for profile in ["greedy-short", "api-default-sampled"] {
        let cand = &camp[&format!("{profile}.transformers-cpu-b.json")];
        assert_eq!(cand["verdict"], "passed", "{s}");
        assert_eq!(cand["comparison"], "matched", "{s}");
        assert_eq!(cand["memory_source"], "process_tree_pss", "{s}");
    }
    assert_eq!(
        camp["campaign.transformers-cpu-a.json"]["verdict"],
        "passed"
    );
    // The same worker on the same device twice: bit for bit.
    let checks = &s["oracle"]["checks"];
    assert_eq!(checks["max_abs_error"]["observed"], 0.0, "{s}");
    assert_eq!(checks["min_argmax_agreement"]["observed"], 1.0, "{s}");
    for f in ["device-check.log", "device-check.tar.gz", "summary.json"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    assert!(
        std::fs::metadata(out.join("device-check.tar.gz"))
            .unwrap()
            .len()
            < 16 << 20
    );
    // Back here: every check again on the unpacked bundle.
    let o = Command::new("python3")
        .arg(root.join("tools/device_check.py"))
        .arg("import")
        .arg(out.join("device-check.tar.gz"))
        .args(["--kiln-qual", kq])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(log.contains("every check passed"), "{log}");
    assert!(log.contains("OK campaign verifies"), "{log}");
}

fn a_cuda_worker_without_a_gpu_fails_with_its_reason() {
    let root = repo_root();
    let d = tempfile::tempdir().unwrap();
    let ids = d.path().join("ids.json");
    std::fs::write(&ids, "[1, 2, 3]").unwrap();
    let out = d.path().join("cuda.safetensors");
    let o = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["oracle", "reference", "--device", "cuda", "--model"])
        .arg(root.join(".cache/real-server/root/models/tiny/tiny.gguf"))
        .arg("--token-ids")
        .arg(&ids)
        .arg("--output")
        .arg(&out)
        .current_dir(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if host_has_nvidia_gpu() {
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert!(err.contains("on cuda NVIDIA"), "{err}");
    } else {
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("sees no CUDA device"), "{err}");
        assert!(!out.exists());
    }
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new(
            "the_cuda_environment_workload_states_what_it_found",
            the_cuda_environment_workload_states_what_it_found,
        ),
        Trial::new(
            "the_receipt_records_the_gpu_the_cases_choose",
            the_receipt_records_the_gpu_the_cases_choose,
        ),
        Trial::new(
            "device_check_refuses_in_one_line_without_an_nvidia_gpu",
            device_check_refuses_in_one_line_without_an_nvidia_gpu,
        ),
        Trial::new(
            "the_device_script_rehearses_its_whole_plumbing_on_the_cpu",
            the_device_script_rehearses_its_whole_plumbing_on_the_cpu,
        )
        .needs(needs_reference()),
        Trial::new(
            "a_cuda_worker_without_a_gpu_fails_with_its_reason",
            a_cuda_worker_without_a_gpu_fails_with_its_reason,
        )
        .needs(needs_reference()),
    ]
}
