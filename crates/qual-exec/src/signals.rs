//! SIGINT/SIGTERM forwarding.
//!
//! A case runs in its own session and process group, so a terminal's Ctrl-C or a service
//! manager's SIGTERM reaches only the runner. [`install_forwarding`] installs handlers that
//! record the first such signal and wake every supervising loop (through a non-blocking
//! self-pipe); each running execution then terminates its group with the normal schedule
//! (SIGTERM, grace, SIGKILL) and reports `Interrupted`, and no new execution starts.
//!
//! The handler only stores an integer and writes one byte: both async-signal-safe.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

static INTERRUPTED: AtomicI32 = AtomicI32::new(0);
static WAKE_READ: AtomicI32 = AtomicI32::new(-1);
static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let _ = INTERRUPTED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    let fd = WAKE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the pipe is non-blocking, a full pipe is fine.
        unsafe {
            let saved = *libc::__errno_location();
            libc::write(fd, b"!".as_ptr().cast(), 1);
            *libc::__errno_location() = saved;
        }
    }
}

/// Installs the SIGINT and SIGTERM handlers (idempotent; the first result is returned again).
///
/// After a signal, [`interrupted`] returns it, running executions end as `Interrupted` and
/// [`crate::execute`] refuses to start new ones with [`crate::ExecError::Interrupted`].
pub fn install_forwarding() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| install().map_err(|e| e.raw_os_error().unwrap_or(libc::EINVAL)))
        .map_err(io::Error::from_raw_os_error)
}

fn install() -> io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    WAKE_READ.store(fds[0], Ordering::SeqCst);
    WAKE_WRITE.store(fds[1], Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a plain handler, empty mask and SA_RESTART.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// The first SIGINT/SIGTERM received since [`install_forwarding`], if any.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The read end of the wake-up pipe, when forwarding is installed.
pub(crate) fn wake_fd() -> Option<RawFd> {
    match WAKE_READ.load(Ordering::SeqCst) {
        fd if fd >= 0 => Some(fd),
        _ => None,
    }
}
