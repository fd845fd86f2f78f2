//! [`execute`]: one bounded execution, supervised by a single `poll` loop that drains both
//! output pipes, watches the leader through a pidfd, and applies the deadline, interruption,
//! settlement and termination schedule. Cleanup always runs before it returns.

use crate::capture::Capture;
use crate::cgroup::{self, CaseCgroup};
use crate::group::{self, Tracker};
use crate::procfs::Stat;
use crate::sandbox::{self, Plan, Sandbox, SandboxRecord, Step};
use crate::spawn;
use crate::{
    signals, sys, Containment, ExecError, ExecSpec, Execution, Mechanism, NetworkIsolation,
    NetworkPolicy, Residue, Termination, SETTLEMENT,
};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// How long to wait for the output pipes to close once every member is gone.
const PIPE_CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How long members may survive SIGKILL before supervision stops waiting for them.
const KILL_GIVE_UP: Duration = Duration::from_secs(10);
/// Supervision tick while something must be re-checked.
const TICK: Duration = Duration::from_millis(10);
/// How often the watch callback of [`execute_watched`] is consulted.
const WATCH_EVERY: Duration = Duration::from_millis(20);

/// Held by an execution that runs without a cgroup (process group + subreaper tracking).
static FALLBACK_SERIAL: Mutex<()> = Mutex::new(());

/// A spawned, contained leader.
pub(crate) struct Started {
    pub child: Child,
    pub tracker: Tracker,
    pub mechanism: Mechanism,
    pub network: NetworkIsolation,
    pub sandbox: SandboxRecord,
    pub started_at: SystemTime,
    pub t0: Instant,
}

/// Spawns `argv` contained: own session, cgroup (required unless the policy says
/// otherwise), the box of [`crate::sandbox`], stdout/stderr piped. `supervised` (for
/// [`execute`]: the calling thread supervises the child until it is gone) adds
/// die-with-parent and serializes fallback-mode executions; an owned process gets
/// die-with-parent only when spawned from the main thread (its namespace init dies with this
/// process in every case).
#[allow(clippy::disallowed_methods)] // the home of case spawns (bounded, contained: crate docs)
pub(crate) fn start(
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    network: NetworkPolicy,
    sandbox: &Sandbox,
    supervised: bool,
) -> Result<(Started, Option<MutexGuard<'static, ()>>), ExecError> {
    spawn::validate(argv, env)?;
    if let Some(signal) = signals::interrupted() {
        return Err(ExecError::Interrupted { signal });
    }
    if !cwd.is_dir() {
        return Err(ExecError::Spawn {
            program: argv[0].clone(),
            reason: format!("working directory {} is not a directory", cwd.display()),
        });
    }
    // The box enters the working directory itself, after its mounts: it needs it absolute
    // (a relative one is relative to this process's working directory, as for `std`).
    let absolute;
    let cwd = if cwd.is_absolute() {
        cwd
    } else {
        absolute = std::env::current_dir()
            .map_err(|e| ExecError::Io {
                context: "read the current directory".into(),
                source: e,
            })?
            .join(cwd);
        absolute.as_path()
    };
    let program = spawn::resolve_program(&argv[0], cwd, env)?;
    sys::ensure_subreaper();
    let net_used = spawn::network_isolation(network);
    loop {
        let cg = CaseCgroup::create();
        if cg.is_none() && cgroup::required() && !sandbox::enclosed() {
            return Err(cgroup::unavailable_error());
        }
        // Without a cgroup, orphans re-parented to us are attributed to the running execution,
        // so executions are serialized process-wide (see the crate docs).
        let guard = (cg.is_none() && supervised)
            .then(|| FALLBACK_SERIAL.lock().unwrap_or_else(|p| p.into_inner()));
        let plan = Plan::new(
            sandbox,
            network == NetworkPolicy::LoopbackOnly,
            cg.as_ref().map(|c| c.procs_fds()).unwrap_or_default(),
            supervised || on_main_thread(),
            cwd,
        )?;
        let (pid_limit, pid_limit_source) = cg
            .as_ref()
            .map(|c| c.pid_limit())
            .unwrap_or((None, "no cgroup (process group + subreaper tracking)"));
        let record = plan.record(pid_limit, pid_limit_source);
        let mut cmd = spawn::build_command(&program, argv, env, plan);
        let started_at = SystemTime::now();
        let t0 = Instant::now();
        match cmd.spawn() {
            Ok(child) => {
                group::register_leader(child.id());
                let mechanism = match &cg {
                    Some(c) => {
                        c.confirm_usable();
                        Mechanism::CgroupV2
                    }
                    None => Mechanism::ProcessGroupSubreaper,
                };
                let tracker = Tracker::new(child.id(), cg);
                return Ok((
                    Started {
                        child,
                        tracker,
                        mechanism,
                        network: net_used,
                        sandbox: record,
                        started_at,
                        t0,
                    },
                    guard,
                ));
            }
            Err(e) => {
                if let Some(c) = cg {
                    c.remove();
                }
                match sandbox::decode(&e) {
                    Some(f) if f.step == Step::Cgroup => {
                        // The kernel refused the move: cgroups are not usable from here.
                        cgroup::mark_unusable();
                        continue;
                    }
                    Some(f) if f.step == Step::Setsid => {
                        return Err(ExecError::Spawn {
                            program: argv[0].clone(),
                            reason: format!(
                                "setsid: {}",
                                std::io::Error::from_raw_os_error(f.errno)
                            ),
                        })
                    }
                    Some(f) if f.step == Step::Chdir => {
                        return Err(ExecError::Spawn {
                            program: argv[0].clone(),
                            reason: format!(
                                "enter working directory {} inside the box: {}",
                                cwd.display(),
                                std::io::Error::from_raw_os_error(f.errno)
                            ),
                        })
                    }
                    Some(f) => return Err(spawn::isolation_error(f, sandbox)),
                    None => {
                        return Err(ExecError::Spawn {
                            program: argv[0].clone(),
                            reason: e.to_string(),
                        })
                    }
                }
            }
        }
    }
}

