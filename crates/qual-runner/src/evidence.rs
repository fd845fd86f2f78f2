//! The run-level evidence documents the runner writes beside the case evidence:
//! `environment.json` ([`EnvironmentEvidence`]) and `run-config.json` ([`RunConfig`]).
//!
//! Each is a typed document serialized through [`crate::document::to_value`] and written by
//! `qual_receipt::write` (pretty, sorted keys), so a member's presence is decided here, by an
//! `Option` with `skip_serializing_if`, and nowhere else. These types hold borrowed facts; they
//! compute nothing and never read or write a file.

use std::collections::BTreeMap;

use qual_json::Value;
use qual_probe::platform::Platform;
use qual_receipt::model::OsIdentity;
use serde::Serialize;

use crate::document::{raw, Raw};
use crate::environment::RedactedValue;

/// `environment.json`: the receipt's environment, every probe result and the raw host facts.
#[derive(Serialize)]
pub struct EnvironmentEvidence<'a> {
    /// The same environment the receipt records.
    pub environment: EnvironmentDoc<'a>,
    /// Every backend probe result, in probe order.
    #[serde(serialize_with = "raw")]
    pub probe_results: &'a Value,
    /// Raw host facts.
    pub raw: RawEnvironment<'a>,
}

/// The environment object (host, OS, device, runtime, compiler, optional platform).
#[derive(Serialize)]
pub struct EnvironmentDoc<'a> {
    /// Host id.
    pub host_id: &'a str,
    /// OS identity.
    pub os: OsDoc<'a>,
    /// Device evidence.
    #[serde(serialize_with = "raw")]
    pub device: &'a Value,
    /// Runtime versions (and `execution_environment_sha256`).
    pub runtime: &'a BTreeMap<String, String>,
    /// Compiler versions.
    pub compiler: &'a BTreeMap<String, String>,
    /// The WSL2 platform object, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<Raw<'a>>,
}

/// The OS identity.
#[derive(Serialize)]
pub struct OsDoc<'a> {
    /// OS name.
    pub name: &'a str,
    /// OS version.
    pub version: &'a str,
    /// Kernel release.
    pub kernel: &'a str,
    /// Machine architecture.
    pub architecture: &'a str,
}

impl<'a> OsDoc<'a> {
    /// The document form of an OS identity.
    pub fn of(os: &'a OsIdentity) -> OsDoc<'a> {
        OsDoc {
            name: &os.name,
            version: &os.version,
            kernel: &os.kernel,
            architecture: &os.architecture,
        }
    }
}

/// `environment.json`'s `raw`.
#[derive(Serialize)]
pub struct RawEnvironment<'a> {
    /// Backend id.
    pub backend: &'a str,
    /// Host variables with a captured prefix, redacted.
    pub captured_environment: BTreeMap<String, RedactedValue>,
    /// Host facts.
    pub host: HostDoc<'a>,
    /// The runner's containment.
    pub runner_containment: RunnerContainment<'a>,
    /// Why the capture did not run, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'static str>,
}

/// Host facts (`null` where unavailable).
#[derive(Serialize)]
pub struct HostDoc<'a> {
    /// CPU model.
    pub cpu_model: Option<&'a str>,
    /// Logical CPUs.
    pub logical_cpus: Option<u64>,
    /// Total memory.
    pub memory_total_bytes: Option<u64>,
    /// Available memory.
    pub memory_available_bytes: Option<u64>,
    /// Whether the host is WSL2.
    pub wsl2: bool,
    /// Whether the host is macOS.
    pub macos: bool,
    /// Facts that could not be read.
    pub unavailable: &'a [String],
}

impl<'a> HostDoc<'a> {
    /// The document form of the platform probe.
    pub fn of(plat: &'a Platform) -> HostDoc<'a> {
        HostDoc {
            cpu_model: plat.cpu_model.as_deref(),
            logical_cpus: plat.logical_cpus,
            memory_total_bytes: plat.memory_total_bytes,
            memory_available_bytes: plat.memory_available_bytes,
            wsl2: plat.wsl2,
            macos: plat.macos,
            unavailable: &plat.unavailable,
        }
    }
}

/// The runner's containment as `environment.json` records it.
#[derive(Serialize)]
pub struct RunnerContainment<'a> {
    /// Network isolation mechanism id.
    pub network_isolation: &'a str,
}

/// `run-config.json`: what the run was bound to, its budgets and every execution's entry.
#[derive(Serialize)]
pub struct RunConfig<'a> {
    /// Always 1.
    pub schema_version: u64,
    /// Receipt id.
    pub receipt_id: &'a str,
    /// Workload id.
    pub workload_id: &'a str,
    /// Workload file digest.
    pub workload_sha256: &'a str,
    /// Workload path relative to the root.
    pub workload_path: &'a str,
    /// Variant id.
    pub variant_id: &'a str,
    /// Backend id.
    pub backend: &'a str,
    /// Resolved variables.
    pub variables: BTreeMap<&'a str, Raw<'a>>,
    /// The workload's `determinism` object as committed (`null` when absent).
    #[serde(serialize_with = "raw")]
    pub determinism: &'a Value,
    /// Network isolation mechanism id.
    pub network_isolation: &'a str,
    /// Always `null` (no supervision of the model during the run).
    pub model_fingerprint_supervision: (),
    /// Source-tree profile.
    pub source_tree_profile: &'a str,
    /// Files in the source-tree digest.
    pub source_tree_file_count: u64,
    /// Executions run (0 when none could start).
    pub case_execution_count: u64,
    /// Bytes kept per output stream.
    pub per_stream_output_limit_bytes: u64,
    /// Capture budget of the run.
    pub max_run_capture_bytes: u64,
    /// Largest case result accepted.
    pub per_case_result_limit_bytes: u64,
    /// Structured-evidence budget of the run.
    pub max_run_structured_bytes: u64,
    /// Case environment policy id.
    pub case_environment_policy: &'a str,
    /// `execution_environment_sha256`.
    pub case_base_environment_sha256: &'a str,
    /// The base environment, redacted.
    pub case_base_environment: BTreeMap<String, RedactedValue>,
    /// Infrastructure failures, in order.
    pub infrastructure_failures: &'a [String],
    /// What stopped the run before any case, when something did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_case_failure: Option<&'static str>,
    /// One entry per execution (`crate::execute`).
    pub cases: Vec<Raw<'a>>,
}
