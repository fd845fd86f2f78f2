//! The owned server's lifecycle: port check, launch, readiness, listener ownership,
//! shutdown, residue — each step stamped on the campaign's monotonic clock.
//!
//! Process containment (own session and process group, cgroup v2 when available, subreaper,
//! bounded log files, staged TERM → grace → KILL, residue evidence) is `qual-exec`'s
//! [`OwnedProcess`]; this module adds what is specific to a server:
//!
//! * before launch, the port must have no LISTEN socket (`/proc/net/tcp` and `tcp6`, any
//!   address); otherwise the campaign refuses to launch;
//! * readiness: `GET /v1/models` until it lists a model, within `startup_timeout_seconds`,
//!   failing fast when the server exits first;
//! * listener ownership: every LISTEN socket inode on the port must be held (an open
//!   `socket:[inode]` descriptor under `/proc/<pid>/fd`) by a member of the server's tree, and
//!   at least one must be;
//! * shutdown: SIGTERM to the group, the recipe's grace, SIGKILL only as a recorded failure;
//!   afterwards no member of the group may be alive and no socket may listen on the port.
//!
//! Invariant: [`LifecycleRecord::passed`] is true only when every step above succeeded, the
//! exit code is acceptable and nothing had to be killed.

use crate::client::{self, Probe};
use crate::recipe::LaunchRecipe;
use qual_exec::{NetworkPolicy, OwnedProcess, OwnedSpec, Residue, Termination};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One timestamped lifecycle step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LifecycleEvent {
    /// Step name (`port_checked`, `launched`, `ready`, …).
    pub step: &'static str,
    /// Campaign-clock nanoseconds.
    pub at_ns: u64,
    /// Details, when useful.
    pub detail: Option<String>,
}

/// Who holds the listener.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ListenerRecord {
    /// LISTEN socket inodes on the port.
    pub inodes: Vec<u64>,
    /// Members of the server's tree holding one of them.
    pub owner_pids: Vec<u32>,
    /// Inodes held by no member of the tree.
    pub foreign_inodes: Vec<u64>,
}

/// A log file's identity after shutdown.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogRecord {
    /// File path.
    pub path: String,
    /// Bytes the server wrote to the stream.
    pub total_bytes: u64,
    /// Bytes kept in the file.
    pub kept_bytes: u64,
    /// Output beyond the bound was dropped.
    pub truncated: bool,
    /// `sha256:` of the kept bytes.
    pub sha256: Option<String>,
}

/// How the shutdown went.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShutdownRecord {
    /// Always `SIGTERM` first.
    pub signal: &'static str,
    /// Whether SIGTERM was sent (false when the server had already exited).
    pub signal_sent: bool,
    /// Grace before SIGKILL, seconds.
    pub grace_seconds: f64,
    /// SIGKILL was needed (a failure).
    pub forced: bool,
    /// How the leader ended.
    pub termination: Termination,
    /// Exit code (a death by signal `s` is `-s`).
    pub exit_code: Option<i64>,
    /// Whether the exit code is in the recipe's list.
    pub exit_code_acceptable: bool,
    /// Processes alive after the leader ended.
    pub residue: Vec<Residue>,
    /// qual-exec's containment verdict.
    pub containment_clean: bool,
    /// Monotonic shutdown duration.
    pub elapsed_seconds: f64,
    /// Non-zombie processes of the group found after shutdown.
    pub group_members_after: Vec<u32>,
    /// LISTEN inodes on the port after shutdown.
    pub listeners_after: Vec<u64>,
}

