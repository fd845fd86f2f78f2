//! Typed workload v1, for code that consumes a **validated** workload (the runner, `show`).
//!
//! Invariant: values of these types are only built from documents that passed
//! [`crate::validate_workload`]; serde's `deny_unknown_fields` is a second, closed gate. The
//! JSON Schema in `schemas/workload-v1.schema.json` is generated from these types
//! (`kiln-qual` test `schema_is_current` keeps the checked-in copy current).

#[cfg(feature = "json-schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Workload kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Correctness.
    Correctness,
    /// Environment capture.
    Environment,
    /// Evaluation.
    Eval,
    /// Performance.
    Performance,
    /// Serving.
    Serving,
    /// Soak / endurance.
    Soak,
    /// Training.
    Training,
}

impl Kind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Correctness => "correctness",
            Kind::Environment => "environment",
            Kind::Eval => "eval",
            Kind::Performance => "performance",
            Kind::Serving => "serving",
            Kind::Soak => "soak",
            Kind::Training => "training",
        }
    }
    /// Whether every variant must consume `${model_path}`.
    pub fn requires_model(self) -> bool {
        crate::constants::MODEL_KINDS.contains(&self.as_str())
    }
}

/// Backend family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Host CPU.
    Cpu,
    /// NVIDIA CUDA.
    Cuda,
    /// Apple Metal.
    Metal,
    /// AMD ROCm.
    Rocm,
    /// Vulkan.
    Vulkan,
}

impl Backend {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Metal => "metal",
            Backend::Rocm => "rocm",
            Backend::Vulkan => "vulkan",
        }
    }
}

/// How the deterministic seed reaches the cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SeedDelivery {
    /// `${seed}` in argv.
    Argv,
    /// `${seed}` in the environment.
    Environment,
    /// Baked into a committed fixture.
    FixedFixture,
    /// No seed (environment workloads).
    NotApplicable,
}

/// `determinism` block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Determinism {
    /// Deterministic seed (null only for environment workloads).
    #[cfg_attr(feature = "json-schema", schemars(range(min = 0)))]
    pub seed: Option<u64>,
    /// Delivery mode.
    pub seed_delivery: SeedDelivery,
    /// Repetitions of the case sequence.
    #[cfg_attr(feature = "json-schema", schemars(range(min = 1, max = 1000)))]
    pub repetitions: u64,
    /// Always `declared`.
    pub case_order: CaseOrder,
    /// Always 1.
    #[cfg_attr(feature = "json-schema", schemars(range(min = 1, max = 1)))]
    pub max_parallel_cases: u64,
    /// Always `forbidden`.
    pub network_access: NetworkAccess,
}

/// `determinism.case_order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CaseOrder {
    /// Stored order.
    Declared,
}

/// `determinism.network_access`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NetworkAccess {
    /// Cases run offline.
    Forbidden,
}

/// Variable type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum VariableType {
    /// JSON bool.
    Boolean,
    /// Integer.
    Integer,
    /// Float.
    Number,
    /// String.
    String,
}

/// A declared operator variable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Variable {
    /// Name (`^[a-z][a-z0-9_]{1,63}$`).
    #[cfg_attr(
        feature = "json-schema",
        schemars(regex(pattern = r"^[a-z][a-z0-9_]{1,63}$"))
    )]
    pub name: String,
    /// What it is for.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1, max = 256)))]
    pub description: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: VariableType,
    /// Whether every variant must consume it (then `default` is null).
    pub required: bool,
    /// Default value.
    pub default: Option<serde_json::Value>,
    /// Constraints.
    pub constraints: Constraints,
}

/// Variable constraints; all four keys always present.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// Allowed values, canonically sorted; empty means unrestricted.
    pub allowed_values: Vec<serde_json::Value>,
    /// Inclusive minimum (numeric types).
    pub minimum: Option<f64>,
    /// Inclusive maximum (numeric types).
    pub maximum: Option<f64>,
    /// Full-match pattern (string type).
    pub pattern: Option<String>,
}

/// Device requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeviceRequirement {
    /// No device needed.
    None,
    /// A device of the backend must be present.
    Required,
}

