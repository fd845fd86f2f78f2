//! Platform probes: operating system, kernel, CPU, memory, WSL2 and macOS detection.
//!
//! Every value comes from the host (`/etc/os-release`, `/proc/sys/kernel/osrelease`,
//! `/proc/cpuinfo`, `/proc/meminfo`, `uname`, `sw_vers`, `sysctl`); a value that cannot be
//! read is recorded as [`UNAVAILABLE`] with a reason in [`Platform::unavailable`], never
//! guessed. Parsers are pure functions tested on captured file contents.

use std::time::Duration;

use qual_json::{Object, Value};

use crate::tool::run_tool;

/// The text recorded for a value that could not be observed.
pub const UNAVAILABLE: &str = "unavailable";

/// The receipt's `environment.os`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsInfo {
    /// Distribution or OS name (`Debian GNU/Linux`, `macOS`).
    pub name: String,
    /// Its version.
    pub version: String,
    /// Kernel release.
    pub kernel: String,
    /// Machine architecture (`x86_64`, `aarch64`, `arm64`).
    pub architecture: String,
}

/// Host facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    /// Operating system.
    pub os: OsInfo,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// Logical CPUs online.
    pub logical_cpus: Option<u64>,
    /// Total memory in bytes.
    pub memory_total_bytes: Option<u64>,
    /// Available memory in bytes.
    pub memory_available_bytes: Option<u64>,
    /// Running under WSL2.
    pub wsl2: bool,
    /// Running on macOS.
    pub macos: bool,
    /// `what: why` for every value that could not be observed.
    pub unavailable: Vec<String>,
}

/// Parses `/etc/os-release` into `(NAME, VERSION_ID or VERSION or BUILD_ID)`.
pub fn parse_os_release(text: &str) -> (Option<String>, Option<String>) {
    let mut name = None;
    let mut version_id = None;
    let mut version = None;
    let mut build = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').trim_matches('\'').to_string();
        if v.is_empty() {
            continue;
        }
        match k.trim() {
            "NAME" => name = Some(v),
            "VERSION_ID" => version_id = Some(v),
            "VERSION" => version = Some(v),
            "BUILD_ID" => build = Some(v),
            _ => {}
        }
    }
    (name, version_id.or(version).or(build))
}

/// Parses `/proc/meminfo` into `(MemTotal, MemAvailable)` bytes.
pub fn parse_meminfo(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            let mut it = rest.split_whitespace();
            let n: u64 = it.next()?.parse().ok()?;
            match it.next() {
                Some("kB") => n.checked_mul(1024),
                None => Some(n),
                _ => None,
            }
        })
    };
    (field("MemTotal"), field("MemAvailable"))
}

/// Parses `/proc/cpuinfo` into `(model name, logical processor count)`. Without a model name
/// (typical on aarch64) the name is composed from the observed `CPU implementer` and
/// `CPU part` codes, e.g. `arm cpu implementer 0x41 part 0xd0c`.
pub fn parse_cpuinfo(text: &str) -> (Option<String>, Option<u64>) {
    let (model, count) = parse_cpuinfo_named(text);
    if model.is_some() {
        return (model, count);
    }
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    };
    let composed = match (field("CPU implementer"), field("CPU part")) {
        (Some(i), Some(p)) => Some(format!("arm cpu implementer {i} part {p}")),
        _ => None,
    };
    (composed, count)
}

fn parse_cpuinfo_named(text: &str) -> (Option<String>, Option<u64>) {
    let mut model = None;
    let mut count = 0u64;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let k = k.trim();
        let v = v.trim();
        if k == "processor" {
            count += 1;
        }
        if model.is_none()
            && (k == "model name" || k == "Model" || k == "cpu model")
            && !v.is_empty()
        {
            model = Some(v.to_string());
        }
    }
    (model, (count > 0).then_some(count))
}

/// Whether a kernel release names WSL2.
pub fn is_wsl2_kernel(release: &str) -> bool {
    release
        .to_ascii_lowercase()
        .contains("microsoft-standard-wsl2")
}