/// The full lifecycle record (goes into the evidence).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LifecycleRecord {
    /// Always `owned_process_group`.
    pub mode: &'static str,
    /// Recipe id.
    pub recipe_id: String,
    /// `http://127.0.0.1:<port>` (or `http://[::1]:<port>`).
    pub base_url: String,
    /// Leader pid (= process group id).
    pub pid: Option<u32>,
    /// Containment mechanism.
    pub mechanism: Option<&'static str>,
    /// The box the server ran in (namespaces, capabilities, seccomp, read-only paths, pid
    /// limit).
    #[serde(rename = "box")]
    pub sandbox: Option<qual_exec::SandboxRecord>,
    /// Every step, in order.
    pub events: Vec<LifecycleEvent>,
    /// Readiness attempts.
    pub readiness_attempts: u32,
    /// Listener ownership.
    pub listener: Option<ListenerRecord>,
    /// Shutdown.
    pub shutdown: Option<ShutdownRecord>,
    /// Server stdout log.
    pub stdout_log: Option<LogRecord>,
    /// Server stderr log.
    pub stderr_log: Option<LogRecord>,
    /// Failures, lowercase, in order.
    pub failures: Vec<String>,
    /// Every step succeeded.
    pub passed: bool,
}

/// An owned server and its record.
pub struct OwnedServer {
    recipe: LaunchRecipe,
    epoch: Instant,
    process: Option<OwnedProcess>,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    /// The record so far.
    pub record: LifecycleRecord,
    exited_early: Option<Termination>,
}

fn ns_since(epoch: Instant) -> u64 {
    Instant::now().saturating_duration_since(epoch).as_nanos() as u64
}