/// Runs `spec` to completion and returns its evidence; always cleans up.
pub fn execute(spec: &ExecSpec) -> Result<Execution, ExecError> {
    execute_observed(spec, &mut NoObserver)
}

/// Like [`execute`], and consults `watch` about every 20 ms while the leader runs; when it
/// returns `Some(reason)` the group is terminated (SIGTERM, grace, SIGKILL) and the execution
/// ends as [`Termination::Aborted`]. Use it for bounds the caller owns, such as the size of a
/// case-result file.
pub fn execute_watched(
    spec: &ExecSpec,
    watch: &mut dyn FnMut() -> Option<String>,
) -> Result<Execution, ExecError> {
    struct Watch<'a>(&'a mut dyn FnMut() -> Option<String>);
    impl Observer for Watch<'_> {
        fn watch(&mut self) -> Option<String> {
            (self.0)()
        }
    }
    execute_observed(spec, &mut Watch(watch))
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Hooks into a running execution (see [`execute_observed`]).
pub trait Observer {
    /// Every chunk read from the child, as it arrives (the capture is bounded independently).
    fn output(&mut self, _stream: OutputStream, _chunk: &[u8]) {}
    /// Consulted about every 20 ms while the leader runs; `Some(reason)` terminates the group
    /// and the execution ends as [`Termination::Aborted`].
    fn watch(&mut self) -> Option<String> {
        None
    }
}

struct NoObserver;
impl Observer for NoObserver {}

