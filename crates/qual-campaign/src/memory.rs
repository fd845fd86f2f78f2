//! Device-memory sampling, as diagnostic evidence (it never pauses or paces the requests).
//!
//! Sources, each declaring what it measures:
//! * `drm_vram_used` — `/sys/class/drm/card*/device/mem_info_vram_used` (whole-device VRAM in
//!   use, bytes; other tenants included);
//! * `nvml_used` — NVML's `used` bytes of one GPU, through `libnvidia-ml.so.1` loaded with
//!   `dlopen` at run time when present (never a build or link dependency: three symbols, so
//!   `libc`'s `dlopen`/`dlsym` are enough);
//! * `process_tree_pss` — for CPU servers and where no device counter exists: the summed PSS
//!   of the server's process tree (`qual_exec::memstat`).
//!
//! `auto` picks DRM when exactly one counter exists, NVML when it initialises with exactly one
//! device, refuses ambiguity (several DRM counters, or both DRM and NVML), and otherwise
//! measures the server's process tree (needs a pid). The sampler thread reads every
//! `interval_ms`; `reset` (row start) takes one read synchronously, so a row never inherits an
//! older sample; `snapshot` adds one final read. A read error latches and fails the row's
//! memory evidence.

use crate::records::{MemorySnapshot, SamplerIdentity};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the user asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceRequest {
    /// Pick as described in the module docs.
    Auto,
    /// A DRM counter file.
    Drm(Option<PathBuf>),
    /// NVML device by index.
    Nvml(u32),
    /// The server's process tree.
    ProcessTree,
}

/// A resolved source.
#[derive(Clone, Debug)]
pub enum Source {
    /// DRM counter file.
    Drm(PathBuf),
    /// NVML device.
    Nvml(Arc<nvml::Device>),
    /// Process tree of this pid.
    ProcessTree(u32),
}

impl Source {
    /// One read, in bytes.
    pub fn read(&self) -> Result<u64, String> {
        match self {
            Source::Drm(p) => {
                let t = qual_exec::read_system_file(p)
                    .map_err(|e| format!("read {}: {e}", p.display()))?;
                t.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("{} does not hold a byte count", p.display()))
            }
            Source::Nvml(d) => d.used_bytes(),
            Source::ProcessTree(pid) => qual_exec::memstat::tree_pss_bytes(*pid)
                .map(|(b, _)| b)
                .map_err(|e| e.to_string()),
        }
    }

    /// The receipt identity.
    pub fn identity(&self, interval_ms: u64) -> SamplerIdentity {
        match self {
            Source::Drm(p) => SamplerIdentity {
                source: "drm_vram_used".into(),
                measures: "whole-device VRAM in use (all tenants), bytes".into(),
                path: Some(p.display().to_string()),
                device: None,
                interval_ms,
            },
            Source::Nvml(d) => SamplerIdentity {
                source: "nvml_used".into(),
                measures: "NVML used memory of one GPU (all tenants), bytes".into(),
                path: None,
                device: Some(d.identity.clone()),
                interval_ms,
            },
            Source::ProcessTree(pid) => SamplerIdentity {
                source: "process_tree_pss".into(),
                measures:
                    "summed PSS of the server's process tree (CPU server: host memory), bytes"
                        .into(),
                path: Some(format!("/proc/{pid}")),
                device: None,
                interval_ms,
            },
        }
    }
}

/// The identity recorded when no source could be resolved.
pub fn unavailable(interval_ms: u64, why: &str) -> SamplerIdentity {
    SamplerIdentity {
        source: "unavailable".into(),
        measures: why.into(),
        path: None,
        device: None,
        interval_ms,
    }
}