impl OwnedServer {
    /// The server address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.recipe.host, self.recipe.port)
    }

    fn event(&mut self, step: &'static str, detail: Option<String>) {
        self.record.events.push(LifecycleEvent {
            step,
            at_ns: ns_since(self.epoch),
            detail,
        });
    }

    fn fail(&mut self, step: &'static str, reason: String) {
        self.event(step, Some(reason.clone()));
        self.record.failures.push(reason);
    }

    /// Checks the port and launches the server. On `Err` the record says why and nothing runs.
    /// `protect`: paths the server must not write (read-only inside its box). The server gets
    /// the box of a case: the host read-only but the worktree around its working directory
    /// (or that directory, outside a repository), a private `/tmp`; it enters its working
    /// directory inside the box, so one at or below a protected path is read-only to it.
    pub fn launch(
        recipe: &LaunchRecipe,
        epoch: Instant,
        protect: &[PathBuf],
    ) -> Result<OwnedServer, Box<OwnedServer>> {
        let mut s = OwnedServer {
            recipe: recipe.clone(),
            epoch,
            process: None,
            stdout_path: PathBuf::new(),
            stderr_path: PathBuf::new(),
            record: LifecycleRecord {
                mode: "owned_process_group",
                recipe_id: recipe.id.clone(),
                base_url: recipe.base_url(),
                pid: None,
                mechanism: None,
                sandbox: None,
                events: Vec::new(),
                readiness_attempts: 0,
                listener: None,
                shutdown: None,
                stdout_log: None,
                stderr_log: None,
                failures: Vec::new(),
                passed: false,
            },
            exited_early: None,
        };
        let busy = listening_inodes(recipe.port);
        if !busy.is_empty() {
            let owners = pids_holding_sockets(&qual_exec::procfs::pids(), &busy);
            s.fail(
                "port_checked",
                format!(
                    "port {} is already listening before launch (socket inodes {:?}, holder pids {:?}); refusing to launch",
                    recipe.port, busy, owners
                ),
            );
            return Err(Box::new(s));
        }
        s.event(
            "port_checked",
            Some(format!("no listener on port {}", recipe.port)),
        );
        // The worktree around the working directory is writable, the protected paths in it
        // are not (they are attached on top, read-only); outside a repository the working
        // directory itself is writable unless it is protected.
        let cwd = std::fs::canonicalize(&recipe.working_directory)
            .unwrap_or_else(|_| recipe.working_directory.clone());
        let writable: Vec<PathBuf> = match cwd.ancestors().find(|d| d.join(".git").exists()) {
            Some(top) => vec![top.to_path_buf()],
            None if protect.iter().any(|p| cwd.starts_with(p)) => Vec::new(),
            None => vec![cwd],
        };
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let stem = format!("{}-{stamp}-{}", recipe.id, std::process::id());
        let log_dir = match private_log_dir(&recipe.log_directory, &stem) {
            Ok(d) => d,
            Err(e) => {
                s.fail("launch_failed", format!("create the log directory: {e}"));
                return Err(Box::new(s));
            }
        };
        s.stdout_path = log_dir.join(format!("{stem}.stdout.log"));
        s.stderr_path = log_dir.join(format!("{stem}.stderr.log"));
        let spec = OwnedSpec {
            argv: recipe.command.clone(),
            cwd: recipe.working_directory.clone(),
            env: recipe
                .environment
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            stdout_log: s.stdout_path.clone(),
            stderr_log: s.stderr_path.clone(),
            log_limit_bytes: recipe.log_limit_bytes,
            network: NetworkPolicy::Inherit,
            sandbox: qual_exec::Sandbox {
                read_only: [protect.to_vec(), tmp_inputs(&recipe.command, &writable)].concat(),
                writable,
                host: qual_exec::HostFiles::ReadOnly,
            },
        };
        match OwnedProcess::spawn(&spec) {
            Ok(p) => {
                s.record.pid = Some(p.pid());
                s.record.mechanism = p.mechanism().map(|m| m.as_str());
                s.record.sandbox = p.sandbox().cloned();
                s.process = Some(p);
                let pid = s.record.pid;
                s.event(
                    "launched",
                    pid.map(|p| format!("pid {p} (process group {p})")),
                );
                Ok(s)
            }
            Err(e) => {
                s.fail("launch_failed", format!("launch server: {e}"));
                Err(Box::new(s))
            }
        }
    }

    fn leader_exit(&mut self) -> Option<Termination> {
        if self.exited_early.is_some() {
            return self.exited_early.clone();
        }
        let t = self
            .process
            .as_mut()
            .and_then(|p| p.try_wait().ok().flatten());
        if t.is_some() {
            self.exited_early = t.clone();
        }
        t
    }

    fn log_tail(&self) -> String {
        let mut out = String::new();
        for p in [&self.stderr_path, &self.stdout_path] {
            if let Ok(b) = qual_json::file::read_regular_bytes(p, MAX_LOG_BYTES) {
                let tail = &b[b.len().saturating_sub(600)..];
                let t = String::from_utf8_lossy(tail).trim().to_string();
                if !t.is_empty() {
                    out = t;
                    break;
                }
            }
        }
        if out.is_empty() {
            out = "(the server wrote nothing)".into();
        }
        out
    }

    /// Polls `/v1/models` until ready; returns the body and served ids.
    pub fn wait_ready(&mut self, rt: &tokio::runtime::Runtime) -> Option<(Vec<u8>, Vec<String>)> {
        let deadline = Instant::now() + self.recipe.startup_timeout;
        let addr = self.addr();
        let mut last = String::from("no probe completed");
        loop {
            if let Some(sig) = qual_exec::signals::interrupted() {
                self.fail(
                    "readiness_failed",
                    format!("interrupted by signal {sig} before the server became ready"),
                );
                return None;
            }
            if let Some(t) = self.leader_exit() {
                // The drain threads may not have copied the server's last words to the log
                // files yet: wait for the pipes to close before reading the tail.
                let closed = self
                    .process
                    .as_ref()
                    .is_some_and(|p| p.wait_output_closed(Duration::from_secs(2)));
                let mut tail = self.log_tail();
                if !closed {
                    tail.push_str(" (output still open: a process of the server holds it)");
                }
                self.fail(
                    "readiness_failed",
                    format!(
                        "server exited before becoming ready ({}); log tail: {tail}",
                        describe(&t)
                    ),
                );
                return None;
            }
            let now = Instant::now();
            if now >= deadline {
                let secs = self.recipe.startup_timeout.as_secs_f64();
                self.fail(
                    "readiness_failed",
                    format!("server did not become ready within {secs} s; last probe: {last}"),
                );
                return None;
            }
            let remaining = deadline - now;
            self.record.readiness_attempts += 1;
            match rt.block_on(client::probe_models(
                addr,
                remaining.min(Duration::from_secs(2)),
            )) {
                Probe::Ready { body, ids } => {
                    let detail = format!(
                        "served models {ids:?} after {} probes",
                        self.record.readiness_attempts
                    );
                    self.event("ready", Some(detail));
                    return Some((body, ids));
                }
                Probe::NotReady(why) => last = why,
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            std::thread::sleep(self.recipe.readiness_poll_interval.min(remaining));
        }
    }

    /// Checks that the port's listeners belong to the server's tree.
    pub fn check_listener(&mut self) -> bool {
        let inodes = listening_inodes(self.recipe.port);
        let members = self
            .process
            .as_ref()
            .map(|p| p.group_members())
            .unwrap_or_default();
        let owners = pids_holding_sockets(&members, &inodes);
        let owned = sockets_of(&members);
        let foreign: Vec<u64> = inodes
            .iter()
            .copied()
            .filter(|i| !owned.contains(i))
            .collect();
        let rec = ListenerRecord {
            inodes: inodes.clone(),
            owner_pids: owners.clone(),
            foreign_inodes: foreign.clone(),
        };
        self.record.listener = Some(rec);
        if inodes.is_empty() || owners.is_empty() {
            self.fail(
                "listener_checked",
                format!("no listener on port {} belongs to the server's process group (listening inodes {inodes:?}, group members {members:?})", self.recipe.port),
            );
            return false;
        }
        if !foreign.is_empty() {
            self.fail(
                "listener_checked",
                format!("socket inodes {foreign:?} listening on port {} are not held by the server's process group", self.recipe.port),
            );
            return false;
        }
        self.event(
            "listener_checked",
            Some(format!("port {} held by pids {owners:?}", self.recipe.port)),
        );
        true
    }

    /// Checks the server's own statement of its device ([`crate::recipe::DeviceReport`]),
    /// when the recipe declares one: some line of its logs (read once it is ready) must
    /// match. A server that does not say it serves on the declared device is refused, never
    /// measured as if it did (ggml, for one, falls back to the CPU with a warning only).
    pub fn check_device_report(&mut self) -> bool {
        let Some(report) = self.recipe.device_report.clone() else {
            return true;
        };
        let found = [&self.stderr_path, &self.stdout_path].iter().find_map(|p| {
            let bytes = qual_json::file::read_regular_bytes(p, MAX_LOG_BYTES).ok()?;
            String::from_utf8_lossy(&bytes)
                .lines()
                .find(|l| report.pattern.is_match(l))
                .map(|l| qual_json::escape_text(l.trim()).into_owned())
        });
        match found {
            Some(line) => {
                self.event("device_reported", Some(line));
                true
            }
            None => {
                self.fail(
                    "device_reported",
                    format!(
                        "the server did not report serving on {}: no line of its logs matches {:?}; refusing to measure a server that may have fallen back to another device (check its log, the driver, and the device the launch command selects)",
                        report.description,
                        report.pattern.as_str()
                    ),
                );
                false
            }
        }
    }

    /// Records a leader exit observed during the run (a failure).
    pub fn check_alive_after_run(&mut self) -> bool {
        if let Some(t) = self.leader_exit() {
            self.fail(
                "exited_during_run",
                format!("server exited during the run ({})", describe(&t)),
            );
            return false;
        }
        true
    }

    /// TERM, grace, KILL as a failure; then proves nothing is left. Consumes the process.
    pub fn shutdown(mut self) -> LifecycleRecord {
        let Some(mut p) = self.process.take() else {
            self.record.passed = false;
            return self.record;
        };
        let pgid = p.pid();
        let already = self.leader_exit().is_some();
        self.event(
            "shutdown_started",
            Some(if already {
                "leader already exited; cleaning up its group".into()
            } else {
                "sent SIGTERM to the process group".into()
            }),
        );
        let t0 = Instant::now();
        let sd = p.shutdown(self.recipe.shutdown_timeout);
        let elapsed = t0.elapsed();
        let code = match &sd.termination {
            Termination::Exited { code } => Some(*code as i64),
            Termination::Signaled { signal } => Some(-(*signal as i64)),
            _ => None,
        };
        let acceptable = code.is_some_and(|c| self.recipe.acceptable_exit_codes.contains(&c));
        let members_after = group_members_by_pgrp(pgid);
        let listeners_after = listening_inodes(self.recipe.port);
        self.event(
            "shutdown_finished",
            Some(format!(
                "{} after {:.3} s",
                describe(&sd.termination),
                elapsed.as_secs_f64()
            )),
        );
        if sd.used_kill {
            self.record.failures.push(format!(
                "server did not stop within the {} s grace after SIGTERM; SIGKILL was needed",
                self.recipe.shutdown_timeout.as_secs_f64()
            ));
        }
        if !sd.residue.is_empty() {
            let list: Vec<String> = sd
                .residue
                .iter()
                .map(|r| format!("{} ({})", r.pid, r.cmdline))
                .collect();
            self.record.failures.push(format!(
                "server left {} process(es) behind after its leader ended: {}",
                sd.residue.len(),
                list.join(", ")
            ));
        }
        if !acceptable && !already {
            self.record.failures.push(format!(
                "server exit code {} is not in acceptable_exit_codes {:?}",
                code.map_or("null".to_string(), |c| c.to_string()),
                self.recipe.acceptable_exit_codes
            ));
        }
        if !sd.clean && sd.residue.is_empty() && !sd.used_kill {
            self.record.failures.push("server containment was not clean (an output pipe stayed open or a member stayed alive)".into());
        }
        if !members_after.is_empty() {
            self.record.failures.push(format!(
                "processes of the server's group are still alive after shutdown: {members_after:?}"
            ));
        }
        if !listeners_after.is_empty() {
            self.record.failures.push(format!(
                "port {} still has a listener after shutdown (inodes {listeners_after:?})",
                self.recipe.port
            ));
        }
        self.record.shutdown = Some(ShutdownRecord {
            signal: "SIGTERM",
            signal_sent: !already,
            grace_seconds: self.recipe.shutdown_timeout.as_secs_f64(),
            forced: sd.used_kill,
            termination: sd.termination.clone(),
            exit_code: code,
            exit_code_acceptable: acceptable,
            residue: sd.residue.clone(),
            containment_clean: sd.clean,
            elapsed_seconds: elapsed.as_secs_f64(),
            group_members_after: members_after,
            listeners_after,
        });
        self.record.stdout_log = Some(log_record(
            &self.stdout_path,
            sd.stdout.total_bytes,
            sd.stdout.written_bytes,
            sd.stdout.truncated,
        ));
        self.record.stderr_log = Some(log_record(
            &self.stderr_path,
            sd.stderr.total_bytes,
            sd.stderr.written_bytes,
            sd.stderr.truncated,
        ));
        self.event("verified", None);
        self.record.passed = self.record.failures.is_empty();
        self.record
    }

    /// The record of a server that was never launched (port busy, spawn failure).
    pub fn into_record(self) -> LifecycleRecord {
        self.record
    }
}

