//! Sub-millisecond sleeps for async code.
//!
//! tokio's timer wheel has a 1 ms tick and rounds every deadline up to the next tick, so a
//! 5 ms sleep fires anywhere in 5..6 ms (plus wake-up latency). That bias is larger than the
//! accuracy this crate promises (0.5 ms on TTFT and ITL medians, 1 ms schedule lag), so both
//! the mock server's token pacing and the open-loop scheduler use this pacer instead.
//!
//! Owns one background thread holding a min-heap of deadlines. The thread sleeps with
//! `park_timeout` (a futex wait backed by a high-resolution timer) until the earliest
//! deadline, then wakes every due future. Invariant: a [`Sleep`] never completes before its
//! deadline (checked against `Instant::now()` on both sides), and it is woken at most once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

struct SleepState {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

struct Entry {
    deadline: Instant,
    seq: u64,
    state: Arc<SleepState>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

struct Shared {
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    thread: OnceLock<Thread>,
}

/// A handle to the process-wide pacer thread.
#[derive(Clone)]
pub struct Pacer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pacer")
    }
}

/// How early the pacer stops sleeping and starts yielding, to absorb futex wake-up latency.
const SPIN_MARGIN: Duration = Duration::from_micros(60);

impl Pacer {
    /// The shared pacer (started on first use).
    pub fn global() -> Pacer {
        static GLOBAL: OnceLock<Pacer> = OnceLock::new();
        GLOBAL.get_or_init(Pacer::start).clone()
    }

    fn start() -> Pacer {
        let shared = Arc::new(Shared {
            heap: Mutex::new((BinaryHeap::new(), 0)),
            thread: OnceLock::new(),
        });
        let worker = shared.clone();
        let handle = std::thread::Builder::new()
            .name("qual-serve-pacer".into())
            .spawn(move || run(worker))
            .expect("spawn pacer thread");
        let _ = shared.thread.set(handle.thread().clone());
        Pacer { shared }
    }

    /// A future that completes at (never before) `deadline`.
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep {
            pacer: self.clone(),
            deadline,
            state: None,
        }
    }
}

fn run(shared: Arc<Shared>) {
    loop {
        let mut due: Vec<Arc<SleepState>> = Vec::new();
        let next = {
            let mut guard = shared.heap.lock().expect("pacer heap");
            let now = Instant::now();
            while let Some(Reverse(top)) = guard.0.peek() {
                if top.deadline <= now {
                    let Reverse(e) = guard.0.pop().expect("peeked");
                    due.push(e.state);
                } else {
                    break;
                }
            }
            guard.0.peek().map(|Reverse(e)| e.deadline)
        };
        for s in due {
            s.fired.store(true, Ordering::Release);
            if let Some(w) = s.waker.lock().expect("pacer waker").take() {
                w.wake();
            }
        }
        match next {
            None => std::thread::park_timeout(Duration::from_millis(100)),
            Some(d) => {
                let now = Instant::now();
                if d > now + SPIN_MARGIN {
                    std::thread::park_timeout(d - now - SPIN_MARGIN);
                } else if d > now {
                    std::thread::yield_now();
                }
            }
        }
    }
}

/// A pending sleep; see [`Pacer::sleep_until`].
pub struct Sleep {
    pacer: Pacer,
    deadline: Instant,
    state: Option<Arc<SleepState>>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        if let Some(state) = &self.state {
            if state.fired.load(Ordering::Acquire) {
                return Poll::Ready(());
            }
            *state.waker.lock().expect("pacer waker") = Some(cx.waker().clone());
            // Re-check after publishing the waker so a concurrent fire is not lost.
            if state.fired.load(Ordering::Acquire) {
                return Poll::Ready(());
            }
            return Poll::Pending;
        }
        let state = Arc::new(SleepState {
            fired: AtomicBool::new(false),
            waker: Mutex::new(Some(cx.waker().clone())),
        });
        let earliest = {
            let mut guard = self.pacer.shared.heap.lock().expect("pacer heap");
            let seq = guard.1;
            guard.1 += 1;
            let earliest = guard
                .0
                .peek()
                .is_none_or(|Reverse(e)| self.deadline < e.deadline);
            guard.0.push(Reverse(Entry {
                deadline: self.deadline,
                seq,
                state: state.clone(),
            }));
            earliest
        };
        if earliest {
            if let Some(t) = self.pacer.shared.thread.get() {
                t.unpark();
            }
        }
        self.state = Some(state);
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_completes_before_its_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let p = Pacer::global();
            for ms in [0u64, 1, 3] {
                let start = Instant::now();
                let d = start + Duration::from_millis(ms);
                p.sleep_until(d).await;
                assert!(Instant::now() >= d);
            }
        });
    }

    #[test]
    fn wakes_many_sleepers_in_deadline_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let order = rt.block_on(async {
            let p = Pacer::global();
            let start = Instant::now();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            for i in (0..20u64).rev() {
                let p = p.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    p.sleep_until(start + Duration::from_millis(2 + i * 2))
                        .await;
                    tx.send(i).unwrap();
                });
            }
            drop(tx);
            let mut v = Vec::new();
            while let Some(i) = rx.recv().await {
                v.push(i);
            }
            v
        });
        assert_eq!(order, (0..20).collect::<Vec<_>>());
    }
}
