//! [`OwnedProcess`]: a long-lived contained process (typically a server) under the same
//! containment rules as [`crate::execute`], with stdout/stderr written to log files under a
//! byte bound by two drain threads, and a staged [`OwnedProcess::shutdown`].
//!
//! Invariants: the log files are created exclusively (an existing file is an error, never
//! overwritten); each holds at most `log_limit_bytes` (the first bytes; the rest is counted);
//! dropping an `OwnedProcess` that was not shut down kills its whole tree with SIGKILL and
//! reaps it.

use crate::exec::{self, Started, Supervisor, Why};
use crate::{
    Containment, ExecError, Mechanism, NetworkIsolation, NetworkPolicy, Residue, Termination,
};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What to start as an owned process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedSpec {
    /// `argv[0]`: a path or a bare name resolved on the `PATH` of `env`.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// The complete environment; nothing is inherited.
    pub env: Vec<(String, String)>,
    /// File receiving stdout (created exclusively).
    pub stdout_log: PathBuf,
    /// File receiving stderr (created exclusively).
    pub stderr_log: PathBuf,
    /// Maximum bytes written to each log file; further output is drained and counted.
    pub log_limit_bytes: u64,
    /// Network access.
    pub network: NetworkPolicy,
    /// Paths the process may not write (and exceptions below them).
    pub sandbox: crate::Sandbox,
}

/// What a log file received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LogSummary {
    /// Bytes the process wrote to the stream.
    pub total_bytes: u64,
    /// Bytes kept in the file.
    pub written_bytes: u64,
    /// Whether output was dropped.
    pub truncated: bool,
}

/// The outcome of [`OwnedProcess::shutdown`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shutdown {
    /// Whether SIGKILL was needed (for the leader or any member): a failure signal for a
    /// server that should stop on SIGTERM.
    pub used_kill: bool,
    /// How the leader ended (`Exited`/`Signaled` as observed; SIGTERM from the shutdown shows
    /// as `Signaled { signal: 15 }` unless the process handled it and exited).
    pub termination: Termination,
    /// Processes still alive after the leader ended and the settlement window (or the grace,
    /// when that ends first), terminated by us: pid, command line, the signal that ended each.
    pub residue: Vec<Residue>,
    /// No residue, log pipes closed, nothing left alive.
    pub clean: bool,
    /// Mechanism used.
    pub mechanism: Mechanism,
    /// Network isolation used.
    pub network: NetworkIsolation,
    /// The box the process ran in.
    pub sandbox: crate::SandboxRecord,
    /// Standard output log summary.
    pub stdout: LogSummary,
    /// Standard error log summary.
    pub stderr: LogSummary,
}

/// A contained long-lived process. See the module docs.
pub struct OwnedProcess {
    st: Option<Started>,
    exited: Option<ExitStatus>,
    drains: Vec<JoinHandle<LogSummary>>,
    /// The outcome of the first shutdown, returned again by later calls.
    done: Option<Shutdown>,
    /// The program inside the box was seen running (so an empty box means it has ended).
    program_seen: bool,
}

impl std::fmt::Debug for OwnedProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedProcess")
            .field("pid", &self.st.as_ref().map(|s| s.child.id()))
            .field("exited", &self.exited)
            .finish()
    }
}

fn create_log(path: &std::path::Path) -> Result<File, ExecError> {
    qual_json::publish::create_new(path).map_err(|e| ExecError::Io {
        context: format!("create log file {}", path.display()),
        source: e,
    })
}

