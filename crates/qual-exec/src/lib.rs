//! Bounded, owned child processes for kiln-qual: spawn, capture, deadlines, signals,
//! containment and residue evidence. Linux is the first-class platform.
//!
//! # What this crate owns
//! - [`execute`] (and [`execute_observed`] / [`execute_watched`]): run one command to
//!   completion under an [`ExecSpec`] and return the [`Execution`] evidence. It always cleans
//!   up: when it returns, no process of the case is alive, whatever the command did.
//! - [`OwnedProcess`]: a long-lived contained process (a server) with the same containment,
//!   logs written to files under a byte bound, and a staged [`OwnedProcess::shutdown`].
//! - [`signals`]: SIGINT/SIGTERM forwarding to running case groups.
//! - [`probe_loopback_only`]: a preflight check that loopback-only isolation works here;
//!   [`mechanisms::probe_mechanisms`]: the same checks spread over each mechanism (`doctor`).
//! - [`wrap`]: the rules of bounded tool wrappers (`kiln-qual cargo`).
//! - [`run_tool`]: a helper program kiln-qual starts for itself (probe tools, `gh api`): own
//!   process group, deadline, bounded output ([`tool`]).
//! - [`read_system_file`]: the bounded reader of the host's own files (`/proc`, `/sys`, `/etc`).
//!
//! ```
//! use qual_exec::{execute, CaptureLimits, ExecSpec, NetworkPolicy, Termination};
//! use std::time::Duration;
//!
//! let spec = ExecSpec {
//!     argv: vec!["echo".into(), "hi".into()],
//!     cwd: std::env::temp_dir(),
//!     env: vec![("PATH".into(), "/usr/bin:/bin".into())],
//!     timeout: Duration::from_secs(30),
//!     term_grace: Duration::from_secs(5),
//!     capture: CaptureLimits::default(),
//!     network: NetworkPolicy::Inherit,
//!     sandbox: Default::default(),
//! };
//! let e = execute(&spec)?;
//! assert_eq!(e.termination, Termination::Exited { code: 0 });
//! assert_eq!(e.stdout.text_lossy(), "hi\n");
//! assert!(e.containment.clean);
//! # Ok::<(), qual_exec::ExecError>(())
//! ```
//!
//! # Mechanisms
//! - **argv only** (never a shell), `argv[0]` resolved on the `PATH` of the case environment
//!   (a name with `/` is a path, relative to `cwd`). The environment is exactly
//!   [`ExecSpec::env`], nothing inherited (the child sees it sorted by name; for a repeated
//!   name the last value wins); stdin is `/dev/null`.
//! - Every child calls `setsid()` before `exec`: it leads a new session and process group
//!   (pgid = pid), so it does not receive the terminal's signals and its group can be
//!   signalled as a whole. Children of [`execute`] (and owned processes spawned from the main
//!   thread) also get `PR_SET_PDEATHSIG = SIGKILL`, so a runner killed with SIGKILL takes its
//!   case leader with it.
//! - **Containment** ([`Mechanism`]): a fresh cgroup v2 sub-tree `kiln-qual-<pid>-<n>` under
//!   this process's own cgroup (`cgroup_v2`; the child joins it before `exec`, so nothing is
//!   ever born outside it). Without one the execution is refused, unless the caller chose
//!   [`CgroupPolicy::Auto`]/[`CgroupPolicy::Never`]: then the process group plus subreaper
//!   tracking (`process_group_subreaper`). In both cases this process becomes a
//!   child subreaper (`PR_SET_CHILD_SUBREAPER`), so a descendant that escaped with `setsid`
//!   or a double fork is re-parented to us: found, killed and reaped. Sub-cgroups left by a
//!   runner that died without cleanup are swept (members killed) by the next one.
//! - **Membership**: with cgroups, `cgroup.procs` of the case's cgroup and of every cgroup the
//!   case nested beneath it (a nested runner does that; the tree is removed bottom-up); without, the leader's subtree and the
//!   subtrees of orphans re-parented to us, walked through `/proc/<pid>/task/*/children`
//!   (a full `/proc` scan by group, session and ancestry where those files do not exist).
//!   Processes are identified by pid *and* start time; signals go through pidfds. A process
//!   outside the tree that received the output pipes from the case is never signalled: the
//!   pipes are then reported open (`pipes_closed: false`) after a 1 s wait.
//!   Because fallback attribution of orphans is by "re-parented to us while the execution
//!   runs", fallback-mode [`execute`] calls are serialized process-wide; an [`OwnedProcess`]
//!   is not, so in fallback mode do not run one while unrelated children of this process are
//!   orphaned (with cgroups there is no such ambiguity).
//! - **Output**: stdout and stderr are read in one `poll` loop while the child runs; each keeps
//!   a head and a tail ring ([`CaptureLimits`]) plus a total byte count; the pipes are always
//!   drained, so memory stays bounded whatever the child writes. An [`Observer`] sees every
//!   chunk live (pass-through, or a caller-owned output limit via [`Observer::watch`]).
//! - **Deadline**: at `timeout`, SIGTERM to the group (and every tracked member), then after
//!   `term_grace` SIGKILL; [`Termination::TimedOut`] records the last signal we sent before
//!   the leader ended. Interruption ([`signals`]) and [`Observer::watch`] use the same
//!   schedule and end as `Interrupted` / `Aborted`.
//! - **Settlement**: after the leader ends, members still alive get [`SETTLEMENT`] (1 s) to
//!   finish (or to die of the signal they already received); whatever is still alive then is
//!   [`Residue`]: terminated with the same schedule and recorded with the signal that ended
//!   it. When the group was being terminated (deadline, interruption, abort, owned-process
//!   shutdown), a member that outlives the leader and the grace is residue too, even if the
//!   grace ends before the settlement window. Processes that survive SIGKILL for 10 s (uninterruptible sleep) stop the wait and
//!   make the execution unclean.
//! - **Network**: [`NetworkPolicy::LoopbackOnly`] runs the child in a private network
//!   namespace with only `lo`, brought up with `ioctl(SIOCSIFFLAGS)` (no `ip` binary); as a
//!   non-root user a user namespace mapping our uid to root is created first. When the kernel
//!   refuses, the execution fails closed with [`ExecError::IsolationUnavailable`] naming the
//!   missing capability.
//!
//! - **The box** ([`sandbox`], threat model in `docs/security.md`): every child runs as the
//!   program of a three-process chain — the leader we wait for (it reproduces the program's
//!   end), the init of a new PID namespace tied to this process (a death pipe: even when we
//!   are SIGKILLed, the namespace dies), and the program — in its own mount namespace
//!   ([`Sandbox::read_only`] paths and the cgroup file systems read-only, a fresh `/proc`;
//!   with [`HostFiles::ReadOnly`] every mount read-only but [`Sandbox::writable`], a private
//!   `/tmp` and a private `/dev` without a terminal; the working directory entered after the
//!   mounts),
//!   with no capabilities, `no_new_privs`, the seccomp filters of `seccomp.rs` and only
//!   stdio. A cgroup is required ([`CgroupPolicy::Required`], the default): its file system is
//!   read-only inside the box, so no case can leave it; `pids.max` bounds the tree. The
//!   evidence is [`Containment::sandbox`]. A kernel that refuses a mechanism gets
//!   [`ExecError::IsolationUnavailable`] naming it; [`probe_containment`] checks everything
//!   once without running a program. Inside an enclosing kiln-qual box (e.g. `serve` as a
//!   case) children run in that box, recorded as such.
//!
//! Not implemented from the original runner's schedule: the "driver-first" SIGINT to leaf
//! processes before the group SIGTERM (it exists for wrapper supervisors such as `bwrap`,
//! which this crate does not interpose).
//!
//! # Invariants
//! - `execute` never returns while a process of the case is alive (short of processes that
//!   ignore SIGKILL, reported as not clean); `Containment::clean` says whether the case left
//!   anything behind after its leader finished.
//! - Memory per execution is bounded by the capture limits plus a fixed 64 KiB read buffer.
//! - Wall time is measured with a monotonic clock; `started_at` is the wall-clock start.
//! - The code between `fork` and `exec` only makes async-signal-safe system calls.

