//! Device-memory sampling, as diagnostic evidence (it never pauses or paces the requests).
//!
//! This module owns which memory source a campaign or a bench run measures (`resolve`), the
//! reads of each source, the background [`Sampler`] with its per-row baseline, peak and
//! latched errors, and the NVML binding ([`nvml`]) with its named failures.
//!
//! Sources, each declaring what it measures:
//! * `drm_vram_used` — `/sys/class/drm/card*/device/mem_info_vram_used` (whole-device VRAM in
//!   use, bytes; other tenants included);
//! * `nvml_used` — NVML's `used` bytes of one GPU, through `libnvidia-ml.so.1` loaded with
//!   `dlopen` at run time when present (never a build or link dependency: six symbols, so
//!   `libc`'s `dlopen`/`dlsym` are enough);
//! * `process_tree_pss` — for CPU servers and where no device counter exists: the summed PSS
//!   of the server's process tree (`qual_exec::memstat`).
//!
//! `auto` picks DRM when exactly one counter exists, NVML when it initialises with exactly one
//! device that answers a memory read, refuses ambiguity (several DRM counters, several GPUs,
//! or both DRM and NVML), and otherwise measures the server's process tree (needs a pid).
//! NVML that is absent, fails to initialise, or initialises but enumerates no GPU ("library
//! present, no device") counts as no NVML for `auto`: it never picks NVML when NVML cannot
//! read. Where the library was present, the process tree's `measures` says why NVML was
//! passed over (e.g. `auto passed over NVML: … enumerates no GPU …`), so a host memory number
//! taken beside an NVIDIA driver is never mistaken for device memory; a merely absent library
//! (every CPU host) adds nothing. An explicit `nvml` request refuses each of these states by
//! name ([`nvml::NvmlError`]).
//!
//! The sampler thread reads every `interval_ms`; `reset` (row start) takes one read
//! synchronously, so a row never inherits an older sample; `snapshot` adds one final read. A
//! read error latches, stops that row's reads and fails the row's memory evidence. A GPU that
//! NVML reports lost (`NVML_ERROR_GPU_IS_LOST`) stays lost for the sampler's lifetime: every
//! later row fails with the same named reason without calling NVML again (no retry; a lost
//! GPU needs a reset).

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
    /// Process tree of `pid`.
    ProcessTree {
        /// The server's pid.
        pid: u32,
        /// Why `auto` passed over an NVML library that was present (recorded in `measures`).
        passed_over: Option<String>,
    },
}

/// Why a source could not be resolved or read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// NVML, by name.
    #[error(transparent)]
    Nvml(#[from] nvml::NvmlError),
    /// Any other source or selection (reads after "failed to …").
    #[error("{0}")]
    Other(String),
}

impl SourceError {
    /// The device is gone for good: later rows fail with this without reading again.
    fn is_permanent(&self) -> bool {
        matches!(self, SourceError::Nvml(nvml::NvmlError::DeviceLost { .. }))
    }
}

impl Source {
    /// The server's process tree (as `auto` or `process-tree` would measure it).
    pub fn process_tree(pid: u32) -> Source {
        Source::ProcessTree {
            pid,
            passed_over: None,
        }
    }

