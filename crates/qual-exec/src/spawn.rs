//! Starting a contained child: program resolution on the *case* `PATH`, a closed
//! environment, stdin null, and the steps run in the forked child before `exec`:
//! `setsid()` (new session and process group), the move into the execution's cgroup, and for
//! [`NetworkPolicy::LoopbackOnly`] a private network namespace with `lo` brought up through
//! `ioctl(SIOCSIFFLAGS)` (no `ip` binary needed).
//!
//! The code between fork and exec only makes async-signal-safe system calls on values
//! prepared before the fork (no allocation, no locks). A failing step reports itself through
//! the errno that `std` carries back from the child, tagged with the step number, so the
//! parent can tell "the kernel refused a namespace" from "the program could not be executed".

use crate::{ExecError, NetworkIsolation, NetworkPolicy};
use std::ffi::OsStr;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const TAG: i32 = 0x4b51_0000;
const TAG_MASK: i32 = 0x7fff_0000;
const STEP_SHIFT: i32 = 12;
const STEP_SETSID: i32 = 1;
const STEP_CGROUP: i32 = 2;
const STEP_USERNS: i32 = 3;
const STEP_NETNS: i32 = 4;
const STEP_LO_UP: i32 = 5;
const STEP_IDMAP: i32 = 6;

fn tagged(step: i32) -> io::Error {
    let errno = io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL);
    io::Error::from_raw_os_error(TAG | (step << STEP_SHIFT) | (errno & 0xfff))
}

/// A pre-exec step failure decoded from a spawn error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepFailure {
    Setsid(i32),
    Cgroup(i32),
    Network { step: i32, errno: i32 },
}

pub(crate) fn decode(e: &io::Error) -> Option<StepFailure> {
    let code = e.raw_os_error()?;
    if code & TAG_MASK != TAG {
        return None;
    }
    let step = (code & 0xf000) >> STEP_SHIFT;
    let errno = code & 0xfff;
    Some(match step {
        STEP_SETSID => StepFailure::Setsid(errno),
        STEP_CGROUP => StepFailure::Cgroup(errno),
        s => StepFailure::Network { step: s, errno },
    })
}

/// Turns a network step failure into the fail-closed refusal naming the capability.
pub(crate) fn isolation_error(step: i32, errno: i32) -> ExecError {
    let reason = io::Error::from_raw_os_error(errno).to_string();
    let capability = match step {
        STEP_USERNS => "unprivileged user namespaces (unshare CLONE_NEWUSER)",
        STEP_IDMAP => "user namespace id mapping (/proc/self/uid_map)",
        STEP_NETNS => "CAP_SYS_ADMIN to create a network namespace (unshare CLONE_NEWNET)",
        _ => "CAP_NET_ADMIN in the new network namespace to bring up lo (SIOCSIFFLAGS)",
    };
    ExecError::IsolationUnavailable {
        capability: capability.to_string(),
        reason,
    }
}

/// Everything the forked child needs, prepared before the fork.
#[derive(Clone, Copy)]
struct PreExec {
    cgroup_procs: Option<RawFd>,
    net: Option<NetPlan>,
    /// Our pid, when the child must die with the spawning thread (PR_SET_PDEATHSIG).
    die_with_parent: Option<libc::pid_t>,
}

#[derive(Clone, Copy)]
struct NetPlan {
    user_ns: bool,
    uid_map: [u8; 32],
    uid_map_len: usize,
    gid_map: [u8; 32],
    gid_map_len: usize,
}

fn fmt_map(id: u32) -> ([u8; 32], usize) {
    let s = format!("0 {id} 1\n");
    let mut buf = [0u8; 32];
    buf[..s.len()].copy_from_slice(s.as_bytes());
    (buf, s.len())
}