/// Skip policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SkipPolicy {
    /// Skipped cases are tolerated.
    Allow,
    /// Any skip fails the verdict.
    Fail,
}

/// A backend/configuration selection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Identifier.
    #[cfg_attr(
        feature = "json-schema",
        schemars(regex(pattern = r"^[a-z0-9][a-z0-9._-]{2,127}$"))
    )]
    pub id: String,
    /// What it selects.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1, max = 512)))]
    pub description: String,
    /// Backend family.
    pub backend: Backend,
    /// Device requirement.
    pub device_requirement: DeviceRequirement,
    /// Skip policy.
    pub skip_policy: SkipPolicy,
    /// Comparison-visible resolved configuration (nested objects of scalars).
    pub effective_config: serde_json::Map<String, serde_json::Value>,
    /// Ordered cases.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1)))]
    pub cases: Vec<Case>,
}

/// Output stream of an assertion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// stdout + "\n" + stderr.
    Combined,
    /// stderr.
    Stderr,
    /// stdout.
    Stdout,
}

/// Assertion polarity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// The pattern must not be found.
    Forbidden,
    /// The pattern must be found.
    Required,
}

/// An output assertion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OutputAssertion {
    /// Stream searched.
    pub stream: Stream,
    /// Polarity.
    #[serde(rename = "match")]
    pub r#match: Match,
    /// Unanchored regex.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1, max = 512)))]
    pub pattern: String,
}

/// Who writes the case result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Producer {
    /// The command writes `qualification-case-result-v1`.
    Command,
    /// The runner synthesises it.
    Runner,
}

/// Structured-result ownership.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ResultProtocol {
    /// Always `qualification-case-result-v1`.
    pub format: String,
    /// Producer.
    pub producer: Producer,
    /// Always `KILN_QUALIFICATION_CASE_RESULT`.
    pub path_environment_variable: String,
    /// Declared metric names, strictly ascending.
    pub declared_metrics: Vec<String>,
}

/// One argv command with its deadline and contract.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Stable result id.
    #[cfg_attr(
        feature = "json-schema",
        schemars(regex(pattern = r"^[a-z0-9][a-z0-9._-]{2,127}$"))
    )]
    pub id: String,
    /// What it checks.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1, max = 512)))]
    pub description: String,
    /// Whether a failure or skip fails the verdict.
    pub required: bool,
    /// argv, never a shell string.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1)))]
    pub command: Vec<String>,
    /// Repository-relative POSIX path.
    pub working_directory: String,
    /// Case-owned environment additions.
    pub environment: BTreeMap<String, String>,
    /// Per-execution deadline.
    #[cfg_attr(feature = "json-schema", schemars(range(min = 1, max = 172800)))]
    pub timeout_seconds: u64,
    /// Accepted exit codes, strictly ascending.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1)))]
    pub expected_exit_codes: Vec<u8>,
    /// Output assertions.
    pub output_assertions: Vec<OutputAssertion>,
    /// Result protocol.
    pub result_protocol: ResultProtocol,
}

/// Comparison mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Rocm↔vulkan style correctness equality.
    CrossBackendCorrectness,
    /// Declared A/B variants on one backend.
    DeclaredAbVariants,
    /// Same variant, same environment.
    SameEnvironmentPerformance,
    /// Verdict from the cases themselves; no pairs.
    SelfContainedCorrectness,
}

/// A declared A/B pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct VariantPair {
    /// Baseline variant.
    pub baseline_variant_id: String,
    /// Candidate variant.
    pub candidate_variant_id: String,
    /// Exactly the config leaf differences.
    pub allowed_effective_config_differences: Vec<String>,
}

/// A cross-backend pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BackendPair {
    /// Endpoint A backend.
    pub backend_a: Backend,
    /// Endpoint A variant.
    pub variant_a_id: String,
    /// Endpoint B backend.
    pub backend_b: Backend,
    /// Endpoint B variant.
    pub variant_b_id: String,
    /// Receipt environment leaves expected to differ.
    pub allowed_environment_differences: Vec<String>,
}