    /// One read, in bytes.
    pub fn read(&self) -> Result<u64, SourceError> {
        match self {
            Source::Drm(p) => {
                let t = qual_exec::read_system_file(p)
                    .map_err(|e| SourceError::Other(format!("read {}: {e}", p.display())))?;
                t.trim().parse::<u64>().map_err(|_| {
                    SourceError::Other(format!("{} does not hold a byte count", p.display()))
                })
            }
            Source::Nvml(d) => Ok(d.used_bytes()?),
            Source::ProcessTree { pid, .. } => qual_exec::memstat::tree_pss_bytes(*pid)
                .map(|(b, _)| b)
                .map_err(|e| SourceError::Other(e.to_string())),
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
            Source::ProcessTree { pid, passed_over } => {
                let mut measures =
                    "summed PSS of the server's process tree (CPU server: host memory), bytes"
                        .to_string();
                if let Some(why) = passed_over {
                    measures.push_str("; auto passed over NVML: ");
                    measures.push_str(why);
                }
                SamplerIdentity {
                    source: "process_tree_pss".into(),
                    measures,
                    path: Some(format!("/proc/{pid}")),
                    device: None,
                    interval_ms,
                }
            }
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
pub fn resolve(req: &SourceRequest, pid: Option<u32>) -> Result<Source, SourceError> {
    let tree = |passed_over: Option<String>| {
        pid.map(|pid| Source::ProcessTree { pid, passed_over })
            .ok_or_else(|| {
                SourceError::Other("no device memory counter here and no server pid to measure (pass --server-pid or own the server)".into())
            })
    };
    let other = |s: String| Err(SourceError::Other(s));
    let nvml_device = |index, selector| {
        nvml::Device::open(index, selector)
            .map(|d| Source::Nvml(Arc::new(d)))
            .map_err(SourceError::from)
    };
    match req {
        SourceRequest::Drm(Some(p)) => {
            if !p.is_file() {
                return other(format!("memory path {} is not a file", p.display()));
            }
            Ok(Source::Drm(p.clone()))
        }
        SourceRequest::Drm(None) => match drm_candidates().as_slice() {
            [one] => Ok(Source::Drm(one.clone())),
            [] => other("no DRM mem_info_vram_used counter on this host".into()),
            many => other(format!(
                "{} DRM counters found; select one with --memory-path",
                many.len()
            )),
        },
        SourceRequest::Nvml(i) => nvml_device(*i, nvml::Selector::ExplicitIndex),
        SourceRequest::ProcessTree => tree(None),
        SourceRequest::Auto => {
            let drm = drm_candidates();
            let nv = nvml::device_count();
            match (drm.len(), nv) {
                (0, Err(nvml::NvmlError::LibraryMissing { .. })) => tree(None),
                (0, Err(e)) => tree(Some(e.to_string())),
                (1, Err(_)) => Ok(Source::Drm(drm[0].clone())),
                (0, Ok(1)) => nvml_device(0, nvml::Selector::AutoSingleDevice),
                (0, Ok(n)) => other(format!(
                    "NVML reports {n} GPUs; select one with --memory-device-index"
                )),
                (d, Err(_)) => other(format!(
                    "{d} DRM counters found; select one with --memory-path"
                )),
                (_, Ok(_)) => other(
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
    error: Option<SourceError>,
    /// A permanent failure (a lost GPU): kept across rows, never read again.
    lost: Option<SourceError>,
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
                    // A latched error ends the row's reads (no retry).
                    if g.baseline.is_some() && g.error.is_none() {
                        let r = src.read();
                        record(&mut g, r);
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

    /// Starts a row: one synchronous read becomes the baseline (none once the device is
    /// lost: the row carries the loss).
    pub fn reset(&self) {
        let mut g = self.state.lock().expect("sampler state");
        let lost = g.lost.take();
        *g = State::default();
        if let Some(e) = lost {
            g.error = Some(e.clone());
            g.lost = Some(e);
            return;
        }
        match self.source.read() {
            Ok(b) => {
                g.baseline = Some(b);
                g.peak = b;
                g.samples = 1;
            }
            Err(e) => latch(&mut g, e),
        }
    }

    /// Ends a row: one final read (unless a read already failed), then the snapshot (an
    /// error if any read failed).
    pub fn snapshot(&self) -> Result<MemorySnapshot, String> {
        let mut g = self.state.lock().expect("sampler state");
        if g.error.is_none() {
            let r = self.source.read();
            record(&mut g, r);
        }
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

fn record(g: &mut State, r: Result<u64, SourceError>) {
    match r {
        Ok(b) => {
            g.peak = g.peak.max(b);
            g.samples += 1;
        }
        Err(e) => latch(g, e),
    }
}

/// Keeps the row's first error; a permanent one also for every later row.
fn latch(g: &mut State, e: SourceError) {
    if e.is_permanent() && g.lost.is_none() {
        g.lost = Some(e.clone());
    }
    g.error.get_or_insert(e);
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// NVML through `dlopen` (no build dependency): `libnvidia-ml.so.1` loaded and initialised
/// once per process (never unloaded, never shut down: the sampler reads until the process
/// ends), the GPUs it enumerates, one GPU's used memory, and every failure by name
/// ([`NvmlError`], with NVML's return codes named from its header: [`Code`]).
pub mod nvml {
    use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
    use std::fmt;
    use std::sync::OnceLock;

    /// The library's file name, found on the loader's path (`LD_LIBRARY_PATH`, then
    /// `/etc/ld.so.cache`); the NVIDIA driver installs it.
    pub const LIBRARY: &str = "libnvidia-ml.so.1";

    /// An NVML return code (`nvmlReturn_t`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Code(pub i32);

    // NVML's documented return codes: the `nvmlReturn_enum` of `nvml.h` (NVML 13.3.29), as
    // NVIDIA publishes the header in github.com/NVIDIA/go-nvml, gen/nvml/nvml.h (commit
    // 2f9e261fe40a). The meanings are that header's comments in our words
    // (24's comment there repeats 23's; its name says what it means).
    const CODES: &[(i32, &str, &str)] = &[
        (0, "NVML_SUCCESS", "the operation was successful"),
        (
            1,
            "NVML_ERROR_UNINITIALIZED",
            "NVML was not first initialised with nvmlInit",
        ),
        (
            2,
            "NVML_ERROR_INVALID_ARGUMENT",
            "a supplied argument is invalid",
        ),
        (
            3,
            "NVML_ERROR_NOT_SUPPORTED",
            "the operation is not available on this device",
        ),
        (
            4,
            "NVML_ERROR_NO_PERMISSION",
            "the current user does not have permission for the operation",
        ),
        (
            5,
            "NVML_ERROR_ALREADY_INITIALIZED",
            "deprecated: NVML counts its initialisations",
        ),
        (
            6,
            "NVML_ERROR_NOT_FOUND",
            "a query to find an object was unsuccessful",
        ),
        (
            7,
            "NVML_ERROR_INSUFFICIENT_SIZE",
            "an input argument is not large enough",
        ),
        (
            8,
            "NVML_ERROR_INSUFFICIENT_POWER",
            "a device's external power cables are not properly attached",
        ),
        (
            9,
            "NVML_ERROR_DRIVER_NOT_LOADED",
            "the NVIDIA driver is not loaded",
        ),
        (10, "NVML_ERROR_TIMEOUT", "the provided timeout passed"),
        (
            11,
            "NVML_ERROR_IRQ_ISSUE",
            "the NVIDIA kernel driver detected an interrupt issue with a GPU",
        ),
        (
            12,
            "NVML_ERROR_LIBRARY_NOT_FOUND",
            "NVML's shared library could not be found or loaded",
        ),
        (
            13,
            "NVML_ERROR_FUNCTION_NOT_FOUND",
            "this version of NVML does not implement the function",
        ),
        (
            14,
            "NVML_ERROR_CORRUPTED_INFOROM",
            "the GPU's infoROM is corrupted",
        ),
        (
            15,
            "NVML_ERROR_GPU_IS_LOST",
            "the GPU fell off the bus or is otherwise inaccessible",
        ),
        (
            16,
            "NVML_ERROR_RESET_REQUIRED",
            "the GPU needs a reset before it can be used again",
        ),
        (
            17,
            "NVML_ERROR_OPERATING_SYSTEM",
            "the operating system or a cgroup blocked the GPU control device",
        ),
        (
            18,
            "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
            "the NVML library and the loaded kernel driver are different versions",
        ),
        (19, "NVML_ERROR_IN_USE", "the GPU is in use"),
        (20, "NVML_ERROR_MEMORY", "insufficient memory"),
        (21, "NVML_ERROR_NO_DATA", "no data"),
        (
            22,
            "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
            "the vGPU operation is not available because ECC is enabled",
        ),
        (
            23,
            "NVML_ERROR_INSUFFICIENT_RESOURCES",
            "ran out of critical resources other than memory",
        ),
        (
            24,
            "NVML_ERROR_FREQ_NOT_SUPPORTED",
            "the frequency is not supported",
        ),
        (
            25,
            "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
            "the provided version is invalid or unsupported",
        ),
        (
            26,
            "NVML_ERROR_DEPRECATED",
            "the requested functionality is deprecated",
        ),
        (
            27,
            "NVML_ERROR_NOT_READY",
            "the system is not ready for the request",
        ),
        (28, "NVML_ERROR_GPU_NOT_FOUND", "no GPUs were found"),
        (
            29,
            "NVML_ERROR_INVALID_STATE",
            "a resource is not in the state the operation needs",
        ),
        (
            30,
            "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",
            "the reset is not supported for this device or these parameters",
        ),
        (
            999,
            "NVML_ERROR_UNKNOWN",
            "an internal driver error occurred",
        ),
    ];

    impl Code {
        /// `NVML_SUCCESS`.
        pub const SUCCESS: Code = Code(0);
        /// `NVML_ERROR_GPU_IS_LOST`.
        pub const GPU_IS_LOST: Code = Code(15);
        /// `NVML_ERROR_GPU_NOT_FOUND`.
        pub const GPU_NOT_FOUND: Code = Code(28);

        /// NVML's name for the code and what it means, when `nvml.h` documents it.
        pub fn documented(self) -> Option<(&'static str, &'static str)> {
            CODES
                .iter()
                .find(|(n, ..)| *n == self.0)
                .map(|&(_, name, meaning)| (name, meaning))
        }
    }

    impl fmt::Display for Code {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.documented() {
                Some((name, meaning)) => write!(f, "{name} ({}): {meaning}", self.0),
                None => write!(f, "return code {}, which nvml.h does not document", self.0),
            }
        }
    }

    /// Why NVML could not be used or read. Each message reads after "failed to …" and says
    /// what to do next where there is something.
    #[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
    pub enum NvmlError {
        /// `dlopen` found no `libnvidia-ml.so.1` (no NVIDIA driver on this host).
        #[error("load {LIBRARY} (NVML): {reason}; NVML comes with the NVIDIA driver: install it, or choose --memory-source process-tree for a CPU server")]
        LibraryMissing {
            /// What `dlerror` said.
            reason: String,
        },
        /// The library lacks a symbol the binding calls.
        #[error("load {LIBRARY} (NVML): it exports no {0}, which this binding calls: it is not NVIDIA's NVML, or one older than the v2 API (NVML 5.319)")]
        SymbolMissing(&'static str),
        /// `nvmlInit_v2` failed (e.g. `NVML_ERROR_DRIVER_NOT_LOADED`: no driver running).
        #[error("initialise NVML: nvmlInit_v2 returned {code}")]
        Init {
            /// NVML's return code.
            code: Code,
        },
        /// Library present, no device: NVML initialised but enumerates no GPU.
        #[error("find a GPU: NVML loaded but enumerates no GPU: is the NVIDIA driver's device node (/dev/nvidia*) present? choose --memory-source process-tree for a CPU server")]
        NoDevice,
        /// The requested index is not one NVML enumerates.
        #[error("open NVML device {index}: NVML enumerates {count} GPU{}, indices 0 to {}; select one with --memory-device-index", if *.count == 1 { "" } else { "s" }, .count.saturating_sub(1))]
        IndexOutOfRange {
            /// The requested index.
            index: u32,
            /// The GPUs NVML enumerates (at least one).
            count: u32,
        },
        /// `NVML_ERROR_GPU_IS_LOST`: the GPU fell off the bus (mid-run, typically an XID 79).
        #[error("reach the GPU: {call} returned {}; it is not read again (a lost GPU needs a reset or a reboot)", Code::GPU_IS_LOST)]
        DeviceLost {
            /// The NVML function that said so.
            call: &'static str,
        },
        /// Any other failed call.
        #[error("call {call}: it returned {code}")]
        Call {
            /// The NVML function.
            call: &'static str,
            /// Its return code.
            code: Code,
        },
    }

    /// How the device was chosen (recorded in its identity as `selector`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Selector {
        /// `--memory-source nvml` (index 0 unless `--memory-device-index`).
        ExplicitIndex,
        /// `auto`: the one GPU NVML enumerates.
        AutoSingleDevice,
    }

    impl Selector {
        fn name(self) -> &'static str {
            match self {
                Selector::ExplicitIndex => "explicit_index",
                Selector::AutoSingleDevice => "auto_single_device",
            }
        }
    }

    /// `nvmlMemory_t` (v1): total, free, used, in bytes.
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
        /// Selector, index, enumerated count, name, UUID, total bytes, library.
        pub identity: serde_json::Value,
    }

    struct Lib {
        count: CountFn,
        handle: HandleFn,
        mem: MemFn,
        name: StrFn,
        uuid: StrFn,
    }

    /// The loaded, initialised library (or why not), once per process.
    fn lib() -> Result<&'static Lib, NvmlError> {
        static LIB: OnceLock<Result<Lib, NvmlError>> = OnceLock::new();
        LIB.get_or_init(load).as_ref().map_err(Clone::clone)
    }

    fn load() -> Result<Lib, NvmlError> {
        // SAFETY: dlopen/dlsym/dlerror with NUL-terminated names; dlerror's text is copied
        // before any other dl call. The library stays loaded for the process lifetime (never
        // dlclose'd), so the function pointers stay valid. The symbol types are NVML's
        // documented C signatures (nvml.h).
        unsafe {
            let h = libc::dlopen(
                c"libnvidia-ml.so.1".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL,
            );
            if h.is_null() {
                let e = libc::dlerror();
                let reason = if e.is_null() {
                    "dlopen found no such library".to_string()
                } else {
                    CStr::from_ptr(e).to_string_lossy().into_owned()
                };
                return Err(NvmlError::LibraryMissing { reason });
            }
            let sym = |n: &'static CStr| {
                let p = libc::dlsym(h, n.as_ptr());
                if p.is_null() {
                    Err(NvmlError::SymbolMissing(n.to_str().unwrap_or("?")))
                } else {
                    Ok(p)
                }
            };
            let init = std::mem::transmute::<*mut c_void, InitFn>(sym(c"nvmlInit_v2")?);
            let lib = Lib {
                count: std::mem::transmute::<*mut c_void, CountFn>(sym(c"nvmlDeviceGetCount_v2")?),
                handle: std::mem::transmute::<*mut c_void, HandleFn>(sym(
                    c"nvmlDeviceGetHandleByIndex_v2",
                )?),
                mem: std::mem::transmute::<*mut c_void, MemFn>(sym(c"nvmlDeviceGetMemoryInfo")?),
                name: std::mem::transmute::<*mut c_void, StrFn>(sym(c"nvmlDeviceGetName")?),
                uuid: std::mem::transmute::<*mut c_void, StrFn>(sym(c"nvmlDeviceGetUUID")?),
            };
            // Documented entry point, no arguments; reference-counted by NVML, called once.
            match Code(init()) {
                Code::SUCCESS => Ok(lib),
                Code::GPU_NOT_FOUND => Err(NvmlError::NoDevice),
                code => Err(NvmlError::Init { code }),
            }
        }
    }

    /// `Ok` for NVML_SUCCESS; a lost GPU by name; any other code as the call's failure.
    fn check(call: &'static str, rc: c_int) -> Result<(), NvmlError> {
        match Code(rc) {
            Code::SUCCESS => Ok(()),
            Code::GPU_IS_LOST => Err(NvmlError::DeviceLost { call }),
            code => Err(NvmlError::Call { call, code }),
        }
    }

    /// The GPUs NVML enumerates: at least one, or [`NvmlError::NoDevice`] (library present,
    /// no device), or why NVML could not be asked.
    pub fn device_count() -> Result<u32, NvmlError> {
        let lib = lib()?;
        let mut n: c_uint = 0;
        // SAFETY: `n` is a valid out pointer.
        let rc = unsafe { (lib.count)(&mut n) };
        if Code(rc) == Code::GPU_NOT_FOUND {
            return Err(NvmlError::NoDevice);
        }
        check("nvmlDeviceGetCount_v2", rc)?;
        if n == 0 {
            return Err(NvmlError::NoDevice);
        }
        Ok(n)
    }

    impl Device {
        /// Opens device `index` and reads its memory once (a device that cannot be read is
        /// refused here, never sampled).
        pub fn open(index: u32, selector: Selector) -> Result<Device, NvmlError> {
            let lib = lib()?;
            let count = device_count()?;
            if index >= count {
                return Err(NvmlError::IndexOutOfRange { index, count });
            }
            let mut h: *mut c_void = std::ptr::null_mut();
            // SAFETY: valid out pointer; index checked above.
            let rc = unsafe { (lib.handle)(index, &mut h) };
            check("nvmlDeviceGetHandleByIndex_v2", rc)?;
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
            let total = d.read()?.total;
            Ok(Device {
                identity: serde_json::json!({
                    "selector": selector.name(),
                    "index": index,
                    "enumerated_device_count": count,
                    "name": text(lib.name),
                    "uuid": text(lib.uuid),
                    "total_bytes": total,
                    "library": LIBRARY,
                }),
                ..d
            })
        }

        fn read(&self) -> Result<Memory, NvmlError> {
            let mut m = Memory::default();
            // SAFETY: the handle came from NVML and the library is never unloaded; `m` is a
            // valid out pointer of nvmlMemory_t's layout.
            let rc = unsafe { (self.mem)(self.handle as *mut c_void, &mut m) };
            check("nvmlDeviceGetMemoryInfo", rc)?;
            Ok(m)
        }

        /// NVML's used bytes now.
        pub fn used_bytes(&self) -> Result<u64, NvmlError> {
            self.read().map(|m| m.used)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::nvml::{Code, NvmlError};
    use super::*;

    #[test]
    fn process_tree_sampler_records_baseline_peak_and_samples() {
        let s = Sampler::start(
            Source::process_tree(std::process::id()),
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
        let dead = Sampler::start(Source::process_tree(u32::MAX - 3), Duration::from_millis(5));
        dead.reset();
        assert!(dead
            .snapshot()
            .unwrap_err()
            .contains("memory sampling failed"));
    }

    #[test]
    fn auto_falls_back_to_the_process_tree_only_without_device_counters() {
        // On a host without DRM counters and a usable NVML (CI), auto measures the server's
        // tree and needs its pid; with counters present it must not silently pick the tree.
        // The NVML double (tests/fixtures/fake_nvml.c, through the binary in kiln-qual's
        // tests/real/nvml_double.rs) covers the library-present states.
        match (drm_candidates().is_empty(), nvml::device_count()) {
            (true, Err(e)) => {
                let s = resolve(&SourceRequest::Auto, Some(std::process::id())).unwrap();
                let id = s.identity(50);
                assert_eq!(id.source, "process_tree_pss");
                // A passed-over NVML that was present is said; an absent one adds nothing.
                let noted = id.measures.contains("auto passed over NVML");
                assert_eq!(
                    noted,
                    !matches!(e, NvmlError::LibraryMissing { .. }),
                    "{}",
                    id.measures
                );
                let e2 = resolve(&SourceRequest::Auto, None).unwrap_err();
                assert!(e2.to_string().contains("no server pid"), "{e2}");
                assert_eq!(
                    resolve(&SourceRequest::Nvml(0), None).unwrap_err(),
                    SourceError::Nvml(e)
                );
            }
            _ => assert!(!matches!(
                resolve(&SourceRequest::Auto, Some(std::process::id())),
                Ok(Source::ProcessTree { .. })
            )),
        }
    }

    #[test]
    fn explicit_drm_path_must_be_a_file() {
        let e = resolve(&SourceRequest::Drm(Some("/nonexistent/x".into())), None).unwrap_err();
        assert!(e.to_string().contains("is not a file"));
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("vram");
        std::fs::write(&f, "4096\n").unwrap();
        let s = resolve(&SourceRequest::Drm(Some(f)), None).unwrap();
        assert_eq!(s.read().unwrap(), 4096);
        assert_eq!(s.identity(50).source, "drm_vram_used");
    }

    #[test]
    fn nvml_return_codes_are_named_from_the_header() {
        // The values the binding must tell apart, as nvml.h numbers them.
        for (n, name) in [
            (0, "NVML_SUCCESS"),
            (1, "NVML_ERROR_UNINITIALIZED"),
            (2, "NVML_ERROR_INVALID_ARGUMENT"),
            (3, "NVML_ERROR_NOT_SUPPORTED"),
            (4, "NVML_ERROR_NO_PERMISSION"),
            (6, "NVML_ERROR_NOT_FOUND"),
            (7, "NVML_ERROR_INSUFFICIENT_SIZE"),
            (9, "NVML_ERROR_DRIVER_NOT_LOADED"),
            (10, "NVML_ERROR_TIMEOUT"),
            (15, "NVML_ERROR_GPU_IS_LOST"),
            (16, "NVML_ERROR_RESET_REQUIRED"),
            (18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
            (20, "NVML_ERROR_MEMORY"),
            (21, "NVML_ERROR_NO_DATA"),
            (28, "NVML_ERROR_GPU_NOT_FOUND"),
            (999, "NVML_ERROR_UNKNOWN"),
        ] {
            let (got, meaning) = Code(n).documented().unwrap();
            assert_eq!(got, name);
            assert!(meaning.chars().next().unwrap().is_lowercase() || meaning.starts_with("NVML"));
        }
        assert_eq!(
            Code(15).to_string(),
            "NVML_ERROR_GPU_IS_LOST (15): the GPU fell off the bus or is otherwise inaccessible"
        );
        assert_eq!(
            Code(9).to_string(),
            "NVML_ERROR_DRIVER_NOT_LOADED (9): the NVIDIA driver is not loaded"
        );
        assert_eq!(
            Code(31).to_string(),
            "return code 31, which nvml.h does not document"
        );
        assert_eq!(Code(-1).documented(), None);
    }

    #[test]
    fn nvml_failures_read_after_failed_to_and_say_what_to_do() {
        assert_eq!(
            NvmlError::DeviceLost {
                call: "nvmlDeviceGetMemoryInfo"
            }
            .to_string(),
            "reach the GPU: nvmlDeviceGetMemoryInfo returned NVML_ERROR_GPU_IS_LOST (15): the GPU fell off the bus or is otherwise inaccessible; it is not read again (a lost GPU needs a reset or a reboot)"
        );
        assert_eq!(
            NvmlError::NoDevice.to_string(),
            "find a GPU: NVML loaded but enumerates no GPU: is the NVIDIA driver's device node (/dev/nvidia*) present? choose --memory-source process-tree for a CPU server"
        );
        assert_eq!(
            NvmlError::Init { code: Code(9) }.to_string(),
            "initialise NVML: nvmlInit_v2 returned NVML_ERROR_DRIVER_NOT_LOADED (9): the NVIDIA driver is not loaded"
        );
        assert_eq!(
            NvmlError::IndexOutOfRange { index: 1, count: 1 }.to_string(),
            "open NVML device 1: NVML enumerates 1 GPU, indices 0 to 0; select one with --memory-device-index"
        );
        assert!(NvmlError::IndexOutOfRange { index: 4, count: 2 }
            .to_string()
            .contains("enumerates 2 GPUs, indices 0 to 1"));
        assert_eq!(
            NvmlError::Call {
                call: "nvmlDeviceGetMemoryInfo",
                code: Code(3)
            }
            .to_string(),
            "call nvmlDeviceGetMemoryInfo: it returned NVML_ERROR_NOT_SUPPORTED (3): the operation is not available on this device"
        );
        for e in [
            NvmlError::LibraryMissing { reason: "x".into() },
            NvmlError::SymbolMissing("nvmlDeviceGetUUID"),
        ] {
            assert!(
                e.to_string().starts_with("load libnvidia-ml.so.1 (NVML): "),
                "{e}"
            );
        }
        // Only a lost GPU outlives its row.
        assert!(SourceError::from(NvmlError::DeviceLost { call: "x" }).is_permanent());
        assert!(!SourceError::from(NvmlError::NoDevice).is_permanent());
        assert!(!SourceError::Other("x".into()).is_permanent());
    }
}