/// The most a server log file can hold: the recipe's largest `log_limit_bytes`.
const MAX_LOG_BYTES: usize = 1 << 30;

fn log_record(path: &Path, total_bytes: u64, kept_bytes: u64, truncated: bool) -> LogRecord {
    LogRecord {
        path: path.display().to_string(),
        total_bytes,
        kept_bytes,
        truncated,
        sha256: qual_json::file::read_regular_bytes(path, MAX_LOG_BYTES)
            .ok()
            .map(|b| qual_json::sha256_prefixed(&b)),
    }
}

fn describe(t: &Termination) -> String {
    match t {
        Termination::Exited { code } => format!("exited with code {code}"),
        Termination::Signaled { signal } => format!("killed by signal {signal}"),
        Termination::TimedOut { signal_used } => {
            format!("timed out, ended by signal {signal_used}")
        }
        Termination::Interrupted { signal_used } => {
            format!("interrupted, ended by signal {signal_used}")
        }
        Termination::Aborted { reason, .. } => format!("aborted: {reason}"),
    }
}

/// LISTEN socket inodes on `port` (IPv4 and IPv6, any address).
pub fn listening_inodes(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = qual_exec::read_system_file(f) {
            out.extend(parse_proc_net_tcp(&text, port));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Parses `/proc/net/tcp{,6}` text: inodes of LISTEN (`0A`) rows whose local port is `port`.
pub fn parse_proc_net_tcp(text: &str, port: u16) -> Vec<u64> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" {
                return None;
            }
            let p = u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok()?;
            (p == port).then(|| f[9].parse::<u64>().ok()).flatten()
        })
        .collect()
}