mod capture;
mod cgroup;
// `unsafe`: the fork-safety check asks the kernel for the thread and process ids.
#[allow(unsafe_code)]
mod exec;
mod group;
pub mod mechanisms;
pub mod memstat;
mod owned;
pub mod procfs;
// `unsafe`: namespaces, mounts, capabilities and the box's init: raw system calls between fork and exec.
#[allow(unsafe_code)]
pub mod sandbox;
// `unsafe`: installing the filter is a raw prctl/seccomp call.
#[allow(unsafe_code)]
mod seccomp;
// `unsafe`: the pre-exec hooks and the loopback probe run raw system calls in the child.
#[allow(unsafe_code)]
mod spawn;
// `unsafe`: the thin wrappers over prctl, pidfd_open, kill, waitpid, poll and read.
#[allow(unsafe_code)]
mod sys;

pub mod tool;
pub mod wrap;

// `unsafe`: the forwarding handler and its self-pipe are installed with sigaction and pipe2.
#[allow(unsafe_code)]
pub mod signals;

pub use capture::{CaptureLimits, Captured};
pub use cgroup::{set_cgroup_policy, CgroupPolicy};
pub use exec::{execute, execute_observed, execute_watched, Observer, OutputStream};
#[doc(hidden)]
pub use group::force_full_proc_scan;
pub use owned::{OwnedProcess, OwnedSpec, Shutdown};
pub use procfs::{read_system_bytes, read_system_file, SYSTEM_FILE_LIMIT};
pub use sandbox::{HostFiles, Sandbox, SandboxRecord, SeccompRecord};
pub use spawn::{probe_containment, probe_loopback_only};
pub use sys::signal_name;
pub use tool::{run_tool, ToolRun};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How long members of a case may outlive a normally exiting leader before they are
/// terminated as residue (`SUCCESS_DESCENDANT_SETTLEMENT_SECONDS` of the original runner).
pub const SETTLEMENT: Duration = Duration::from_secs(1);