/// [`execute`] with an [`Observer`]: live output (e.g. a pass-through wrapper) and
/// caller-owned stop conditions.
pub fn execute_observed(
    spec: &ExecSpec,
    observer: &mut dyn Observer,
) -> Result<Execution, ExecError> {
    let (mut st, _serial) = start(
        &spec.argv,
        &spec.cwd,
        &spec.env,
        spec.network,
        &spec.sandbox,
        true,
    )?;
    let out = st.child.stdout.take();
    let err = st.child.stderr.take();
    let mut streams = [
        Stream::new(out.as_ref().map(|p| p.as_raw_fd()), spec.capture),
        Stream::new(err.as_ref().map(|p| p.as_raw_fd()), spec.capture),
    ];
    let pidfd = sys::pidfd_open(st.child.id());
    let mut sup = Supervisor::new(&mut st, spec.timeout, spec.term_grace);
    let mut buf = vec![0u8; 64 * 1024];
    let mut last_watch = Instant::now();
    let result = loop {
        // 1. Leader exit.
        if sup.leader_status.is_none() {
            match sup.st.child.try_wait() {
                Ok(Some(status)) => sup.on_leader_exit(status),
                Ok(None) => {}
                Err(e) => {
                    break Err(ExecError::Io {
                        context: "wait for the case leader".into(),
                        source: e,
                    })
                }
            }
        }
        let now = Instant::now();
        // 2. Stop requests while the leader runs.
        if sup.leader_status.is_none() && sup.stage.is_running() {
            if signals::interrupted().is_some() {
                sup.begin_termination(Why::Interrupted);
            } else if now >= sup.deadline {
                sup.begin_termination(Why::Deadline);
            } else if now.duration_since(last_watch) >= WATCH_EVERY {
                last_watch = now;
                if let Some(reason) = observer.watch() {
                    sup.begin_termination(Why::Aborted(reason));
                }
            }
        }
        // 3. Escalation and members.
        sup.advance(now);
        // 4. Done?
        let pipes_open = streams.iter().any(|s| s.fd.is_some());
        if sup.settled {
            if !pipes_open {
                break Ok(());
            }
            let give_up = *sup.pipe_wait_until.get_or_insert(now + PIPE_CLOSE_WAIT);
            if now >= give_up {
                // A process outside the case's tree holds the pipes (it received the
                // descriptor from the case): stop reading and report the pipes open; never
                // signal processes that are not the case's.
                break Ok(());
            }
        }
        // 5. Wait for output, the leader, a signal or the next tick.
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(4);
        for s in &streams {
            if let Some(fd) = s.fd {
                fds.push(pollfd(fd));
            }
        }
        let n_streams = fds.len();
        if sup.leader_status.is_none() {
            if let Some(p) = &pidfd {
                fds.push(pollfd(p.as_raw_fd()));
            }
        }
        if sup.stage.is_running() && signals::interrupted().is_none() {
            if let Some(w) = signals::wake_fd() {
                fds.push(pollfd(w));
            }
        }
        let timeout = sup.next_timeout(now, pidfd.is_some(), last_watch);
        if let Err(e) = sys::poll(&mut fds, timeout) {
            break Err(ExecError::Io {
                context: "poll the case output".into(),
                source: e,
            });
        }
        let mut k = 0;
        for (i, s) in streams.iter_mut().enumerate() {
            if s.fd.is_some() {
                if fds[k].revents != 0 {
                    let which = if i == 0 {
                        OutputStream::Stdout
                    } else {
                        OutputStream::Stderr
                    };
                    s.drain(&mut buf, &mut |chunk| observer.output(which, chunk));
                }
                k += 1;
            }
        }
        debug_assert_eq!(k, n_streams);
    };
    // Cleanup always runs, even after a supervision error.
    let containment = sup.finish(streams.iter().all(|s| s.fd.is_none()));
    let wall = sup.st.t0.elapsed();
    let termination = sup.termination();
    drop(out);
    drop(err);
    result?;
    let [o, e] = streams;
    Ok(Execution {
        termination,
        started_at: st.started_at,
        wall,
        pid: st.child.id(),
        stdout: o.cap.finish(),
        stderr: e.cap.finish(),
        containment,
    })
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

struct Stream {
    fd: Option<RawFd>,
    cap: Capture,
}

impl Stream {
    fn new(fd: Option<RawFd>, limits: crate::CaptureLimits) -> Stream {
        if let Some(fd) = fd {
            let _ = sys::set_nonblocking(fd);
        }
        Stream {
            fd,
            cap: Capture::new(limits),
        }
    }

    /// Reads what is available (bounded number of reads so the loop stays responsive).
    fn drain(&mut self, buf: &mut [u8], sink: &mut dyn FnMut(&[u8])) {
        let Some(fd) = self.fd else { return };
        for _ in 0..64 {
            match sys::read_nb(fd, buf) {
                Ok(Some(0)) | Err(_) => {
                    self.fd = None;
                    return;
                }
                Ok(Some(n)) => {
                    self.cap.push(&buf[..n]);
                    sink(&buf[..n]);
                }
                Ok(None) => return,
            }
        }
    }
}

/// Why we are terminating the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why {
    Deadline,
    Interrupted,
    Aborted(String),
    Residue,
    Shutdown,
}