/// DRM counters present on this host.
pub fn drm_candidates() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/sys/class/drm")
        .map(|d| {
            d.flatten()
                .map(|e| e.path().join("device/mem_info_vram_used"))
                .filter(|p| {
                    p.parent()
                        .and_then(Path::parent)
                        .and_then(Path::file_name)
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("card") && !n.contains('-'))
                        && p.is_file()
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Resolves a request to a source; `pid` is the server's (for the process tree).
pub fn resolve(req: &SourceRequest, pid: Option<u32>) -> Result<Source, String> {
    let tree = || {
        pid.map(Source::ProcessTree).ok_or_else(|| {
            "no device memory counter here and no server pid to measure (pass --server-pid or own the server)".to_string()
        })
    };
    match req {
        SourceRequest::Drm(Some(p)) => {
            if !p.is_file() {
                return Err(format!("memory path {} is not a file", p.display()));
            }
            Ok(Source::Drm(p.clone()))
        }
        SourceRequest::Drm(None) => match drm_candidates().as_slice() {
            [one] => Ok(Source::Drm(one.clone())),
            [] => Err("no DRM mem_info_vram_used counter on this host".into()),
            many => Err(format!(
                "{} DRM counters found; select one with --memory-path",
                many.len()
            )),
        },
        SourceRequest::Nvml(i) => nvml::Device::open(*i).map(|d| Source::Nvml(Arc::new(d))),
        SourceRequest::ProcessTree => tree(),
        SourceRequest::Auto => {
            let drm = drm_candidates();
            let nv = nvml::Device::count().ok().filter(|&c| c > 0);
            match (drm.len(), nv) {
                (0, None) => tree(),
                (1, None) => Ok(Source::Drm(drm[0].clone())),
                (0, Some(1)) => nvml::Device::open(0).map(|d| Source::Nvml(Arc::new(d))),
                (0, Some(n)) => Err(format!(
                    "NVML reports {n} GPUs; select one with --memory-device-index"
                )),
                (d, None) => Err(format!("{d} DRM counters found; select one with --memory-path")),
                (_, Some(_)) => Err(
                    "both DRM and NVML counters exist; select one with --memory-path or --memory-device-index"
                        .into(),
                ),
            }
        }
    }
}

#[derive(Default)]
struct State {
    baseline: Option<u64>,
    peak: u64,
    samples: u64,
    error: Option<String>,
}

/// A background sampler.
pub struct Sampler {
    source: Source,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `source` every `interval`.
    pub fn start(source: Source, interval: Duration) -> Sampler {
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st2, src) = (state.clone(), stop.clone(), source.clone());
        let thread = std::thread::Builder::new()
            .name("qual-campaign-memory".into())
            .spawn(move || {
                while !st2.load(Ordering::Relaxed) {
                    std::thread::sleep(interval);
                    // The lock is held across the read so that `reset` never races a read
                    // started before it (a row never inherits an older sample).
                    let mut g = s2.lock().expect("sampler state");
                    if g.baseline.is_some() {
                        record(&mut g, src.read());
                    }
                }
            })
            .ok();
        Sampler {
            source,
            state,
            stop,
            thread,
        }
    }

    /// Starts a row: one synchronous read becomes the baseline.
    pub fn reset(&self) {
        let mut g = self.state.lock().expect("sampler state");
        *g = State::default();
        match self.source.read() {
            Ok(b) => {
                g.baseline = Some(b);
                g.peak = b;
                g.samples = 1;
            }
            Err(e) => g.error = Some(e),
        }
    }

    /// Ends a row: one final read, then the snapshot (an error if any read failed).
    pub fn snapshot(&self) -> Result<MemorySnapshot, String> {
        let mut g = self.state.lock().expect("sampler state");
        let r = self.source.read();
        record(&mut g, r);
        let out = match (&g.error, g.baseline) {
            (Some(e), _) => Err(format!("memory sampling failed: {e}")),
            (None, None) => Err("memory sampling failed: no baseline".into()),
            (None, Some(b)) => Ok(MemorySnapshot {
                baseline_bytes: b,
                peak_bytes: g.peak,
                peak_delta_bytes: g.peak.saturating_sub(b),
                samples: g.samples,
            }),
        };
        g.baseline = None;
        out
    }
}

fn record(g: &mut State, r: Result<u64, String>) {
    match r {
        Ok(b) => {
            g.peak = g.peak.max(b);
            g.samples += 1;
        }
        Err(e) => {
            g.error.get_or_insert(e);
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// NVML through `dlopen` (no build dependency).
pub mod nvml {
    use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

    #[repr(C)]
    #[derive(Default)]
    struct Memory {
        total: u64,
        free: u64,
        used: u64,
    }

    type InitFn = unsafe extern "C" fn() -> c_int;
    type CountFn = unsafe extern "C" fn(*mut c_uint) -> c_int;
    type HandleFn = unsafe extern "C" fn(c_uint, *mut *mut c_void) -> c_int;
    type MemFn = unsafe extern "C" fn(*mut c_void, *mut Memory) -> c_int;
    type StrFn = unsafe extern "C" fn(*mut c_void, *mut c_char, c_uint) -> c_int;

    /// One NVML device.
    #[derive(Debug)]
    pub struct Device {
        handle: usize,
        mem: MemFn,
        /// Index, name, UUID, total bytes, library.
        pub identity: serde_json::Value,
    }

    struct Lib {
        init: InitFn,
        count: CountFn,
        handle: HandleFn,
        mem: MemFn,
        name: StrFn,
        uuid: StrFn,
    }

    fn load() -> Result<Lib, String> {
        // SAFETY: dlopen/dlsym with NUL-terminated names; the library stays loaded for the
        // process lifetime (never dlclose'd), so the function pointers stay valid. The symbol
        // types are NVML's documented C signatures.
        unsafe {
            let h = libc::dlopen(
                c"libnvidia-ml.so.1".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL,
            );
            if h.is_null() {
                return Err("libnvidia-ml.so.1 is not present".into());
            }
            let sym = |n: &CStr| {
                let p = libc::dlsym(h, n.as_ptr());
                if p.is_null() {
                    Err(format!("libnvidia-ml.so.1 lacks {}", n.to_string_lossy()))
                } else {
                    Ok(p)
                }
            };
            Ok(Lib {
                init: std::mem::transmute::<*mut c_void, InitFn>(sym(c"nvmlInit_v2")?),
                count: std::mem::transmute::<*mut c_void, CountFn>(sym(c"nvmlDeviceGetCount_v2")?),
                handle: std::mem::transmute::<*mut c_void, HandleFn>(sym(
                    c"nvmlDeviceGetHandleByIndex_v2",
                )?),
                mem: std::mem::transmute::<*mut c_void, MemFn>(sym(c"nvmlDeviceGetMemoryInfo")?),
                name: std::mem::transmute::<*mut c_void, StrFn>(sym(c"nvmlDeviceGetName")?),
                uuid: std::mem::transmute::<*mut c_void, StrFn>(sym(c"nvmlDeviceGetUUID")?),
            })
        }
    }

    fn init() -> Result<Lib, String> {
        let lib = load()?;
        // SAFETY: documented NVML entry point, no arguments.
        let rc = unsafe { (lib.init)() };
        if rc != 0 {
            return Err(format!("nvmlInit_v2 failed with code {rc}"));
        }
        Ok(lib)
    }

    impl Device {
        /// Devices NVML enumerates.
        pub fn count() -> Result<u32, String> {
            let lib = init()?;
            let mut n: c_uint = 0;
            // SAFETY: `n` is a valid out pointer.
            let rc = unsafe { (lib.count)(&mut n) };
            if rc != 0 {
                return Err(format!("nvmlDeviceGetCount_v2 failed with code {rc}"));
            }
            Ok(n)
        }

        /// Opens device `index`.
        pub fn open(index: u32) -> Result<Device, String> {
            let lib = init()?;
            let count = Device::count()?;
            if index >= count {
                return Err(format!(
                    "NVML device {index} does not exist ({count} devices)"
                ));
            }
            let mut h: *mut c_void = std::ptr::null_mut();
            // SAFETY: valid out pointer; index checked above.
            let rc = unsafe { (lib.handle)(index, &mut h) };
            if rc != 0 {
                return Err(format!(
                    "nvmlDeviceGetHandleByIndex_v2 failed with code {rc}"
                ));
            }
            let text = |f: StrFn| {
                let mut buf = [0 as c_char; 256];
                // SAFETY: buffer and its length are passed together; NVML NUL-terminates.
                let rc = unsafe { f(h, buf.as_mut_ptr(), buf.len() as c_uint) };
                // SAFETY: NUL-terminated within the buffer on success.
                (rc == 0).then(|| {
                    unsafe { CStr::from_ptr(buf.as_ptr()) }
                        .to_string_lossy()
                        .into_owned()
                })
            };
            let d = Device {
                handle: h as usize,
                mem: lib.mem,
                identity: serde_json::Value::Null,
            };
            let mut m = Memory::default();
            // SAFETY: valid handle and out pointer.
            let rc = unsafe { (d.mem)(h, &mut m) };
            if rc != 0 {
                return Err(format!("nvmlDeviceGetMemoryInfo failed with code {rc}"));
            }
            Ok(Device {
                identity: serde_json::json!({
                    "selector": "explicit_index",
                    "index": index,
                    "enumerated_device_count": count,
                    "name": text(lib.name),
                    "uuid": text(lib.uuid),
                    "total_bytes": m.total,
                    "library": "libnvidia-ml.so.1",
                }),
                ..d
            })
        }

        /// NVML's used bytes now.
        pub fn used_bytes(&self) -> Result<u64, String> {
            let mut m = Memory::default();
            // SAFETY: the handle came from NVML and the library is never unloaded.
            let rc = unsafe { (self.mem)(self.handle as *mut c_void, &mut m) };
            if rc != 0 {
                return Err(format!("nvmlDeviceGetMemoryInfo failed with code {rc}"));
            }
            Ok(m.used)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_tree_sampler_records_baseline_peak_and_samples() {
        let s = Sampler::start(
            Source::ProcessTree(std::process::id()),
            Duration::from_millis(5),
        );
        s.reset();
        let _grow: Vec<u8> = vec![1u8; 8 << 20];
        std::thread::sleep(Duration::from_millis(30));
        let m = s.snapshot().unwrap();
        assert!(m.samples >= 2, "{m:?}");
        assert!(m.peak_bytes >= m.baseline_bytes);
        assert_eq!(m.peak_delta_bytes, m.peak_bytes - m.baseline_bytes);
        // A gone process latches an error instead of a zero.
        let dead = Sampler::start(Source::ProcessTree(u32::MAX - 3), Duration::from_millis(5));
        dead.reset();
        assert!(dead
            .snapshot()
            .unwrap_err()
            .contains("memory sampling failed"));
    }

    #[test]
    fn auto_falls_back_to_the_process_tree_only_without_device_counters() {
        // On a host without DRM counters and NVML (CI), auto measures the server's tree and
        // needs its pid; with counters present it must not silently pick the tree.
        if drm_candidates().is_empty() && nvml::Device::count().is_err() {
            let s = resolve(&SourceRequest::Auto, Some(std::process::id())).unwrap();
            assert_eq!(s.identity(50).source, "process_tree_pss");
            let e = resolve(&SourceRequest::Auto, None).unwrap_err();
            assert!(e.contains("no server pid"), "{e}");
            assert!(resolve(&SourceRequest::Nvml(0), None)
                .unwrap_err()
                .contains("libnvidia-ml.so.1"));
        } else {
            assert!(!matches!(
                resolve(&SourceRequest::Auto, Some(std::process::id())),
                Ok(Source::ProcessTree(_))
            ));
        }
    }

    #[test]
    fn explicit_drm_path_must_be_a_file() {
        let e = resolve(&SourceRequest::Drm(Some("/nonexistent/x".into())), None).unwrap_err();
        assert!(e.contains("is not a file"));
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("vram");
        std::fs::write(&f, "4096\n").unwrap();
        let s = resolve(&SourceRequest::Drm(Some(f)), None).unwrap();
        assert_eq!(s.read().unwrap(), 4096);
        assert_eq!(s.identity(50).source, "drm_vram_used");
    }
}