fn read(path: &str, unavailable: &mut Vec<String>, what: &str) -> Option<String> {
    match qual_exec::read_system_file(path) {
        Ok(s) => Some(s),
        Err(e) => {
            unavailable.push(format!("{what}: cannot read {path}: {e}"));
            None
        }
    }
}

fn uname_field(flag: &str) -> Option<String> {
    let out = run_tool(&["uname", flag], Duration::from_secs(10));
    out.ok()
        .then(|| out.stdout.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Observes the host.
pub fn probe() -> Platform {
    let mut unavailable = Vec::new();
    let macos = cfg!(target_os = "macos");
    let (name, version, kernel) = if macos {
        let sw = |flag: &str| {
            let o = run_tool(&["sw_vers", flag], Duration::from_secs(10));
            o.ok()
                .then(|| o.stdout.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        (sw("-productName"), sw("-productVersion"), uname_field("-r"))
    } else {
        let (n, v) = read("/etc/os-release", &mut unavailable, "os")
            .map(|t| parse_os_release(&t))
            .unwrap_or((None, None));
        let k = read("/proc/sys/kernel/osrelease", &mut unavailable, "kernel")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .or_else(|| uname_field("-r"));
        (n, v, k)
    };
    let architecture = uname_field("-m");
    let mut take = |v: Option<String>, what: &str| {
        v.unwrap_or_else(|| {
            if !unavailable.iter().any(|u| u.starts_with(what)) {
                unavailable.push(format!("{what}: not reported by the host"));
            }
            UNAVAILABLE.to_string()
        })
    };
    let os = OsInfo {
        name: take(name, "os name"),
        version: take(version, "os version"),
        kernel: take(kernel, "kernel"),
        architecture: take(architecture, "architecture"),
    };
    let (cpu_model, logical_cpus, memory_total_bytes, memory_available_bytes) = if macos {
        let sysctl = |k: &str| {
            let o = run_tool(&["sysctl", "-n", k], Duration::from_secs(10));
            o.ok()
                .then(|| o.stdout.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        (
            sysctl("machdep.cpu.brand_string"),
            sysctl("hw.logicalcpu").and_then(|s| s.parse().ok()),
            sysctl("hw.memsize").and_then(|s| s.parse().ok()),
            None,
        )
    } else {
        let (m, c) = read("/proc/cpuinfo", &mut unavailable, "cpu")
            .map(|t| parse_cpuinfo(&t))
            .unwrap_or((None, None));
        let (t, a) = read("/proc/meminfo", &mut unavailable, "memory")
            .map(|t| parse_meminfo(&t))
            .unwrap_or((None, None));
        (m, c, t, a)
    };
    if cpu_model.is_none() {
        unavailable.push("cpu model: not reported by the host".into());
    }
    if memory_total_bytes.is_none() {
        unavailable.push("memory total: not reported by the host".into());
    }
    let wsl2 = !macos && is_wsl2_kernel(&os.kernel);
    Platform {
        os,
        cpu_model,
        logical_cpus: logical_cpus.or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u64)
        }),
        memory_total_bytes,
        memory_available_bytes,
        wsl2,
        macos,
        unavailable,
    }
}

/// WSL2 capability keys of `environment.platform` (receipt v1, exact).
pub const WSL2_CAPABILITIES: [&str; 16] = [
    "wsl_identity",
    "windows_identity",
    "driver_identity",
    "cuda_driver_bridge",
    "cuda_toolkit",
    "cuda_runtime",
    "nvml",
    "filesystem_semantics",
    "network_containment",
    "process_containment",
    "systemd_system",
    "systemd_user_transient",
    "cgroup_memory_delegation",
    "memory_accounting",
    "host_temperature",
    "gpu_temperature",
];

/// The receipt's `environment.platform` for a WSL2 host, or `None` elsewhere.
///
/// Only what this implementation observes is `available`: `wsl_identity` (the kernel release
/// names WSL2), `memory_accounting` (`/proc/meminfo` gave total and available memory), and
/// `network_containment` / `process_containment` when the runner binds its containment
/// `mechanism`. Every other capability is `unavailable`, and each is listed in the returned
/// `unsupported` strings as `wsl2_<capability>: not collected by this runner`; observations
/// are empty (`host_temperatures: []`, `gpu_temperature: null`).
pub fn wsl2_platform(p: &Platform, mechanism: Option<&str>) -> Option<(Value, Vec<String>)> {
    if !p.wsl2 {
        return None;
    }
    let mut caps = Object::new();
    let mut unsupported = Vec::new();
    for key in WSL2_CAPABILITIES {
        let available = match key {
            "wsl_identity" => true,
            "memory_accounting" => {
                p.memory_total_bytes.is_some() && p.memory_available_bytes.is_some()
            }
            "network_containment" | "process_containment" => mechanism.is_some(),
            _ => false,
        };
        if !available {
            unsupported.push(format!("wsl2_{key}: not collected by this runner"));
        }
        caps.insert(
            key,
            Value::from(if available {
                "available"
            } else {
                "unavailable"
            }),
        );
    }
    let mut details = Object::new();
    details.insert("kernel_release", Value::from(p.os.kernel.as_str()));
    if let Some(m) = mechanism {
        details.insert(
            "workload_containment",
            Value::from(format!(
                "{m}; loopback-only network namespace, own session and process group, cgroup v2 or subreaper descendant tracking, and TERM/KILL cleanup"
            )),
        );
    }
    let mut obs = Object::new();
    obs.insert("host_temperatures", Value::Array(Vec::new()));
    obs.insert("gpu_temperature", Value::Null);
    let mut o = Object::new();
    o.insert("kind", Value::from("wsl2"));
    o.insert("capabilities", Value::Object(caps));
    o.insert("details", Value::Object(details));
    o.insert("observations", Value::Object(obs));
    Some((Value::Object(o), unsupported))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_prefers_version_id() {
        let t = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nID=debian\n";
        assert_eq!(
            parse_os_release(t),
            (Some("Debian GNU/Linux".into()), Some("12".into()))
        );
        let arch = "NAME=\"EndeavourOS\"\nBUILD_ID=2025.03.19\n";
        assert_eq!(
            parse_os_release(arch),
            (Some("EndeavourOS".into()), Some("2025.03.19".into()))
        );
    }

    #[test]
    fn meminfo_and_cpuinfo_parse_captured_output() {
        let m = "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   120000000 kB\n";
        assert_eq!(
            parse_meminfo(m),
            (Some(131072000 * 1024), Some(120000000 * 1024))
        );
        let c = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n";
        assert_eq!(
            parse_cpuinfo(c),
            (Some("AMD EPYC 9654 96-Core Processor".into()), Some(2))
        );
        assert_eq!(parse_cpuinfo(""), (None, None));
        let arm = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\nprocessor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";
        assert_eq!(
            parse_cpuinfo(arm),
            (Some("arm cpu implementer 0x41 part 0xd0c".into()), Some(2))
        );
    }

    #[test]
    fn wsl2_is_detected_from_the_kernel_release() {
        assert!(is_wsl2_kernel("6.6.87.2-microsoft-standard-WSL2"));
        assert!(!is_wsl2_kernel("6.1.0-30-amd64"));
    }

    #[test]
    fn wsl2_platform_marks_only_observed_capabilities_available() {
        let mut p = probe();
        p.wsl2 = false;
        assert!(wsl2_platform(&p, Some("m")).is_none());
        p.wsl2 = true;
        p.memory_total_bytes = Some(1);
        p.memory_available_bytes = Some(1);
        let (v, unsupported) = wsl2_platform(&p, Some("linux-netns-loopback-only-v1")).unwrap();
        let caps = v.get("capabilities").unwrap().as_object().unwrap();
        assert_eq!(caps.len(), 16);
        let available: Vec<&str> = caps
            .iter()
            .filter(|(_, v)| v.as_str() == Some("available"))
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            available,
            [
                "wsl_identity",
                "network_containment",
                "process_containment",
                "memory_accounting"
            ]
        );
        assert_eq!(unsupported.len(), 12);
    }

    #[test]
    fn the_host_probe_never_invents_values() {
        let p = probe();
        assert!(!p.os.kernel.is_empty());
        for v in [&p.os.name, &p.os.version, &p.os.kernel, &p.os.architecture] {
            if v == UNAVAILABLE {
                assert!(!p.unavailable.is_empty());
            }
        }
    }
}