fn sockets_of(pids: &[u32]) -> Vec<u64> {
    let mut out = Vec::new();
    for pid in pids {
        if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            for e in rd.flatten() {
                if let Ok(t) = std::fs::read_link(e.path()) {
                    let t = t.to_string_lossy();
                    if let Some(n) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                        if let Ok(i) = n.parse() {
                            out.push(i);
                        }
                    }
                }
            }
        }
    }
    out
}

fn pids_holding_sockets(pids: &[u32], inodes: &[u64]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|&p| sockets_of(&[p]).iter().any(|i| inodes.contains(i)))
        .collect()
}

/// Non-zombie processes whose process group is `pgid`.
pub fn group_members_by_pgrp(pgid: u32) -> Vec<u32> {
    qual_exec::procfs::snapshot()
        .into_iter()
        .filter(|s| !s.is_dead() && s.pgrp == pgid)
        .map(|s| s.pid)
        .collect()
}

/// What the server's argv names below the host's `/tmp` (a model in a temporary directory):
/// the box's `/tmp` is private, so each such file's directory (or such a directory) outside
/// the writable paths is bound into it read-only at its place; the rest of the host is
/// visible (read-only) already.
fn tmp_inputs(argv: &[String], writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for a in argv {
        let Ok(p) = std::fs::canonicalize(a) else {
            continue;
        };
        if !Path::new(a).is_absolute() || !p.starts_with("/tmp") {
            continue;
        }
        let dir = if p.is_dir() {
            p
        } else {
            match p.parent() {
                Some(d) => d.to_path_buf(),
                None => continue,
            }
        };
        if writable.iter().any(|w| dir.starts_with(w)) || out.contains(&dir) {
            continue;
        }
        out.push(dir);
    }
    out
}