/// Chooses how to build the loopback-only namespace: as root (or with CAP_SYS_ADMIN) a plain
/// network namespace; otherwise a user namespace mapping our uid to root first.
pub(crate) fn plan_network(policy: NetworkPolicy) -> (Option<NetPlanPublic>, NetworkIsolation) {
    match policy {
        NetworkPolicy::Inherit => (None, NetworkIsolation::None),
        NetworkPolicy::LoopbackOnly => {
            // SAFETY: trivial getters.
            let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
            let user_ns = euid != 0;
            let (uid_map, uid_map_len) = fmt_map(euid);
            let (gid_map, gid_map_len) = fmt_map(egid);
            let plan = NetPlan {
                user_ns,
                uid_map,
                uid_map_len,
                gid_map,
                gid_map_len,
            };
            let used = if user_ns {
                NetworkIsolation::LinuxUserNetNamespaceLoopbackOnly
            } else {
                NetworkIsolation::LinuxNetNamespaceLoopbackOnly
            };
            (Some(NetPlanPublic(plan)), used)
        }
    }
}

/// Opaque network plan handed from [`plan_network`] to [`build_command`].
#[derive(Clone, Copy)]
pub(crate) struct NetPlanPublic(NetPlan);

/// Resolves `argv[0]`: a name containing `/` is a path (relative to `cwd`); a bare name is
/// searched on the `PATH` of the case environment (never ours).
pub(crate) fn resolve_program(
    argv0: &str,
    cwd: &Path,
    env: &[(String, String)],
) -> Result<PathBuf, ExecError> {
    if argv0.is_empty() {
        return Err(ExecError::InvalidSpec {
            reason: "argv[0] is empty".into(),
        });
    }
    if argv0.contains('/') {
        let p = Path::new(argv0);
        return Ok(if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        });
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .ok_or_else(|| ExecError::Spawn {
            program: argv0.to_string(),
            reason: "a bare program name needs PATH in the case environment".into(),
        })?;
    for dir in path.split(':') {
        if dir.is_empty() {
            continue;
        }
        let d = Path::new(dir);
        let candidate = if d.is_absolute() {
            d.join(argv0)
        } else {
            cwd.join(d).join(argv0)
        };
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
        }
    }
    Err(ExecError::Spawn {
        program: argv0.to_string(),
        reason: "not found on the PATH of the case environment".into(),
    })
}

/// Checks argv and environment for values the kernel cannot pass.
pub(crate) fn validate(argv: &[String], env: &[(String, String)]) -> Result<(), ExecError> {
    let mut problems = Vec::new();
    if argv.is_empty() {
        problems.push("argv is empty".to_string());
    }
    for (i, a) in argv.iter().enumerate() {
        if a.contains('\0') {
            problems.push(format!("argv[{i}] contains a NUL byte"));
        }
    }
    for (k, v) in env {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            problems.push(format!(
                "environment name {k:?} is empty or contains '=' or NUL"
            ));
        }
        if v.contains('\0') {
            problems.push(format!("environment value of {k} contains a NUL byte"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ExecError::InvalidSpec {
            reason: problems.join("; "),
        })
    }
}

/// Builds the command: closed environment, null stdin, stdout/stderr piped, and the
/// pre-exec containment steps.
pub(crate) fn build_command(
    program: &Path,
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    cgroup_procs: Option<RawFd>,
    net: Option<NetPlanPublic>,
    die_with_parent: bool,
) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg0(OsStr::from_bytes(argv[0].as_bytes()))
        .args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let plan = PreExec {
        cgroup_procs,
        net: net.map(|n| n.0),
        // SAFETY: trivial getter.
        die_with_parent: die_with_parent.then(|| unsafe { libc::getpid() }),
    };
    // SAFETY: the closure only performs async-signal-safe system calls on copied values.
    unsafe {
        cmd.pre_exec(move || pre_exec(&plan));
    }
    cmd
}

fn pre_exec(plan: &PreExec) -> io::Result<()> {
    // SAFETY (whole function): raw system calls in the forked child on values prepared before
    // the fork; no allocation.
    unsafe {
        if libc::setsid() < 0 {
            return Err(tagged(STEP_SETSID));
        }
        if let Some(parent) = plan.die_with_parent {
            // SIGKILL when the spawning thread dies (e.g. the runner is killed with -9); if the
            // parent is already gone, do not start at all.
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
                || libc::getppid() != parent
            {
                return Err(tagged(STEP_SETSID));
            }
        }
        if let Some(fd) = plan.cgroup_procs {
            if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(tagged(STEP_CGROUP));
            }
        }
        if let Some(net) = &plan.net {
            if let Err(step) = setup_network(net) {
                return Err(tagged(step));
            }
        }
    }
    Ok(())
}