/// What to run and under which bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSpec {
    /// `argv[0]`: a path (relative paths are relative to `cwd`) or a bare name resolved on the
    /// `PATH` found in `env`.
    pub argv: Vec<String>,
    /// Working directory of the child.
    pub cwd: PathBuf,
    /// The complete child environment; nothing is inherited.
    pub env: Vec<(String, String)>,
    /// Deadline, measured from the spawn; then SIGTERM to the group, `term_grace`, SIGKILL.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub term_grace: Duration,
    /// Per-stream capture bounds.
    pub capture: CaptureLimits,
    /// Network access of the child.
    pub network: NetworkPolicy,
    /// Paths the child may not write (and exceptions below them); see [`sandbox`].
    pub sandbox: Sandbox,
}

/// Network access of a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkPolicy {
    /// The child shares our network namespace.
    Inherit,
    /// A private network namespace with only `lo`, up. Fails closed.
    LoopbackOnly,
}

/// How the leader process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum Termination {
    /// It exited by itself with this code.
    Exited {
        /// Exit code (0..=255).
        code: i32,
    },
    /// It was ended by a signal we did not send.
    Signaled {
        /// Signal number.
        signal: i32,
    },
    /// It passed its deadline; we terminated its group. `signal_used` is the last signal we
    /// sent before it ended (SIGTERM, or SIGKILL after the grace).
    TimedOut {
        /// Signal number.
        signal_used: i32,
    },
    /// This process received SIGINT/SIGTERM (see [`signals`]); we terminated the group.
    Interrupted {
        /// Signal number we sent to the group last.
        signal_used: i32,
    },
    /// The watch callback of [`execute_watched`] asked to stop it (e.g. a result file grew
    /// past its bound); we terminated the group.
    Aborted {
        /// What the watch callback said.
        reason: String,
        /// Signal number we sent to the group last.
        signal_used: i32,
    },
}

impl Termination {
    /// True only for `Exited { code: 0 }`.
    pub fn success(&self) -> bool {
        matches!(self, Termination::Exited { code: 0 })
    }

    /// The exit code, when the leader exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Termination::Exited { code } => Some(*code),
            _ => None,
        }
    }
}

/// The evidence of one execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Execution {
    /// How the leader ended.
    pub termination: Termination,
    /// Wall-clock time of the spawn.
    pub started_at: SystemTime,
    /// Monotonic duration from spawn to the end of cleanup of the leader.
    pub wall: Duration,
    /// Leader pid (for evidence; it is reaped when `execute` returns).
    pub pid: u32,
    /// Captured standard output.
    pub stdout: Captured,
    /// Captured standard error.
    pub stderr: Captured,
    /// How the case was contained and what it left behind.
    pub containment: Containment,
}