#[derive(Debug)]
pub(crate) enum Stage {
    Running,
    Terminating {
        why: Why,
        sig: i32,
        kill_at: Instant,
    },
}

impl Stage {
    pub(crate) fn is_running(&self) -> bool {
        matches!(self, Stage::Running)
    }
}

struct ResidueEntry {
    start_time: u64,
    cmdline: String,
    signal: i32,
    session: u32,
    box_pid: Option<u32>,
}

/// The termination schedule and evidence of one contained leader.
pub(crate) struct Supervisor<'a> {
    pub st: &'a mut Started,
    pub stage: Stage,
    pub deadline: Instant,
    grace: Duration,
    pub leader_status: Option<ExitStatus>,
    /// The signal we had last sent when the leader ended, and why.
    leader_end: Option<(Why, i32)>,
    settle_until: Option<Instant>,
    pub settled: bool,
    pub pipe_wait_until: Option<Instant>,
    residue: BTreeMap<u32, ResidueEntry>,
    /// Last signal sent to each member (pid -> (start, sig)), to avoid re-signalling.
    sent: BTreeMap<u32, (u64, i32)>,
    group_killed: bool,
    /// Whether SIGKILL was needed for anything.
    pub kill_sent: bool,
    /// Last signal sent to the whole process group.
    group_sig: Option<i32>,
}

impl<'a> Supervisor<'a> {
    pub(crate) fn new(st: &'a mut Started, timeout: Duration, grace: Duration) -> Self {
        let deadline = later(st.t0, timeout);
        Supervisor {
            st,
            stage: Stage::Running,
            deadline,
            grace,
            leader_status: None,
            leader_end: None,
            settle_until: None,
            settled: false,
            pipe_wait_until: None,
            residue: BTreeMap::new(),
            sent: BTreeMap::new(),
            group_killed: false,
            kill_sent: false,
            group_sig: None,
        }
    }

    pub(crate) fn on_leader_exit(&mut self, status: ExitStatus) {
        self.leader_status = Some(status);
        group::unregister_leader(self.st.child.id());
        if let Stage::Terminating { why, sig, .. } = &self.stage {
            self.leader_end = Some((why.clone(), *sig));
            if *why == Why::Shutdown {
                // A server's own shutdown: whatever left the leader's group and is still
                // alive now was not stopped by the server. Residue, as in the runner's rule.
                let leader = self.st.tracker.leader;
                let escaped: Vec<Stat> = self
                    .st
                    .tracker
                    .live_members()
                    .into_iter()
                    .filter(|m| m.pgrp != leader)
                    .collect();
                self.record_residue(&escaped);
            }
        }
        // Members get the settlement window to finish (or to die of the signal they already
        // received) before whatever is still alive counts as residue.
        self.settle_until = Some(Instant::now() + SETTLEMENT);
    }

    pub(crate) fn begin_termination(&mut self, why: Why) {
        let live = self.st.tracker.live_members();
        if why == Why::Residue {
            self.record_residue(&live);
        }
        self.stage = Stage::Terminating {
            why,
            sig: libc::SIGTERM,
            kill_at: later(Instant::now(), self.grace),
        };
        self.group_killed = true;
        if why_is_shutdown(&self.stage) {
            // Only the server's own group is asked to stop; members that escaped it are
            // judged when the leader has exited (see `on_leader_exit`).
            let group: Vec<Stat> = live
                .into_iter()
                .filter(|m| m.pgrp == self.st.tracker.leader)
                .collect();
            self.send(&group, libc::SIGTERM);
        } else {
            self.send(&live, libc::SIGTERM);
        }
    }

