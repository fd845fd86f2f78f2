//! The closed key sets of every receipt object and the enumerations its fields take, as the
//! original declares them.

/// The source-tree digest format every receipt must name.
pub const TREE_HASH_FORMAT: &str = "kiln-source-tree-v1";
/// Longest accepted result `details` text, in characters.
pub const MAX_RESULT_DETAIL_CHARACTERS: usize = 2048;
/// Qualification kinds, sorted.
pub const KINDS: [&str; 7] = [
    "correctness",
    "environment",
    "eval",
    "performance",
    "serving",
    "soak",
    "training",
];
/// Kinds whose passed receipts must identify a model.
pub const MODEL_KINDS: [&str; 5] = ["eval", "performance", "serving", "soak", "training"];
/// Backends, sorted (the workload contract's list).
pub use qual_contract::constants::BACKENDS;
/// Verdicts, sorted.
pub const VERDICTS: [&str; 2] = ["failed", "passed"];
/// Result statuses, sorted.
pub const RESULT_STATUSES: [&str; 3] = ["failed", "passed", "skipped"];
/// Artifact locations, sorted.
pub const ARTIFACT_LOCATIONS: [&str; 2] = ["external", "local_ignored"];
/// Capability statuses, sorted.
pub const CAPABILITY_STATUSES: [&str; 2] = ["available", "unavailable"];

/// Top-level keys (exact).
pub const TOP_LEVEL_KEYS: [&str; 14] = [
    "artifacts",
    "created_at_utc",
    "effective_config",
    "environment",
    "metrics",
    "model",
    "notes",
    "qualification",
    "receipt_id",
    "results",
    "schema_version",
    "source",
    "unsupported",
    "workload",
];
pub(super) const SOURCE_KEYS: [&str; 4] = [
    "git_commit",
    "git_worktree_clean",
    "tree_hash",
    "tree_hash_format",
];
pub(super) const QUALIFICATION_KEYS: [&str; 8] = [
    "backend",
    "command",
    "duration_seconds",
    "finished_at_utc",
    "kind",
    "profile",
    "started_at_utc",
    "verdict",
];
pub(super) const ENVIRONMENT_REQUIRED_KEYS: [&str; 5] =
    ["compiler", "device", "host_id", "os", "runtime"];
pub(super) const ENVIRONMENT_KEYS: [&str; 6] =
    ["compiler", "device", "host_id", "os", "platform", "runtime"];
pub(super) const OS_KEYS: [&str; 4] = ["architecture", "kernel", "name", "version"];
pub(super) const PLATFORM_KEYS: [&str; 4] = ["capabilities", "details", "kind", "observations"];
/// WSL2 capability keys (exact).
pub const WSL2_CAPABILITY_KEYS: [&str; 16] = [
    "cgroup_memory_delegation",
    "cuda_driver_bridge",
    "cuda_runtime",
    "cuda_toolkit",
    "driver_identity",
    "filesystem_semantics",
    "gpu_temperature",
    "host_temperature",
    "memory_accounting",
    "network_containment",
    "nvml",
    "process_containment",
    "systemd_system",
    "systemd_user_transient",
    "windows_identity",
    "wsl_identity",
];
pub(super) const WSL2_OBSERVATION_KEYS: [&str; 2] = ["gpu_temperature", "host_temperatures"];
/// macOS capability keys (exact).
pub const MACOS_CAPABILITY_KEYS: [&str; 12] = [
    "apple_hardware_identity",
    "filesystem_semantics",
    "gpu_temperature",
    "host_temperature",
    "memory_pressure",
    "metal_compiler",
    "metal_runtime_identity",
    "network_containment",
    "process_containment",
    "thermal_pressure",
    "toolchain_provenance",
    "unified_memory_accounting",
];
pub(super) const MACOS_OBSERVATION_KEYS: [&str; 8] = [
    "filesystem",
    "gpu_temperature",
    "hardware_identity",
    "host_temperature",
    "memory_pressure",
    "metal_runtime",
    "thermal_pressure",
    "unified_memory",
];
pub(super) const MACOS_HARDWARE_KEYS: [&str; 7] = [
    "chip_type",
    "cpu_brand",
    "gpu_core_count",
    "kernel_build",
    "machine_model",
    "machine_name",
    "physical_memory_bytes",
];
pub(super) const MACOS_METAL_RUNTIME_KEYS: [&str; 5] = [
    "current_allocated_bytes",
    "has_unified_memory",
    "max_buffer_length_bytes",
    "name",
    "recommended_max_working_set_bytes",
];
pub(super) const MACOS_FILESYSTEM_KEYS: [&str; 10] = [
    "atomic_replace",
    "case_sensitive",
    "directory_fsync",
    "fstype",
    "full_file_sync",
    "hardlink",
    "mount_point",
    "root",
    "source",
    "symlink",
];
pub(super) const MACOS_UNIFIED_MEMORY_KEYS: [&str; 4] = [
    "swap_encrypted",
    "swap_total_bytes",
    "swap_used_bytes",
    "total_bytes",
];
pub(super) const MACOS_MEMORY_PRESSURE_KEYS: [&str; 11] = [
    "free_percent",
    "page_size_bytes",
    "pageins",
    "pageouts",
    "pages_active",
    "pages_free",
    "pages_inactive",
    "pages_occupied_by_compressor",
    "pages_wired_down",
    "swapins",
    "swapouts",
];
pub(super) const MACOS_THERMAL_PRESSURE_KEYS: [&str; 3] =
    ["cpu_power_status", "performance_warning", "thermal_warning"];
pub(super) const HOST_TEMPERATURE_KEYS: [&str; 3] = ["name", "source", "temperature_millicelsius"];
pub(super) const GPU_TEMPERATURE_KEYS: [&str; 3] =
    ["device_uuid", "source", "temperature_millicelsius"];
pub(super) const HOST_TEMPERATURE_SOURCES: [&str; 2] =
    ["linux_hwmon", "windows_formatted_thermal_zone"];
pub(super) const DEVICE_REQUIRED_KEYS: [&str; 5] = [
    "architecture",
    "driver",
    "memory_bytes",
    "name",
    "unified_memory",
];
pub(super) const DEVICE_KEYS: [&str; 11] = [
    "architecture",
    "compute_capability",
    "compute_units",
    "device_uuid",
    "driver",
    "logical_index",
    "memory_available_bytes",
    "memory_bytes",
    "name",
    "pci_bus_id",
    "unified_memory",
];
pub(super) const MODEL_KEYS: [&str; 6] = [
    "chat_template_hash",
    "config_hash",
    "id",
    "path",
    "tokenizer_hash",
    "weight_files",
];
pub(super) const WEIGHT_KEYS: [&str; 3] = ["bytes", "path", "sha256"];
pub(super) const WORKLOAD_KEYS: [&str; 4] = ["id", "parameters", "seed", "sha256"];
pub(super) const RESULT_KEYS: [&str; 6] = [
    "details",
    "duration_seconds",
    "id",
    "metrics",
    "required",
    "status",
];
pub(super) const METRIC_KEYS: [&str; 5] =
    ["aggregation", "lower_is_better", "name", "unit", "value"];
pub(super) const ARTIFACT_KEYS: [&str; 5] = ["bytes", "kind", "location", "path", "sha256"];