/// Rule operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    /// |c − b| ≤ tolerance.
    Equal,
    /// c − b ≤ tolerance.
    NotGreater,
    /// b − c ≤ tolerance.
    NotLess,
}

/// Metric class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MetricClass {
    /// Correctness.
    Correctness,
    /// Performance.
    Performance,
}

/// Metric scope (always `result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Owned by one case result.
    Result,
}

/// A comparison rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MetricRule {
    /// Scope.
    pub scope: Scope,
    /// Case id owning the metric.
    pub result_id: String,
    /// Metric name.
    pub metric: String,
    /// Class.
    pub metric_class: MetricClass,
    /// Unit.
    pub unit: String,
    /// Aggregation.
    pub aggregation: String,
    /// Direction.
    pub lower_is_better: bool,
    /// Operator.
    pub operator: Operator,
    /// Absolute tolerance (≥ 0).
    #[cfg_attr(feature = "json-schema", schemars(range(min = 0)))]
    pub absolute_tolerance: f64,
    /// Relative tolerance (fraction, ≥ 0).
    #[cfg_attr(feature = "json-schema", schemars(range(min = 0)))]
    pub relative_tolerance: f64,
    /// Required or advisory.
    pub required: bool,
}

/// How receipts of this workload may be compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ComparisonPolicy {
    /// Mode.
    pub mode: Mode,
    /// A/B pairs.
    pub variant_pairs: Vec<VariantPair>,
    /// Cross-backend pairs.
    pub backend_pairs: Vec<BackendPair>,
    /// Rules.
    pub metric_rules: Vec<MetricRule>,
}

/// A workload v1 contract.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(
    feature = "json-schema",
    schemars(title = "kiln qualification workload v1")
)]
pub struct Workload {
    /// Always 1.
    #[cfg_attr(feature = "json-schema", schemars(range(min = 1, max = 1)))]
    pub schema_version: u64,
    /// Identifier recorded in receipts.
    #[cfg_attr(
        feature = "json-schema",
        schemars(regex(pattern = r"^[a-z0-9][a-z0-9._-]{2,127}$"))
    )]
    pub workload_id: String,
    /// Purpose.
    pub kind: Kind,
    /// Description.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1, max = 512)))]
    pub description: String,
    /// Determinism.
    pub determinism: Determinism,
    /// Operator variables.
    pub variables: Vec<Variable>,
    /// Variants, strictly ascending by id.
    #[cfg_attr(feature = "json-schema", schemars(length(min = 1)))]
    pub variants: Vec<Variant>,
    /// Comparison policy (null only for environment and soak).
    pub comparison_policy: Option<ComparisonPolicy>,
}

impl Workload {
    /// The variant with this id.
    pub fn variant(&self, id: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.id == id)
    }
}

/// The JSON Schema of workload v1, pretty-printed with a trailing newline.
///
/// Every object is closed and lists **all** its keys as required: nullable keys must be
/// present with `null` (schemars would otherwise leave `Option` fields optional). Only with the
/// `json-schema` feature: the crate's own test checks `schemas/workload-v1.schema.json` with it.
#[cfg(feature = "json-schema")]
pub fn workload_schema_json() -> String {
    let schema = schemars::schema_for!(Workload);
    let mut value = serde_json::to_value(&schema).expect("schema serializes");
    require_all_properties(&mut value);
    // serde's pretty format, not `qual_json::to_pretty_json`: this document's bytes (field
    // order, raw UTF-8, serde's float spelling) are its format; the Python-compatible writer
    // would change them.
    let mut s = serde_json::to_string_pretty(&value).expect("schema serializes");
    s.push('\n');
    s
}

#[cfg(feature = "json-schema")]
fn require_all_properties(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::Object(props)) = map.get("properties") {
                let keys: Vec<serde_json::Value> = props
                    .keys()
                    .cloned()
                    .map(serde_json::Value::String)
                    .collect();
                map.insert("required".into(), serde_json::Value::Array(keys));
            }
            for child in map.values_mut() {
                require_all_properties(child);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(require_all_properties),
        _ => {}
    }
}