/// Enters a new network namespace (after a user namespace when unprivileged) and brings `lo`
/// up; on failure returns the step, with errno left set.
unsafe fn setup_network(net: &NetPlan) -> Result<(), i32> {
    if net.user_ns {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
            return Err(STEP_USERNS);
        }
        if !write_file(b"/proc/self/setgroups\0", b"deny")
            || !write_file(b"/proc/self/uid_map\0", &net.uid_map[..net.uid_map_len])
            || !write_file(b"/proc/self/gid_map\0", &net.gid_map[..net.gid_map_len])
        {
            return Err(STEP_IDMAP);
        }
    } else if libc::unshare(libc::CLONE_NEWNET) != 0 {
        return Err(STEP_NETNS);
    }
    if !loopback_up() {
        return Err(STEP_LO_UP);
    }
    Ok(())
}

/// Checks, in a forked child, that a loopback-only network namespace can be established
/// here: the namespace and `lo` come up, the only interface is `lo`, and a TCP round trip on
/// 127.0.0.1 works. Runs no program; use it in a preflight before creating anything. Returns
/// the isolation that executions with [`NetworkPolicy::LoopbackOnly`] will use, or the
/// fail-closed refusal naming the missing capability.
pub fn probe_loopback_only() -> Result<NetworkIsolation, ExecError> {
    let (plan, used) = plan_network(NetworkPolicy::LoopbackOnly);
    let plan = plan.expect("loopback-only has a plan").0;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 into a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(ExecError::Io {
            context: "create the isolation probe pipe".into(),
            source: io::Error::last_os_error(),
        });
    }
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: the child only makes async-signal-safe system calls, then _exit()s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            libc::close(rd);
            let (step, errno) = match probe_child(&plan) {
                Ok(()) => (0, 0),
                Err(step) => (step, *libc::__errno_location()),
            };
            let msg = [step, errno];
            libc::write(wr, msg.as_ptr().cast(), std::mem::size_of_val(&msg));
            libc::_exit(0);
        }
    }
    if pid > 0 {
        // Never attribute the probe to a running execution.
        crate::group::register_leader(pid as u32);
    }
    // SAFETY: closing our copy of the write end; reading into a local; reaping our child.
    let (n, msg) = unsafe {
        libc::close(wr);
        if pid < 0 {
            libc::close(rd);
            return Err(ExecError::Io {
                context: "fork the isolation probe".into(),
                source: io::Error::last_os_error(),
            });
        }
        let mut msg = [0i32; 2];
        let n = libc::read(rd, msg.as_mut_ptr().cast(), std::mem::size_of_val(&msg));
        libc::close(rd);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        (n, msg)
    };
    crate::group::unregister_leader(pid as u32);
    if n != std::mem::size_of::<[i32; 2]>() as isize {
        return Err(ExecError::IsolationUnavailable {
            capability: "a working isolation probe".into(),
            reason: "the probe process ended without reporting".into(),
        });
    }
    match msg {
        [0, _] => Ok(used),
        [STEP_PROBE_IFACES, _] => Err(ExecError::IsolationUnavailable {
            capability: "a network namespace containing only lo".into(),
            reason: "other interfaces are present in the new namespace".into(),
        }),
        [STEP_PROBE_TCP, errno] => Err(ExecError::IsolationUnavailable {
            capability: "loopback TCP inside the network namespace".into(),
            reason: io::Error::from_raw_os_error(errno).to_string(),
        }),
        [step, errno] => Err(isolation_error(step, errno)),
    }
}

const STEP_PROBE_IFACES: i32 = 7;
const STEP_PROBE_TCP: i32 = 8;

