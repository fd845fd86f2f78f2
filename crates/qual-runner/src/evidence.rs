//! The shapes of the evidence documents the runner writes: `environment.json`
//! ([`EnvironmentEvidence`]), `run-config.json` ([`RunConfig`], one `RunConfigCase` per
//! execution, with its `ContainmentDoc`) and each execution's `case-result.json`
//! (`CaseResultDoc`). The receipt itself is `qual_receipt::model::Receipt`.
//!
//! Each is a typed document serialized through [`crate::document::to_value`] and written by
//! `qual_receipt::write` (pretty, sorted keys), so a member's presence is decided here, by an
//! `Option` with `skip_serializing_if`, and nowhere else. These types hold borrowed facts; they
//! compute nothing and never read or write a file.

use std::collections::BTreeMap;

use qual_exec::{Captured, Execution, Termination};
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

/// How the command ended, as containment evidence records it.
#[derive(Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum TerminationDoc {
    Exited { code: i64 },
    Signaled { signal: i64 },
    TimedOut { signal_used: i64 },
    Interrupted { signal_used: i64 },
    Aborted { signal_used: i64 },
}

impl TerminationDoc {
    pub(crate) fn of(t: &Termination) -> TerminationDoc {
        match t {
            Termination::Exited { code } => TerminationDoc::Exited {
                code: i64::from(*code),
            },
            Termination::Signaled { signal } => TerminationDoc::Signaled {
                signal: i64::from(*signal),
            },
            Termination::TimedOut { signal_used } => TerminationDoc::TimedOut {
                signal_used: i64::from(*signal_used),
            },
            Termination::Interrupted { signal_used } => TerminationDoc::Interrupted {
                signal_used: i64::from(*signal_used),
            },
            Termination::Aborted { signal_used, .. } => TerminationDoc::Aborted {
                signal_used: i64::from(*signal_used),
            },
        }
    }
}

/// A process that outlived the command.
#[derive(Serialize)]
pub(crate) struct ResidueDoc<'a> {
    pub(crate) pid: u64,
    pub(crate) box_pid: Option<u64>,
    pub(crate) session: u64,
    pub(crate) cmdline: &'a str,
    pub(crate) signal: i64,
}

/// What was captured of one output stream.
#[derive(Serialize)]
pub(crate) struct StreamDoc {
    pub(crate) total_bytes: u64,
    pub(crate) truncated: bool,
}

/// The seccomp part of the box evidence.
#[derive(Serialize)]
pub(crate) struct SeccompDoc<'a> {
    pub(crate) filter: &'a str,
    pub(crate) refused: &'a [String],
}

/// The box evidence of one execution (what contained the case).
#[derive(Serialize)]
pub(crate) struct SandboxDoc<'a> {
    pub(crate) namespaces: &'a [String],
    pub(crate) pid_namespace_init: &'a str,
    pub(crate) capabilities: &'a str,
    pub(crate) no_new_privs: bool,
    pub(crate) seccomp: SeccompDoc<'a>,
    pub(crate) read_only_paths: &'a [String],
    pub(crate) writable_paths: &'a [String],
    pub(crate) host_files: &'a str,
    pub(crate) private_mounts: &'a [String],
    pub(crate) devices: &'a [String],
    pub(crate) fresh_proc: bool,
    pub(crate) descriptors: &'a str,
    pub(crate) pid_limit: Option<u64>,
    pub(crate) pid_limit_source: &'a str,
    pub(crate) enclosing_box: bool,
}

impl<'a> SandboxDoc<'a> {
    pub(crate) fn of(b: &'a qual_exec::SandboxRecord) -> SandboxDoc<'a> {
        SandboxDoc {
            namespaces: &b.namespaces,
            pid_namespace_init: &b.pid_namespace_init,
            capabilities: &b.capabilities,
            no_new_privs: b.no_new_privs,
            seccomp: SeccompDoc {
                filter: &b.seccomp.filter,
                refused: &b.seccomp.refused,
            },
            read_only_paths: &b.read_only_paths,
            writable_paths: &b.writable_paths,
            host_files: &b.host_files,
            private_mounts: &b.private_mounts,
            devices: &b.devices,
            fresh_proc: b.fresh_proc,
            descriptors: &b.descriptors,
            pid_limit: b.pid_limit,
            pid_limit_source: &b.pid_limit_source,
            enclosing_box: b.enclosing_box,
        }
    }
}

/// The containment evidence of one execution (the run config's `containment`).
#[derive(Serialize)]
pub(crate) struct ContainmentDoc<'a> {
    pub(crate) mechanism: &'a str,
    pub(crate) network: &'a str,
    #[serde(rename = "box")]
    pub(crate) sandbox: SandboxDoc<'a>,
    pub(crate) group_killed: bool,
    pub(crate) pipes_closed: bool,
    pub(crate) clean: bool,
    pub(crate) residue: Vec<ResidueDoc<'a>>,
    pub(crate) termination: TerminationDoc,
    pub(crate) stdout: StreamDoc,
    pub(crate) stderr: StreamDoc,
}

impl<'a> ContainmentDoc<'a> {
    pub(crate) fn of(e: &'a Execution) -> ContainmentDoc<'a> {
        let c = &e.containment;
        let stream = |s: &Captured| StreamDoc {
            total_bytes: s.total_bytes,
            truncated: s.truncated,
        };
        ContainmentDoc {
            mechanism: c.mechanism.as_str(),
            network: c.network.mechanism_id(),
            sandbox: SandboxDoc::of(&c.sandbox),
            group_killed: c.group_killed,
            pipes_closed: c.pipes_closed,
            clean: c.clean,
            residue: c
                .residue
                .iter()
                .map(|r| ResidueDoc {
                    pid: u64::from(r.pid),
                    box_pid: r.box_pid.map(u64::from),
                    session: u64::from(r.session),
                    cmdline: &r.cmdline,
                    signal: i64::from(r.signal),
                })
                .collect(),
            termination: TerminationDoc::of(&e.termination),
            stdout: stream(&e.stdout),
            stderr: stream(&e.stderr),
        }
    }
}

/// `case-result.json`: the normalized record of one execution.
#[derive(Serialize)]
pub(crate) struct CaseResultDoc<'a> {
    pub(crate) schema_version: u64,
    pub(crate) case_id: &'a str,
    pub(crate) status: &'a str,
    pub(crate) duration_seconds: f64,
    #[serde(serialize_with = "raw")]
    pub(crate) effective_config: &'a Value,
    #[serde(serialize_with = "raw")]
    pub(crate) metrics: &'a Value,
    #[serde(serialize_with = "raw")]
    pub(crate) tolerances: &'a Value,
    pub(crate) details: Option<&'a str>,
}

/// One execution's entry in `run-config.json`'s `cases`.
#[derive(Serialize)]
pub(crate) struct RunConfigCase<'a> {
    pub(crate) case_id: &'a str,
    pub(crate) repetition: u64,
    pub(crate) argv: &'a [String],
    pub(crate) executed_argv: &'a [String],
    pub(crate) working_directory: &'a str,
    pub(crate) environment_overrides: &'a BTreeMap<String, String>,
    pub(crate) runner_environment: BTreeMap<&'static str, &'a str>,
    pub(crate) case_result_path: String,
    pub(crate) process_environment_sha256: String,
    pub(crate) timeout_seconds: u64,
    pub(crate) expected_exit_codes: &'a [u8],
    pub(crate) output_assertions: &'a [qual_contract::OutputAssertion],
    pub(crate) result_protocol: &'a qual_contract::ResultProtocol,
    #[serde(serialize_with = "raw")]
    pub(crate) containment: &'a Value,
}