/// Creates this launch's own log directory `<log_directory>/<stem>/`, fresh (it must not
/// exist) and private (mode 0700), confined (`qual_json::confine`) to the repository that
/// holds the log directory (its nearest ancestor with a `.git`), or outside any repository to
/// the log directory's parent: it may not leave that root and no component below it may be a
/// symlink.
fn private_log_dir(log_directory: &Path, stem: &str) -> Result<PathBuf, String> {
    let cwd = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot resolve the current directory: {e}"))?;
    let dir = cwd.join(log_directory);
    // The root is found from the part of the path before any `..` (for a recipe's relative
    // log directory: the recipe's directory), so `..` can never climb out of it; the walk
    // then checks every component of `dir` as written.
    let head: PathBuf = dir
        .components()
        .take_while(|c| !matches!(c, std::path::Component::ParentDir))
        .collect();
    let root = head
        .ancestors()
        .find(|d| d.join(".git").exists())
        .or_else(|| head.parent())
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    qual_json::confine::create_dir_new(&root, &dir.join(stem), 0o700).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_rows_are_parsed() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:4A50 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0 100 0 0 10 0\n\
   1: 0100007F:4A50 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 777 1 0 100 0 0 10 0\n\
   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 999 1 0 100 0 0 10 0\n";
        assert_eq!(parse_proc_net_tcp(text, 0x4A50), vec![12345]);
        assert_eq!(parse_proc_net_tcp(text, 8080), vec![999]);
        assert!(parse_proc_net_tcp(text, 1).is_empty());
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0\n";
        assert_eq!(parse_proc_net_tcp(v6, 8080), vec![4242]);
    }

    #[test]
    fn a_listener_of_this_process_is_found_and_owned() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let inodes = listening_inodes(port);
        assert_eq!(inodes.len(), 1);
        assert_eq!(
            pids_holding_sockets(&[std::process::id()], &inodes),
            vec![std::process::id()]
        );
        drop(l);
        assert!(listening_inodes(port).is_empty());
    }
}
