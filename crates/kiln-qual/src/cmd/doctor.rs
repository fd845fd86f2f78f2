//! `kiln-qual doctor`: what this host can qualify, each missing piece with the command that
//! fixes it.
//!
//! Thin wiring over the checks that decide a run: the backend probes are
//! `qual_probe::backend::capture` (the tools a receipt records), the containment mechanisms are
//! `qual_exec::mechanisms::probe_mechanisms` on the runner's own case box
//! (`qual_runner::case_box`), the host is `qual_probe::platform::probe`. The one table owned
//! here is [`SETUPS`]: what each `scripts/setup-*` of a kiln-qual checkout produces and where.
//!
//! Exit codes: 0 the host could be inspected (whatever is missing), 1 it could not be
//! (the current directory is unreadable), 2 usage.

use crate::exit;
use crate::output::{errln, esc, outln};
use clap::Args;
use qual_exec::mechanisms::{MechanismCheck, MechanismStatus};
use qual_probe::backend::{ProbeResult, ProbeStatus};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Arguments of `kiln-qual doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Repository whose set-ups and case box are inspected (default: the git top level of the
    /// current directory).
    #[arg(long, value_parser = super::args::Path, value_name = "R")]
    pub root: Option<PathBuf>,
    /// Print the report as JSON on stdout (`kiln-qual.doctor.v1`).
    #[arg(long)]
    pub json: bool,
}

/// The document's schema.
pub const SCHEMA: &str = "kiln-qual.doctor.v1";

#[derive(Serialize)]
struct Report {
    schema: &'static str,
    host: Host,
    toolchain: Vec<Probe>,
    backends: Vec<Backend>,
    containment: Vec<MechanismCheck>,
    repository: Option<String>,
    setups: Vec<Setup>,
}

#[derive(Serialize)]
struct Host {
    os: String,
    version: String,
    kernel: String,
    architecture: String,
    wsl2: bool,
}

#[derive(Serialize)]
struct Probe {
    id: String,
    required: bool,
    status: &'static str,
    tool: Vec<String>,
    details: Option<String>,
}

impl Probe {
    fn of(p: &ProbeResult) -> Probe {
        Probe {
            id: p.id.clone(),
            required: p.required,
            status: p.status.as_str(),
            tool: p.tool.clone(),
            details: p.details.clone(),
        }
    }
}

/// One backend: whether a run of it would find its device, by the probes it would record.
#[derive(Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum BackendStatus {
    /// Every required probe passed and the device was detected.
    Available {
        /// The device's name.
        device: String,
    },
    /// A required probe failed or no device was detected.
    Unavailable {
        /// The one step that fixes it.
        fix: &'static str,
    },
}

#[derive(Serialize)]
struct Backend {
    backend: &'static str,
    #[serde(flatten)]
    status: BackendStatus,
    probes: Vec<Probe>,
    unsupported: Vec<String>,
}

/// What a backend needs when its probes fail.
fn backend_fix(backend: &str) -> &'static str {
    match backend {
        "cuda" => "install the NVIDIA driver so that `nvidia-smi` lists a GPU (and the CUDA toolkit for nvcc)",
        "rocm" => "install ROCm so that `rocminfo` lists a GPU agent (and HIP for hipcc)",
        "vulkan" => "sudo apt-get install vulkan-tools glslc (and a Vulkan driver for the GPU)",
        "metal" => "run on macOS with a Metal GPU (system_profiler SPDisplaysDataType)",
        _ => "make /proc/cpuinfo readable (it names the CPU model)",
    }
}

/// A set-up script of a kiln-qual checkout and what it produces.
struct SetupSpec {
    id: &'static str,
    script: &'static str,
    /// Files it produces (relative to the repository root); all must exist.
    produces: &'static [&'static str],
    /// Programs it installs that must be on `PATH` (any one of each group).
    programs: &'static [&'static [&'static str]],
    /// What needs it.
    used_by: &'static str,
}

/// The set-ups of `scripts/setup-*`.
const SETUPS: [SetupSpec; 5] = [
    SetupSpec {
        id: "real-server",
        script: "scripts/setup-real-server",
        produces: &[
            ".cache/real-server/llama-server",
            ".cache/real-server/root/models/tiny/config.json",
            ".cache/real-server/root/models/smollm2/config.json",
        ],
        programs: &[],
        used_by: "the real llama.cpp server tests, the serving example, the oracle's real runs",
    },
    SetupSpec {
        id: "reference-python",
        script: "scripts/setup-reference-python",
        produces: &[
            ".cache/venv-reference/bin/python",
            ".cache/venv-reference/.requirements-sha256",
        ],
        programs: &[],
        used_by: "the numerical oracle's reference worker, the campaign's reference engine",
    },
    SetupSpec {
        id: "python-interop",
        script: "scripts/setup-python-interop",
        produces: &[".cache/venv-interop/bin/python"],
        programs: &[],
        used_by: "the DSSE/in-toto interoperability test",
    },
    SetupSpec {
        id: "bench-peers",
        script: "scripts/setup-bench-peers",
        produces: &[
            ".cache/bench-clients/venv/bin/aiperf",
            ".cache/bench-clients/tokenizer/tokenizer.json",
        ],
        programs: &[],
        used_by: "the AIPerf peer benchmark test and scripts/bench-clients",
    },
    SetupSpec {
        id: "browser",
        script: "scripts/setup-browser",
        produces: &[],
        programs: &[&["chromium", "chromium-browser"], &["xmllint"]],
        used_by: "the headless-browser test of the HTML report, the JUnit XML schema test",
    },
];

#[derive(Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum SetupStatus {
    /// Everything it produces is there.
    Present,
    /// Something it produces is missing (or stale): run the fix.
    Missing { fix: String },
    /// Not a kiln-qual checkout (no such script): nothing to set up here.
    NotInCheckout,
}

#[derive(Serialize)]
struct Produced {
    path: String,
    present: bool,
}

#[derive(Serialize)]
struct Setup {
    id: &'static str,
    script: &'static str,
    used_by: &'static str,
    #[serde(flatten)]
    status: SetupStatus,
    produces: Vec<Produced>,
    notes: Vec<String>,
}

fn setup(spec: &SetupSpec, root: Option<&Path>) -> Setup {
    let Some(root) = root.filter(|r| r.join(spec.script).is_file()) else {
        return Setup {
            id: spec.id,
            script: spec.script,
            used_by: spec.used_by,
            status: SetupStatus::NotInCheckout,
            produces: Vec::new(),
            notes: Vec::new(),
        };
    };
    let mut produces: Vec<Produced> = spec
        .produces
        .iter()
        .map(|p| Produced {
            path: p.to_string(),
            present: root.join(p).exists(),
        })
        .collect();
    for group in spec.programs {
        let found = group.iter().find(|n| qual_trusted::program(n).is_ok());
        produces.push(Produced {
            path: format!("PATH: {}", found.copied().unwrap_or(group[0])),
            present: found.is_some(),
        });
    }
    let mut notes = Vec::new();
    if spec.id == "reference-python" {
        if let Some(n) = reference_stamp(root) {
            notes.push(n);
        }
    }
    let ok = produces.iter().all(|p| p.present) && notes.is_empty();
    Setup {
        id: spec.id,
        script: spec.script,
        used_by: spec.used_by,
        status: if ok {
            SetupStatus::Present
        } else {
            SetupStatus::Missing {
                fix: spec.script.to_string(),
            }
        },
        produces,
        notes,
    }
}

/// The reference environment's stamp against its requirements (a changed pin rebuilds it).
fn reference_stamp(root: &Path) -> Option<String> {
    let stamp = root.join(".cache/venv-reference/.requirements-sha256");
    let recorded = qual_exec::read_system_file(&stamp).ok()?;
    let want = qual_json::sha256_file(
        &root.join("tools/reference/requirements.txt"),
        Some(1 << 20),
    )
    .ok()?;
    let want = want
        .sha256
        .strip_prefix("sha256:")
        .unwrap_or(&want.sha256)
        .to_string();
    (recorded.trim() != want).then(|| {
        "stale: built from other requirements than tools/reference/requirements.txt".to_string()
    })
}

fn backend(name: &'static str, platform: &qual_probe::platform::Platform) -> (Backend, Vec<Probe>) {
    // A case inherits neither CUDA variable from the host (the closed case environment): what
    // a case of a workload that sets none would use.
    let cases = Ok(qual_probe::cuda::CudaVisibility::default());
    let c = qual_probe::backend::capture(name, platform, &cases);
    let (toolchain, own): (Vec<&ProbeResult>, Vec<&ProbeResult>) = c
        .probes
        .iter()
        .partition(|p| p.id == "rustc-version" || p.id == "cargo-version");
    let required_ok = own
        .iter()
        .all(|p| !p.required || p.status == ProbeStatus::Passed);
    let status = if required_ok && c.device.detected() {
        BackendStatus::Available {
            device: c.device.name.clone(),
        }
    } else {
        BackendStatus::Unavailable {
            fix: backend_fix(name),
        }
    };
    (
        Backend {
            backend: name,
            status,
            probes: own.into_iter().map(Probe::of).collect(),
            unsupported: c.unsupported.clone(),
        },
        toolchain.into_iter().map(Probe::of).collect(),
    )
}

fn report(root: Option<&Path>) -> Report {
    let platform = qual_probe::platform::probe();
    let mut toolchain = Vec::new();
    let mut backends = Vec::new();
    for name in qual_contract::constants::BACKENDS {
        let (b, t) = backend(name, &platform);
        if toolchain.is_empty() {
            toolchain = t;
        }
        backends.push(b);
    }
    let sandbox = match root {
        Some(r) => {
            let protected = qual_runner::case_box::protected_paths(r, None);
            qual_runner::case_box::sandbox(r, &protected, None)
        }
        None => qual_exec::Sandbox {
            host: qual_exec::HostFiles::ReadOnly,
            ..Default::default()
        },
    };
    Report {
        schema: SCHEMA,
        host: Host {
            os: platform.os.name.clone(),
            version: platform.os.version.clone(),
            kernel: platform.os.kernel.clone(),
            architecture: platform.os.architecture.clone(),
            wsl2: platform.wsl2,
        },
        toolchain,
        backends,
        containment: qual_exec::mechanisms::probe_mechanisms(&sandbox),
        repository: root.map(|r| r.display().to_string()),
        setups: SETUPS.iter().map(|s| setup(s, root)).collect(),
    }
}

/// Runs `kiln-qual doctor`.
pub fn run(a: DoctorArgs) -> i32 {
    let root = match a.root {
        Some(r) => Some(r),
        None => {
            match std::env::current_dir() {
                Ok(cwd) => qual_probe::git::Repo::discover(&cwd)
                    .ok()
                    .map(|repo| repo.root().to_path_buf()),
                Err(e) => {
                    errln!("kiln-qual: failed to inspect the host: cannot read the current directory: {e}");
                    return exit::FAILED;
                }
            }
        }
    };
    let r = report(root.as_deref());
    if a.json {
        crate::output::print_json(&r);
    } else {
        print_text(&r);
    }
    exit::OK
}

fn print_text(r: &Report) {
    let h = &r.host;
    outln!(
        "host: {} {} (kernel {}, {}{})",
        esc(&h.os),
        esc(&h.version),
        esc(&h.kernel),
        esc(&h.architecture),
        if h.wsl2 { ", WSL2" } else { "" }
    );
    outln!("\nbackends:");
    for b in &r.backends {
        // One entry per distinct tool and outcome (the Vulkan probe runs vulkaninfo twice:
        // its summary and its device list).
        let mut tools: Vec<String> = b
            .probes
            .iter()
            .filter(|p| !p.tool.is_empty())
            .map(|p| match &p.details {
                Some(d) if p.status != "passed" => format!("{}: {}", p.tool[0], d),
                _ => format!("{} {}", p.tool[0], p.status),
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        tools.retain(|t| seen.insert(t.clone()));
        let tools = if tools.is_empty() {
            "host facts".to_string()
        } else {
            tools.join(", ")
        };
        match &b.status {
            BackendStatus::Available { device } => {
                outln!(
                    "  ok       {:<7} {} ({})",
                    b.backend,
                    esc(device),
                    esc(&tools)
                )
            }
            BackendStatus::Unavailable { fix } => {
                outln!("  missing  {:<7} ({})", b.backend, esc(&tools));
                outln!("           fix: {fix}");
            }
        }
    }
    outln!("\ncontainment (the case box every run needs):");
    for m in &r.containment {
        match &m.status {
            MechanismStatus::Available => outln!("  ok       {}", m.id),
            MechanismStatus::NotNeeded { reason } => outln!("  n/a      {}: {reason}", m.id),
            MechanismStatus::NotChecked { blocked_by } => {
                outln!("  unknown  {}: not reached (fix {blocked_by} first)", m.id)
            }
            MechanismStatus::Missing { reason, fix } => {
                outln!("  missing  {}: {}", m.id, esc(reason));
                outln!("           fix: {fix}");
            }
        }
    }
    match &r.repository {
        Some(root) => outln!("\nset-ups of {}:", esc(root)),
        None => outln!("\nset-ups: not inside a git repository"),
    }
    for s in &r.setups {
        match &s.status {
            SetupStatus::Present => {
                let paths: Vec<&str> = s.produces.iter().map(|p| p.path.as_str()).collect();
                outln!("  ok       {:<17} {}", s.id, s.used_by);
                outln!("           has: {}", esc(&paths.join(", ")));
            }
            SetupStatus::NotInCheckout => {
                outln!(
                    "  n/a      {:<17} not a kiln-qual checkout (no {})",
                    s.id,
                    s.script
                )
            }
            SetupStatus::Missing { fix } => {
                let missing: Vec<&str> = s
                    .produces
                    .iter()
                    .filter(|p| !p.present)
                    .map(|p| p.path.as_str())
                    .chain(s.notes.iter().map(String::as_str))
                    .collect();
                outln!("  missing  {:<17} {}", s.id, s.used_by);
                outln!("           lacks: {}", esc(&missing.join(", ")));
                outln!("           fix: {fix}");
            }
        }
    }
}
