//! The load generator thread's own scheduler counters: was it kept off the CPU?
//!
//! Owns two readings of the calling thread, taken without allocation:
//!
//! * run-queue wait: the second field of `/proc/thread-self/schedstat` (nanoseconds spent
//!   runnable but waiting for a CPU), read with `pread` from a descriptor opened once per
//!   thread;
//! * involuntary context switches: `getrusage(RUSAGE_THREAD).ru_nivcsw` (times the thread
//!   was preempted while it could have run).
//!
//! A stopped thread (SIGSTOP) is neither runnable nor preempted, so these counters do not
//! see it; the read lag of [`crate::rxclock`] does. Invariant: both counters are monotonic
//! per thread, so a difference of two samples of one thread is the amount in between.

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// One sample of the calling thread's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSample {
    /// Cumulative run-queue wait in ns (`None`: schedstat unreadable here).
    pub run_queue_wait_ns: Option<u64>,
    /// Cumulative involuntary context switches.
    pub involuntary_switches: u64,
}

impl ThreadSample {
    /// The counters of the calling thread now.
    pub fn now() -> ThreadSample {
        thread_local! {
            static SCHEDSTAT: RefCell<Option<File>> =
                RefCell::new(File::open("/proc/thread-self/schedstat").ok());
        }
        let run_queue_wait_ns = SCHEDSTAT.with(|f| {
            let f = f.borrow();
            let f = f.as_ref()?;
            let mut buf = [0u8; 96];
            let n = f.read_at(&mut buf, 0).ok()?;
            std::str::from_utf8(&buf[..n])
                .ok()?
                .split_ascii_whitespace()
                .nth(1)?
                .parse()
                .ok()
        });
        // SAFETY: getrusage writes one rusage for the calling thread.
        let involuntary_switches = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) == 0 {
                ru.ru_nivcsw.max(0) as u64
            } else {
                0
            }
        };
        ThreadSample {
            run_queue_wait_ns,
            involuntary_switches,
        }
    }

    /// What happened between `earlier` and `self` (both of the same thread).
    pub fn since(&self, earlier: &ThreadSample) -> ThreadSample {
        ThreadSample {
            run_queue_wait_ns: match (self.run_queue_wait_ns, earlier.run_queue_wait_ns) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                _ => None,
            },
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads pinned to one CPU, both spinning: each waits in the run queue and is
    /// preempted, and the counters say so.
    #[test]
    fn contention_shows_as_run_queue_wait_and_preemption() {
        let pin = || {
            // SAFETY: cpu_set_t is plain data; the call affects only this thread.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let hog = std::thread::spawn(move || {
            pin();
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        pin();
        let a = ThreadSample::now();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(300) {
            std::hint::spin_loop();
        }
        let d = ThreadSample::now().since(&a);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        hog.join().unwrap();
        assert!(d.involuntary_switches > 0, "{d:?}");
        if let Some(w) = d.run_queue_wait_ns {
            assert!(w > 10_000_000, "{d:?}");
        }
    }
}