    fn record_residue(&mut self, live: &[Stat]) {
        let sig = match self.stage {
            Stage::Terminating { sig, .. } => sig,
            Stage::Running => libc::SIGTERM,
        };
        for m in live {
            self.residue.entry(m.pid).or_insert_with(|| ResidueEntry {
                start_time: m.start_time,
                cmdline: crate::procfs::cmdline(m.pid),
                signal: sig,
                session: m.session,
                box_pid: crate::procfs::innermost_pid(m.pid),
            });
        }
    }

    fn send(&mut self, live: &[Stat], sig: i32) {
        // Each process gets each signal once (a second SIGTERM means "force quit" to some
        // programs): the group through killpg, other members (escaped into other groups, or
        // born after the group signal) individually. SIGTERM is followed by SIGCONT so that a
        // stopped process can act on it (as systemd does).
        let leader = self.st.tracker.leader;
        let group_now = self.group_sig != Some(sig);
        if group_now {
            self.group_sig = Some(sig);
            let _ = sys::killpg(leader, sig);
            if sig == libc::SIGTERM {
                let _ = sys::killpg(leader, libc::SIGCONT);
            }
        }
        for m in live {
            if self.sent.get(&m.pid) == Some(&(m.start_time, sig)) {
                continue;
            }
            if !(group_now && m.pgrp == leader) {
                group::signal_one(m, sig);
                if sig == libc::SIGTERM {
                    group::signal_one(m, libc::SIGCONT);
                }
            }
            self.sent.insert(m.pid, (m.start_time, sig));
            if let Some(r) = self.residue.get_mut(&m.pid) {
                if r.start_time == m.start_time {
                    r.signal = sig;
                }
            }
        }
        if sig == libc::SIGKILL {
            self.kill_sent = true;
            if let Some(cg) = &self.st.tracker.cgroup {
                cg.kill_all();
            }
        }
    }

    /// Applies escalation, settlement and residue rules at `now`.
    pub(crate) fn advance(&mut self, now: Instant) {
        let leader_done = self.leader_status.is_some();
        match &self.stage {
            Stage::Running => {
                if !leader_done {
                    return;
                }
                let live = self.st.tracker.live_members();
                if live.is_empty() {
                    self.settled = true;
                } else if self.settle_until.is_some_and(|t| now >= t) {
                    self.begin_termination(Why::Residue);
                }
            }
            Stage::Terminating { sig, kill_at, .. } => {
                let (sig, kill_at) = (*sig, *kill_at);
                let live = self.st.tracker.live_members();
                if leader_done {
                    if live.is_empty() {
                        self.settled = true;
                        return;
                    }
                    if self.settle_until.is_some_and(|t| now >= t) {
                        // Still alive after the leader ended and the settlement window.
                        self.record_residue(&live);
                    }
                    if sig == libc::SIGKILL && now >= later(kill_at, KILL_GIVE_UP) {
                        // Unkillable (e.g. stuck in uninterruptible sleep): stop waiting; the
                        // final check reports it and the execution is not clean.
                        self.settled = true;
                        return;
                    }
                }
                if sig != libc::SIGKILL && now >= kill_at {
                    if leader_done {
                        // Still alive after the leader ended and the whole grace: residue,
                        // also when the grace ends before the settlement window (a member that
                        // ignores SIGTERM, e.g. a daemon that escaped into its own session).
                        self.record_residue(&live);
                    }
                    if let Stage::Terminating { sig, .. } = &mut self.stage {
                        *sig = libc::SIGKILL;
                    }
                    self.send(&live, libc::SIGKILL);
                } else if why_is_shutdown(&self.stage) && !leader_done {
                    // Late forks of the server's group get the current signal too.
                    let leader = self.st.tracker.leader;
                    let group: Vec<Stat> = live.into_iter().filter(|m| m.pgrp == leader).collect();
                    self.send(&group, sig);
                } else {
                    // Late forks get the current signal too.
                    self.send(&live, sig);
                }
            }
        }
    }

