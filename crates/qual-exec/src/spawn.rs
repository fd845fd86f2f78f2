//! Starting a contained child: program resolution on the *case* `PATH`, a closed
//! environment, stdin null, and the box of [`crate::sandbox`] set up between the fork and
//! `exec` (own session, cgroup, namespaces, an init tied to us, read-only paths, no
//! capabilities, seccomp, stdio only).
//!
//! A failing pre-exec step reports itself through the errno that `std` carries back from the
//! child, tagged with the step, so the caller can tell "the kernel refused a mechanism" (a
//! fail-closed refusal naming it) from "the program could not be executed".

use crate::sandbox::{self, Plan, Sandbox, Step, StepFailure};
use crate::{ExecError, NetworkIsolation, NetworkPolicy};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The network isolation a policy gets here.
pub(crate) fn network_isolation(policy: NetworkPolicy) -> NetworkIsolation {
    // SAFETY: trivial getter.
    let root = unsafe { libc::geteuid() } == 0;
    match (policy, root) {
        (NetworkPolicy::Inherit, _) => NetworkIsolation::None,
        (NetworkPolicy::LoopbackOnly, true) => NetworkIsolation::LinuxNetNamespaceLoopbackOnly,
        (NetworkPolicy::LoopbackOnly, false) => NetworkIsolation::LinuxUserNetNamespaceLoopbackOnly,
    }
}

/// Turns a step failure into the fail-closed refusal naming the missing mechanism.
pub(crate) fn isolation_error(f: StepFailure, sandbox: &Sandbox) -> ExecError {
    let reason = io::Error::from_raw_os_error(f.errno).to_string();
    let path = match f.step {
        Step::BindReadOnly | Step::SetReadOnly => sandbox.read_only.get(f.index),
        Step::BindWritable => sandbox.writable.get(f.index),
        _ => None,
    };
    let reason = match path {
        Some(p) => format!("{reason} (path {})", p.display()),
        None => reason,
    };
    ExecError::IsolationUnavailable {
        capability: f.step.mechanism().to_string(),
        reason,
    }
}

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

/// Builds the command: closed environment, null stdin, stdout/stderr piped, and the box. The
/// working directory is the plan's, entered inside the box once its mounts exist (never by
/// `std` before them).
#[allow(clippy::disallowed_methods)] // the home of case spawns: the box runs in the pre-exec hook
pub(crate) fn build_command(
    program: &Path,
    argv: &[String],
    env: &[(String, String)],
    plan: Plan,
) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg0(OsStr::from_bytes(argv[0].as_bytes()))
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure only performs async-signal-safe system calls on values prepared
    // before the fork (see the sandbox module).
    unsafe {
        cmd.pre_exec(move || sandbox::run_chain(&plan));
    }
    cmd
}

/// Checks, without running any program, that the whole box can be established here: the
/// namespaces, the init, the mounts (with `sandbox`'s paths), capabilities, `no_new_privs`,
/// the seccomp filters, and for [`NetworkPolicy::LoopbackOnly`] that the only interface is
/// `lo` and a TCP round trip on 127.0.0.1 works. Use it in a preflight before creating
/// anything. Returns the network isolation executions will use, or the fail-closed refusal
/// naming the missing mechanism.
pub fn probe_containment(
    policy: NetworkPolicy,
    sandbox: &Sandbox,
) -> Result<NetworkIsolation, ExecError> {
    let new_net = policy == NetworkPolicy::LoopbackOnly;
    if crate::cgroup::required() && !sandbox::enclosed() {
        match crate::cgroup::CaseCgroup::create() {
            Some(cg) => {
                cg.remove();
            }
            None => return Err(crate::cgroup::unavailable_error()),
        }
    }
    let plan = Plan::new(sandbox, new_net, Vec::new(), false, Path::new("/"))?;
    sandbox::probe(plan).map_err(|f| isolation_error(f, sandbox))?;
    Ok(network_isolation(policy))
}

/// [`probe_containment`] for a loopback-only network and no extra paths.
pub fn probe_loopback_only() -> Result<NetworkIsolation, ExecError> {
    probe_containment(NetworkPolicy::LoopbackOnly, &Sandbox::default())
}

/// In a child inside the new network namespace: only `lo` exists and loopback TCP works.
pub(crate) unsafe fn check_loopback_only() -> Result<(), Step> {
    unsafe {
        // Interfaces: every line of /proc/net/dev after the two headers must name `lo`.
        let fd = libc::open(c"/proc/net/dev".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(Step::ProbeInterfaces);
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
                return Err(Step::ProbeInterfaces);
            }
        }
        if !lo_seen {
            return Err(Step::ProbeInterfaces);
        }
        tcp_round_trip().map_err(|_| Step::ProbeTcp)
    }
}

/// Listener on 127.0.0.1:0, a client connects, the server side sends `x`, the client reads it.
unsafe fn tcp_round_trip() -> Result<(), ()> {
    unsafe {
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
}

/// Sets IFF_UP on `lo` of the current network namespace.
pub(crate) unsafe fn loopback_up() -> bool {
    unsafe {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