/// Containment mechanism used for a process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// A dedicated cgroup v2 sub-tree (plus subreaper for reaping).
    CgroupV2,
    /// The process group and session, with this process as child subreaper.
    ProcessGroupSubreaper,
}

impl Mechanism {
    /// The evidence string (`cgroup_v2` | `process_group_subreaper`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Mechanism::CgroupV2 => "cgroup_v2",
            Mechanism::ProcessGroupSubreaper => "process_group_subreaper",
        }
    }
}

/// Network isolation actually applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkIsolation {
    /// None: the child shared our network namespace.
    None,
    /// `unshare(CLONE_NEWNET)` as root, only `lo`, up.
    LinuxNetNamespaceLoopbackOnly,
    /// `unshare(CLONE_NEWUSER|CLONE_NEWNET)` (unprivileged), only `lo`, up.
    LinuxUserNetNamespaceLoopbackOnly,
}

impl NetworkIsolation {
    /// Mechanism id as exported to cases (`KILN_QUALIFICATION_NETWORK_ISOLATION`).
    pub fn mechanism_id(&self) -> &'static str {
        match self {
            NetworkIsolation::None => "none",
            NetworkIsolation::LinuxNetNamespaceLoopbackOnly => "linux-netns-loopback-only-v1",
            NetworkIsolation::LinuxUserNetNamespaceLoopbackOnly => {
                "linux-userns-netns-loopback-only-v1"
            }
        }
    }
}

/// Containment evidence of one execution or owned process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Containment {
    /// Mechanism that tracked the process tree.
    pub mechanism: Mechanism,
    /// Network isolation applied.
    pub network: NetworkIsolation,
    /// The box the program ran in: namespaces, capabilities, seccomp, read-only paths, pid
    /// limit.
    pub sandbox: SandboxRecord,
    /// Processes other than the leader still alive after the leader ended (after the
    /// settlement window for a normal exit; after the settlement window or the grace,
    /// whichever ends first, when we were terminating the group), which we terminated; with the
    /// signal that ended each.
    pub residue: Vec<Residue>,
    /// Whether we sent any signal to the case's group (deadline, interruption, abort,
    /// residue).
    pub group_killed: bool,
    /// The output pipes reached end-of-file within 1 s after every member was gone (false: a
    /// process outside the case's tree holds them; reading stopped).
    pub pipes_closed: bool,
    /// Nothing was left behind: no residue, pipes closed, and the final check found no member
    /// alive.
    pub clean: bool,
}

/// A process found alive after its leader ended, and terminated by us.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Residue {
    /// Its pid (in this process's PID namespace).
    pub pid: u32,
    /// Its pid inside the box's PID namespace (what the case itself saw), when it had one.
    pub box_pid: Option<u32>,
    /// Its session id (in this process's PID namespace).
    pub session: u32,
    /// Its command line (bounded), or `[comm]`.
    pub cmdline: String,
    /// The last signal we sent it before it disappeared.
    pub signal: i32,
}

/// Why an execution could not be run (a run that started always yields an [`Execution`]).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The spec itself is unusable (empty argv, NUL bytes, bad environment names).
    #[error("validate the execution spec: {reason}")]
    InvalidSpec {
        /// All problems, joined with `; `.
        reason: String,
    },
    /// The program could not be started.
    #[error("spawn {program}: {reason}")]
    Spawn {
        /// `argv[0]`.
        program: String,
        /// OS error text or resolution failure.
        reason: String,
    },
    /// The kernel refused a mechanism of the box (namespaces, mounts, capabilities,
    /// seccomp, cgroup): fail closed, never a weaker box.
    #[error("establish the case box: missing {capability}: {reason}")]
    IsolationUnavailable {
        /// The capability that is missing.
        capability: String,
        /// The OS error.
        reason: String,
    },
    /// An I/O error while supervising.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// SIGINT/SIGTERM was received before the execution started; nothing was spawned.
    #[error("start execution: interrupted by {}", signal_name(*signal))]
    Interrupted {
        /// The signal received.
        signal: i32,
    },
}