unsafe fn probe_child(plan: &NetPlan) -> Result<(), i32> {
    setup_network(plan)?;
    // Interfaces: every line of /proc/net/dev after the two headers must name `lo`.
    let fd = libc::open(c"/proc/net/dev".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(STEP_PROBE_IFACES);
    }
    let mut buf = [0u8; 8192];
    let mut len = 0usize;
    loop {
        let r = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
        if r <= 0 {
            break;
        }
        len += r as usize;
        if len == buf.len() {
            break;
        }
    }
    libc::close(fd);
    let mut lo_seen = false;
    for line in buf[..len].split(|b| *b == b'\n').skip(2) {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let name = line[..colon].trim_ascii();
        if name == b"lo" {
            lo_seen = true;
        } else {
            return Err(STEP_PROBE_IFACES);
        }
    }
    if !lo_seen {
        return Err(STEP_PROBE_IFACES);
    }
    tcp_round_trip().map_err(|_| STEP_PROBE_TCP)
}

/// Listener on 127.0.0.1:0, a client connects, the server side sends `x`, the client reads it.
unsafe fn tcp_round_trip() -> Result<(), ()> {
    let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
    let c = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
    if l < 0 || c < 0 {
        return Err(());
    }
    let mut addr: libc::sockaddr_in = std::mem::zeroed();
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
    let alen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    if libc::bind(l, (&addr as *const libc::sockaddr_in).cast(), alen) != 0
        || libc::listen(l, 1) != 0
    {
        return Err(());
    }
    let mut bound: libc::sockaddr_in = std::mem::zeroed();
    let mut blen = alen;
    if libc::getsockname(l, (&mut bound as *mut libc::sockaddr_in).cast(), &mut blen) != 0
        || libc::connect(c, (&bound as *const libc::sockaddr_in).cast(), alen) != 0
    {
        return Err(());
    }
    let s = libc::accept(l, std::ptr::null_mut(), std::ptr::null_mut());
    if s < 0 || libc::write(s, b"x".as_ptr().cast(), 1) != 1 {
        return Err(());
    }
    let mut b = [0u8; 1];
    if libc::read(c, b.as_mut_ptr().cast(), 1) != 1 || b[0] != b'x' {
        return Err(());
    }
    libc::close(s);
    libc::close(c);
    libc::close(l);
    Ok(())
}

/// open + write + close on a NUL-terminated path (async-signal-safe).
unsafe fn write_file(path: &[u8], data: &[u8]) -> bool {
    let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return false;
    }
    let ok = libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize;
    libc::close(fd);
    ok
}

/// Sets IFF_UP on `lo` of the current network namespace.
pub(crate) unsafe fn loopback_up() -> bool {
    let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if s < 0 {
        return false;
    }
    let mut ifr: libc::ifreq = std::mem::zeroed();
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    let mut ok = libc::ioctl(s, libc::SIOCGIFFLAGS as _, &mut ifr) == 0;
    if ok {
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        ok = libc::ioctl(s, libc::SIOCSIFFLAGS as _, &ifr) == 0;
    }
    let saved = *libc::__errno_location();
    libc::close(s);
    *libc::__errno_location() = saved;
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trip() {
        // SAFETY: setting errno of this thread.
        unsafe { *libc::__errno_location() = libc::EPERM };
        let e = tagged(STEP_NETNS);
        assert_eq!(
            decode(&e),
            Some(StepFailure::Network {
                step: STEP_NETNS,
                errno: libc::EPERM
            })
        );
        assert_eq!(decode(&io::Error::from_raw_os_error(libc::ENOENT)), None);
    }

    #[test]
    fn resolves_on_case_path_only() {
        let env = vec![("PATH".to_string(), "/nonexistent:/usr/bin:/bin".to_string())];
        let p = resolve_program("true", Path::new("/"), &env).unwrap();
        assert!(p.ends_with("true"));
        let e = resolve_program("true", Path::new("/"), &[]).unwrap_err();
        assert!(e.to_string().contains("PATH"), "{e}");
        let e = resolve_program("no-such-program-kq", Path::new("/"), &env).unwrap_err();
        assert!(e.to_string().contains("not found"), "{e}");
    }

    #[test]
    fn validate_reports_all_problems() {
        let e = validate(
            &["a\0".into()],
            &[("A=B".into(), "x".into()), ("C".into(), "\0".into())],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("argv[0]") && e.contains("A=B") && e.contains("value of C"),
            "{e}"
        );
    }
}
