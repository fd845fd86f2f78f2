//! Lexical constants, enumerations and bounds of the workload v1 contract.
//!
//! The values are facts of the Kiln v1 wire contract and must not drift: enum lists are kept
//! in the sorted order the original implementation prints in its error messages.

use regex::Regex;
use std::sync::LazyLock;

/// `schema_version` of workload v1.
pub const SCHEMA_VERSION: i64 = 1;
/// Case-result format name.
pub const RESULT_FORMAT: &str = "qualification-case-result-v1";
/// Environment variable naming the case-result path.
pub const RESULT_PATH_VARIABLE: &str = "KILN_QUALIFICATION_CASE_RESULT";
/// Environment variable naming the selected variant.
pub const VARIANT_ID_VARIABLE: &str = "KILN_QUALIFICATION_VARIANT_ID";
/// Environment variable that tells a case which network isolation it runs under.
pub const NETWORK_ISOLATION_VARIABLE: &str = "KILN_QUALIFICATION_NETWORK_ISOLATION";
/// Environment keys a workload may not set.
pub const RUNNER_OWNED_ENVIRONMENT: [&str; 2] = [RESULT_PATH_VARIABLE, VARIANT_ID_VARIABLE];
/// Policy id of the closed case environment.
pub const CASE_ENVIRONMENT_POLICY: &str = "closed-qualification-case-v1";
/// Host variables a case inherits under `closed-qualification-case-v1` (when present); every
/// other variable comes from the case's own `environment` or is runner-owned.
pub const CASE_ENVIRONMENT_BASE: [&str; 11] = [
    "CARGO_HOME",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "RUSTUP_HOME",
    "SHELL",
    "TMPDIR",
    "USER",
];
/// Placeholders the runner fills in; they cannot be declared as variables.
pub const RESERVED_PLACEHOLDERS: [&str; 3] = ["seed", "model_path", "host_id"];
/// Kinds whose every variant must consume `${model_path}`.
pub const MODEL_KINDS: [&str; 5] = ["serving", "performance", "training", "eval", "soak"];

/// Most repetitions of the case sequence.
pub const MAX_REPETITIONS: u64 = 1000;
/// Longest per-execution deadline (48 h).
pub const MAX_CASE_TIMEOUT_SECONDS: u64 = 172_800;
/// Largest declared wall budget of a variant (7 days).
pub const MAX_DECLARED_WALL_SECONDS: u64 = 604_800;
/// Most case executions of a variant (repetitions × cases).
pub const MAX_CASE_EXECUTIONS: u64 = 10_000;

/// Workload kinds.
pub const KINDS: [&str; 7] = [
    "correctness",
    "environment",
    "eval",
    "performance",
    "serving",
    "soak",
    "training",
];
/// Backend families.
pub const BACKENDS: [&str; 5] = ["cpu", "cuda", "metal", "rocm", "vulkan"];
/// Accelerator backends (they require a device).
pub const ACCELERATOR_BACKENDS: [&str; 4] = ["cuda", "metal", "rocm", "vulkan"];
/// Seed delivery modes.
pub const SEED_DELIVERIES: [&str; 4] = ["argv", "environment", "fixed_fixture", "not_applicable"];
/// Variable types.
pub const VARIABLE_TYPES: [&str; 4] = ["boolean", "integer", "number", "string"];
/// Device requirements.
pub const DEVICE_REQUIREMENTS: [&str; 2] = ["none", "required"];
/// Skip policies.
pub const SKIP_POLICIES: [&str; 2] = ["allow", "fail"];
/// Output streams.
pub const STREAMS: [&str; 3] = ["combined", "stderr", "stdout"];
/// Output assertion matches.
pub const MATCHES: [&str; 2] = ["forbidden", "required"];
/// Result producers.
pub const PRODUCERS: [&str; 2] = ["command", "runner"];
/// Comparison modes.
pub const MODES: [&str; 4] = [
    "cross_backend_correctness",
    "declared_ab_variants",
    "same_environment_performance",
    "self_contained_correctness",
];
/// Metric scopes.
pub const SCOPES: [&str; 1] = ["result"];
/// Metric classes.
pub const METRIC_CLASSES: [&str; 2] = ["correctness", "performance"];
/// Comparison operators.
pub const OPERATORS: [&str; 3] = ["equal", "not_greater", "not_less"];

/// Shell executables (lowercased basenames).
pub const SHELLS: [&str; 9] = [
    "sh",
    "bash",
    "dash",
    "zsh",
    "fish",
    "pwsh",
    "powershell",
    "cmd",
    "cmd.exe",
];
/// Shell evaluation flags (lowercased).
pub const SHELL_EVAL_FLAGS: [&str; 4] = ["-c", "/c", "-command", "-encodedcommand"];

/// A runner-owned metric's fixed definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunnerMetric {
    /// Metric name.
    pub name: &'static str,
    /// Unit.
    pub unit: &'static str,
    /// Aggregation.
    pub aggregation: &'static str,
    /// Direction.
    pub lower_is_better: bool,
}

/// The runner-owned metrics, sorted by name.
pub const RUNNER_METRICS: [RunnerMetric; 3] = [
    RunnerMetric {
        name: "case_pass",
        unit: "bool",
        aggregation: "exact",
        lower_is_better: false,
    },
    RunnerMetric {
        name: "exit_code",
        unit: "code",
        aggregation: "exact",
        lower_is_better: false,
    },
    RunnerMetric {
        name: "output_assertion_failures",
        unit: "count",
        aggregation: "sum",
        lower_is_better: true,
    },
];

/// The canonical definition of a runner metric, if `name` is one.
pub fn runner_metric(name: &str) -> Option<RunnerMetric> {
    RUNNER_METRICS.iter().copied().find(|m| m.name == name)
}

macro_rules! re {
    ($name:ident, $pat:expr) => {
        #[doc = concat!("`", $pat, "`")]
        pub static $name: LazyLock<Regex> = LazyLock::new(|| Regex::new($pat).expect("valid"));
    };
}

re!(IDENTIFIER, r"^[a-z0-9][a-z0-9._-]{2,127}$");
re!(VARIABLE_NAME, r"^[a-z][a-z0-9_]{1,63}$");
re!(METRIC_NAME, r"^[a-z][a-z0-9_.-]{0,127}$");
re!(ENV_KEY, r"^[A-Z_][A-Z0-9_]*$");
re!(PLACEHOLDER, r"^\$\{([a-z][a-z0-9_]{1,63}|seed)\}$");
re!(DOT_PATH, r"^[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)*$");
re!(CONFIG_KEY, r"^[a-z][a-z0-9_-]*$");
re!(HOST_ID, r"^[a-z0-9][a-z0-9._-]{1,63}$");

/// The variable name of a whole-value placeholder (`${name}`), if `s` is one.
pub fn placeholder_name(s: &str) -> Option<&str> {
    PLACEHOLDER
        .captures(s)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str())
}