fn drain_to_file(mut src: impl Read, mut dst: File, limit: u64) -> LogSummary {
    let mut buf = vec![0u8; 64 * 1024];
    let mut s = LogSummary::default();
    let mut write_ok = true;
    loop {
        match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                s.total_bytes += n as u64;
                let room = limit.saturating_sub(s.written_bytes) as usize;
                let k = room.min(n);
                if k > 0 && write_ok {
                    if dst.write_all(&buf[..k]).is_ok() {
                        s.written_bytes += k as u64;
                    } else {
                        write_ok = false;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let _ = dst.flush();
    s.truncated = s.total_bytes > s.written_bytes;
    s
}

impl OwnedProcess {
    /// Starts the process contained (own session, cgroup when usable, optional loopback-only
    /// network namespace) with its output drained into the log files.
    pub fn spawn(spec: &OwnedSpec) -> Result<OwnedProcess, ExecError> {
        let out = create_log(&spec.stdout_log)?;
        let err = match create_log(&spec.stderr_log) {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&spec.stdout_log);
                return Err(e);
            }
        };
        let mut st = match exec::start(
            &spec.argv,
            &spec.cwd,
            &spec.env,
            spec.network,
            &spec.sandbox,
            false,
        ) {
            Ok((st, _)) => st,
            Err(e) => {
                let _ = std::fs::remove_file(&spec.stdout_log);
                let _ = std::fs::remove_file(&spec.stderr_log);
                return Err(e);
            }
        };
        let limit = spec.log_limit_bytes;
        let mut drains = Vec::new();
        if let Some(p) = st.child.stdout.take() {
            drains.push(std::thread::spawn(move || drain_to_file(p, out, limit)));
        }
        if let Some(p) = st.child.stderr.take() {
            drains.push(std::thread::spawn(move || drain_to_file(p, err, limit)));
        }
        Ok(OwnedProcess {
            st: Some(st),
            exited: None,
            drains,
            done: None,
            program_seen: false,
        })
    }

    /// The leader's pid.
    pub fn pid(&self) -> u32 {
        self.st.as_ref().map(|s| s.child.id()).unwrap_or(0)
    }

    /// The containment mechanism in use.
    pub fn mechanism(&self) -> Option<Mechanism> {
        self.st.as_ref().map(|s| s.mechanism)
    }

    /// The box the process runs in.
    pub fn sandbox(&self) -> Option<&crate::SandboxRecord> {
        self.st.as_ref().map(|s| &s.sandbox)
    }

    /// The network isolation in use (its id goes into the case environment).
    pub fn network_isolation(&self) -> Option<NetworkIsolation> {
        self.st.as_ref().map(|s| s.network)
    }

    /// Whether the leader has ended (without blocking); members may still be alive.
    pub fn try_wait(&mut self) -> std::io::Result<Option<Termination>> {
        if let Some(s) = self.exited {
            return Ok(Some(exec::exit_termination(s)));
        }
        let Some(st) = self.st.as_mut() else {
            return Ok(self.done.as_ref().map(|d| d.termination.clone()));
        };
        let mut status = st.child.try_wait()?;
        let program_alive = status.is_none() && !st.tracker.live_members().is_empty();
        self.program_seen |= program_alive;
        if status.is_none() && !st.sandbox.enclosing_box && self.program_seen && !program_alive {
            // The leader relays the program's end (the box's init reports it): when nothing
            // but the leader is left, the program has ended and the relay is on its way.
            let until = Instant::now() + Duration::from_secs(1);
            while status.is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_micros(200));
                status = st.child.try_wait()?;
            }
        }
        match status {
            Some(status) => {
                self.exited = Some(status);
                crate::group::unregister_leader(st.child.id());
                Ok(Some(exec::exit_termination(status)))
            }
            None => Ok(None),
        }
    }

    /// Waits up to `within` for both log drains to reach the end of their pipes (every writer
    /// gone: the leader has exited and no member holds the pipes), so the log files hold
    /// everything written before; true when they did. Read a log after the leader's exit
    /// only after this: the drain threads copy from the pipes to the files asynchronously.
    pub fn wait_output_closed(&self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            if self.drains.iter().all(|h| h.is_finished()) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Live processes of its tree (leader included while it runs): cgroup members, or its
    /// group, session and subreaped descendants.
    pub fn group_members(&self) -> Vec<u32> {
        let Some(st) = self.st.as_ref() else {
            return Vec::new();
        };
        let mut v: Vec<u32> = Vec::new();
        if self.exited.is_none() && crate::procfs::stat(st.child.id()).is_some_and(|s| !s.is_dead())
        {
            v.push(st.child.id());
        }
        let live = st.tracker.live_members();
        v.extend(live.into_iter().map(|s| s.pid));
        v
    }

    /// SIGTERM to the leader's process group, up to `grace` for everything to end, SIGKILL
    /// for what remains. Residue: a member outside the leader's group (it left with `setsid`
    /// or `setpgid`, so only the server could have stopped it) still alive when the leader
    /// has exited, and any member still alive after the settlement window. A second call
    /// returns the first outcome again.
    pub fn shutdown(&mut self, grace: Duration) -> Shutdown {
        if let Some(done) = &self.done {
            return done.clone();
        }
        let mut st = self.st.take().expect("an owned process not yet shut down");
        let exited = self.exited;
        let pidfd = crate::sys::pidfd_open(st.child.id());
        let long = Duration::from_secs(10 * 365 * 24 * 3600);
        let mut sup = Supervisor::new(&mut st, long, grace);
        match exited {
            Some(status) => {
                sup.on_leader_exit(status);
                let live = sup.st.tracker.live_members();
                if !live.is_empty() {
                    sup.begin_termination(Why::Residue);
                }
            }
            None => sup.begin_termination(Why::Shutdown),
        }
        loop {
            if sup.leader_status.is_none() {
                if let Ok(Some(status)) = sup.st.child.try_wait() {
                    sup.on_leader_exit(status);
                }
            }
            let now = Instant::now();
            sup.advance(now);
            if sup.settled {
                break;
            }
            let mut fds = Vec::new();
            if sup.leader_status.is_none() {
                if let Some(p) = &pidfd {
                    fds.push(libc::pollfd {
                        fd: std::os::fd::AsRawFd::as_raw_fd(p),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                }
            }
            let t = sup
                .next_timeout(now, pidfd.is_some(), now)
                .min(Duration::from_millis(10));
            let _ = crate::sys::poll(&mut fds, t);
        }
        // Drain threads end when every writer of the pipes is gone.
        let until = Instant::now() + Duration::from_secs(1);
        while self.drains.iter().any(|h| !h.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        let pipes_closed = self.drains.iter().all(|h| h.is_finished());
        let containment: Containment = sup.finish(pipes_closed);
        let used_kill = sup.kill_sent;
        let termination = exec::exit_termination(sup.leader_status.expect("reaped"));
        let mut logs = [LogSummary::default(); 2];
        for (i, h) in self.drains.drain(..).enumerate() {
            if h.is_finished() {
                logs[i] = h.join().unwrap_or_default();
            }
        }
        let done = Shutdown {
            used_kill,
            termination,
            residue: containment.residue,
            clean: containment.clean,
            mechanism: containment.mechanism,
            network: containment.network,
            sandbox: containment.sandbox,
            stdout: logs[0],
            stderr: logs[1],
        };
        self.done = Some(done.clone());
        done
    }
}

impl Drop for OwnedProcess {
    fn drop(&mut self) {
        if self.st.is_some() {
            let _ = self.shutdown(Duration::ZERO);
        }
    }
}
