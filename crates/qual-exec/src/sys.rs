//! Thin, safe wrappers over the few Linux system calls this crate needs and `std` does not
//! expose: `pidfd_open`/`pidfd_send_signal` (race-free signalling of a process seen in
//! `/proc`), `prctl(PR_SET_CHILD_SUBREAPER)`, `poll`, non-blocking pipes and `waitpid` on one
//! specific pid.
//!
//! We call `libc` directly rather than `nix` to keep the dependency set to one small,
//! ubiquitous crate; every `unsafe` block is a single system call on values we own.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::time::Duration;

/// Makes this process a child subreaper (once; later calls return the first result).
/// Orphaned descendants of our children are then re-parented to us instead of to init, so an
/// escaped process is still our (grand)child: visible, killable and reapable.
pub(crate) fn ensure_subreaper() -> bool {
    static DONE: OnceLock<bool> = OnceLock::new();
    *DONE.get_or_init(|| {
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) == 0 }
    })
}

/// `pidfd_open(pid, 0)`; `None` when the process is gone or the kernel lacks pidfds.
pub(crate) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: raw syscall with integer arguments; a non-negative result is a new fd we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `pidfd_send_signal(fd, sig, NULL, 0)`.
pub(crate) fn pidfd_send_signal(fd: &OwnedFd, sig: i32) -> io::Result<()> {
    // SAFETY: raw syscall on a descriptor we own, null siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `kill(-pgid, sig)`; `Ok(false)` when the group no longer exists.
pub(crate) fn killpg(pgid: u32, sig: i32) -> io::Result<bool> {
    // SAFETY: plain syscall.
    let r = unsafe { libc::kill(-(pgid as libc::pid_t), sig) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// `kill(pid, sig)`.
pub(crate) fn kill(pid: u32, sig: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reaps `pid` if it is a zombie child of ours (`waitpid(pid, WNOHANG)`); returns whether it
/// was reaped.
pub(crate) fn reap_nohang(pid: u32) -> bool {
    let mut status = 0;
    // SAFETY: plain syscall writing into a local.
    let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    r == pid as libc::pid_t
}

/// Sets `O_NONBLOCK` on a descriptor.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `poll` on `fds` for at most `timeout`; EINTR counts as a (spurious) wake-up.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // Round a sub-millisecond positive timeout up so that we do not spin.
    let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
    // SAFETY: the slice is a valid array of pollfd for its length.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// Non-blocking `read`; `Ok(None)` on EAGAIN.
pub(crate) fn read_nb(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: reading into a buffer we own, bounded by its length.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            return Ok(Some(r as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// Conventional signal names for evidence and messages.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => "unknown signal",
    }
}