    pub(crate) fn next_timeout(
        &self,
        now: Instant,
        have_pidfd: bool,
        last_watch: Instant,
    ) -> Duration {
        let mut t = Duration::from_secs(3600);
        let mut at = |when: Instant| {
            t = t.min(when.saturating_duration_since(now));
        };
        if self.leader_status.is_none() {
            if !have_pidfd {
                at(now + TICK);
            }
            match &self.stage {
                Stage::Running => {
                    at(self.deadline);
                    at(last_watch + WATCH_EVERY);
                }
                Stage::Terminating { kill_at, sig, .. } => {
                    if *sig != libc::SIGKILL {
                        at(*kill_at);
                    }
                    // Late members of the group must be signalled too.
                    at(now + TICK * 5);
                }
            }
        } else if !self.settled {
            at(now + TICK);
        } else if let Some(p) = self.pipe_wait_until {
            at(p);
        }
        t
    }

    /// Final cleanup: SIGKILL to whatever remains, reap, remove the cgroup; evidence.
    pub(crate) fn finish(&mut self, pipes_closed: bool) -> Containment {
        if self.leader_status.is_none() {
            // Supervision failed while the leader ran: kill everything.
            self.group_killed = true;
            let live = self.st.tracker.live_members();
            self.send(&live, libc::SIGKILL);
            let _ = sys::kill(self.st.child.id(), libc::SIGKILL);
            if let Ok(status) = self.st.child.wait() {
                self.on_leader_exit(status);
            }
        }
        // Always kill the group at cleanup, and make sure nothing is left.
        let _ = sys::killpg(self.st.tracker.leader, libc::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut final_live;
        loop {
            final_live = self.st.tracker.live_members();
            if final_live.is_empty() {
                break;
            }
            self.group_killed = true;
            self.record_residue(&final_live);
            self.send(&final_live, libc::SIGKILL);
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.st.tracker.settle_init(Duration::from_secs(2));
        if let Some(cg) = self.st.tracker.cgroup.take() {
            cg.remove();
        }
        let residue: Vec<Residue> = self
            .residue
            .iter()
            .map(|(pid, r)| Residue {
                pid: *pid,
                box_pid: r.box_pid,
                session: r.session,
                cmdline: r.cmdline.clone(),
                signal: r.signal,
            })
            .collect();
        let clean = residue.is_empty() && pipes_closed && final_live.is_empty();
        Containment {
            mechanism: self.st.mechanism,
            network: self.st.network,
            sandbox: self.st.sandbox.clone(),
            residue,
            group_killed: self.group_killed,
            pipes_closed,
            clean,
        }
    }

    pub(crate) fn termination(&self) -> Termination {
        let status = self.leader_status.expect("leader reaped in finish");
        match &self.leader_end {
            Some((Why::Deadline, sig)) => Termination::TimedOut { signal_used: *sig },
            Some((Why::Interrupted, sig)) => Termination::Interrupted { signal_used: *sig },
            Some((Why::Aborted(reason), sig)) => Termination::Aborted {
                reason: reason.clone(),
                signal_used: *sig,
            },
            Some((Why::Residue | Why::Shutdown, _)) | None => exit_termination(status),
        }
    }
}

fn why_is_shutdown(stage: &Stage) -> bool {
    matches!(
        stage,
        Stage::Terminating {
            why: Why::Shutdown,
            ..
        }
    )
}

/// Whether the calling thread is the process's main thread (whose end is the process's end,
/// so PR_SET_PDEATHSIG, which fires when the *spawning thread* ends, is safe to use).
fn on_main_thread() -> bool {
    // SAFETY: trivial getters.
    unsafe { libc::gettid() == libc::getpid() }
}

/// `t + d`, saturating at about a century ahead (a `Duration::MAX` timeout means "never").
fn later(t: Instant, d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    t.checked_add(d.min(CENTURY)).unwrap_or(t)
}

/// Maps a wait status of a leader that ended on its own.
pub(crate) fn exit_termination(status: ExitStatus) -> Termination {
    match (status.code(), status.signal()) {
        (Some(code), _) => Termination::Exited { code },
        (None, Some(signal)) => Termination::Signaled { signal },
        (None, None) => Termination::Exited { code: -1 },
    }
}
