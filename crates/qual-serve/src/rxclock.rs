//! When bytes arrived, not when the client got around to reading them.
//!
//! Owns the client socket's read path ([`StampedStream`]): every read is a `recvmsg` with
//! `SO_TIMESTAMPNS` enabled, so the kernel hands back the software receive timestamp of the
//! newest segment the read consumed (`CLOCK_REALTIME`). The timestamp is moved onto the
//! monotonic clock (`Instant`) by subtracting the read lag, measured as `CLOCK_REALTIME` now −
//! kernel timestamp right after the read returns, so a clock step can only shift it by the
//! few nanoseconds between the two clock reads. Where the kernel gives
//! no timestamp (an option refused, a read without the control message) the read is stamped
//! with the time the read returned, and says so ([`ClockSource::UserRead`]). (The kernel turns
//! receive timestamping on system-wide through deferred work when the first socket asks, so
//! segments arriving in the first moments after that carry no timestamp; a campaign's
//! readiness probe and warmup connections ask long before the measured requests.)
//!
//! Each read also gets a sequence number: content events delivered by one read share it.
//!
//! **Arrival intervals.** A read's kernel timestamp is that of the *newest* segment it
//! consumed, so the bytes of one read arrived somewhere in an interval, not at a point. Every
//! read records that interval ([`ReadStamp::lower_bound`] ..= [`ReadStamp::arrival`]):
//!
//! * upper: the kernel timestamp (else the time the read returned);
//! * lower: the start of the latest `recv` that left the queue empty (it returned `EAGAIN`
//!   or fewer bytes than asked: bytes still to come were not there yet). The previous
//!   read's timestamp is *not* a lower bound: when a read leaves bytes behind, the kernel
//!   may have merged them with newer segments, whose timestamp the previous read carried;
//! * [`ReadStamp::drained`]: the read left the queue empty, so its newest segment holds its
//!   last byte — whatever ends exactly there (the client checks with [`ReadStamp::tail`])
//!   arrived exactly at the timestamp.
//!
//! Measured, not assumed (test `a_late_backlog_keeps_its_bytes_inside_the_read_interval`):
//! on Linux a segment that arrives while earlier ones wait unread is merged into the queued
//! buffer (`tcp_try_coalesce`), which then carries the *newest* timestamp for all its bytes,
//! so draining a backlog in small reads or peeking prefixes does not recover per-segment
//! times: only a reader that is awake when data arrives gets points. Invariant: `lower` ≤
//! true arrival of every byte of the read ≤ `arrival()` (for stamped reads), and `seq`
//! increases by one per read that returned bytes.

use crate::io::TokioIo;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Which clock stamped a request's content events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// Every content event carries the kernel's receive timestamp of its read.
    KernelRxTimestamp,
    /// At least one content event carries only the time its read returned.
    UserRead,
}

/// How a read's arrival interval was established.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundMethod {
    /// The event ended exactly where a read that drained the queue ended: the kernel
    /// timestamp of that read's newest segment is its arrival (a point).
    KernelTail,
    /// Kernel timestamp of the newest segment above; the drained queue or the previous
    /// stamped read below.
    KernelInterval,
    /// No kernel timestamp: the read's return above, the drained queue below.
    UserRead,
}

/// What the latest read saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadStamp {
    /// Reads that returned bytes so far on this connection (0: none yet).
    pub seq: u64,
    /// When the latest read returned.
    pub read_at: Instant,
    /// Read lag (read returned − the kernel's receive timestamp), when the kernel stamped
    /// the read.
    pub lag_ns: Option<u64>,
    /// No byte of the read arrived before this (see the module docs); `None` when nothing
    /// bounds it from below (the connection's first read, with no drained queue before it).
    pub lower: Option<Instant>,
    /// The read returned fewer bytes than asked: the queue was empty after it.
    pub drained: bool,
    /// The read's last (up to 4) bytes, right-aligned, and how many there are.
    pub tail: ([u8; 4], u8),
}

impl ReadStamp {
    /// The best known arrival time: the kernel's, else the read's (the interval's upper end).
    pub fn arrival(&self) -> Instant {
        self.lag_ns
            .and_then(|l| self.read_at.checked_sub(Duration::from_nanos(l)))
            .unwrap_or(self.read_at)
    }

    /// The interval's lower end, never after [`ReadStamp::arrival`].
    pub fn lower_bound(&self) -> Option<Instant> {
        self.lower.map(|l| l.min(self.arrival()))
    }

    /// Whether the read is kernel-stamped, drained the queue and its raw bytes end with
    /// `suffix` (so what ends with those bytes arrived exactly at [`ReadStamp::arrival`]).
    pub fn ends_exactly_with(&self, suffix: &[u8]) -> bool {
        let (bytes, n) = self.tail;
        let n = n as usize;
        self.lag_ns.is_some()
            && self.drained
            && suffix.len() <= n
            && bytes[4 - suffix.len()..] == *suffix
    }
}

/// What one connection knows about its queue between reads.
#[derive(Clone, Copy, Debug, Default)]
struct QueueState {
    /// Start of the latest recv that left the queue empty.
    drained_at: Option<Instant>,
}

/// The latest read of one connection, shared with the code that consumes its frames.
pub type ReadLog = Arc<Mutex<ReadStamp>>;

/// A client TCP stream whose reads carry kernel receive timestamps.
#[derive(Debug)]
pub struct StampedStream {
    io: TokioIo<TcpStream>,
    log: ReadLog,
    queue: QueueState,
}

impl StampedStream {
    /// Wraps `stream`, asking the kernel for receive timestamps (returned: whether it agreed),
    /// stamping `write_stamp` at the first write after each reset (see [`TokioIo`]).
    pub fn new(stream: TcpStream, write_stamp: Arc<AtomicU64>) -> (StampedStream, ReadLog, bool) {
        let kernel = ask_rx_timestamps(stream.as_raw_fd());
        let log = Arc::new(Mutex::new(ReadStamp {
            seq: 0,
            read_at: Instant::now(),
            lag_ns: None,
            lower: None,
            drained: false,
            tail: ([0; 4], 0),
        }));
        (
            StampedStream {
                io: TokioIo::with_write_stamp(stream, write_stamp),
                log: log.clone(),
                queue: QueueState::default(),
            },
            log,
            kernel,
        )
    }
}

/// Asks the kernel for software receive timestamps on socket `fd` (`SO_TIMESTAMPNS`);
/// returns whether it agreed.
fn ask_rx_timestamps(fd: libc::c_int) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket descriptor and a c_int option value of the stated size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Makes sure the kernel stamps received segments before any measured read: Linux switches
/// receive timestamping on system-wide through deferred work when the first socket asks, so
/// segments arriving in the first moments after carry no stamp (and their events only the
/// wide interval of a read-time stamp). A loopback TCP pair asks and sends one byte at a
/// time until a segment comes back stamped, for at most `limit`; returns whether one did.
pub fn warm_kernel_timestamps(limit: Duration) -> bool {
    let attempt = || -> std::io::Result<bool> {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let mut tx = std::net::TcpStream::connect(l.local_addr()?)?;
        let (rx, _) = l.accept()?;
        if !ask_rx_timestamps(rx.as_raw_fd()) {
            return Ok(false);
        }
        rx.set_read_timeout(Some(Duration::from_millis(100)))?;
        let start = Instant::now();
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8];
        while start.elapsed() < limit {
            std::io::Write::write_all(&mut tx, b"t")?;
            if let (1.., Some(_)) = recv_stamped(rx.as_raw_fd(), &mut buf, 0)? {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(false)
    };
    attempt().unwrap_or(false)
}

/// `t` on the system's `CLOCK_MONOTONIC` in ns (what `Instant` reads on Linux), so evidence
/// times relative to an epoch can be laid beside another process's monotonic trace.
pub fn monotonic_ns_of(t: Instant) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let now = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    now.saturating_sub(t.elapsed().as_nanos() as u64)
}

fn realtime_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// One `recvmsg` into `dst` with `flags` (0 or `MSG_PEEK`); returns the byte count and the
/// kernel timestamp (realtime ns) of the newest segment it touched.
fn recv_stamped(
    fd: libc::c_int,
    dst: &mut [std::mem::MaybeUninit<u8>],
    flags: libc::c_int,
) -> std::io::Result<(usize, Option<i128>)> {
    let mut iov = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; every pointer below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the iovec points at `dst`, writable for its length; the kernel initialises
    // the bytes it reports.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays inside the control buffer the kernel filled.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

impl StampedStream {
    /// One stamped read into `dst` (the shared body of both read traits).
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        dst: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<std::io::Result<usize>> {
        let stream = self.io.get_ref();
        loop {
            if let Err(e) = std::task::ready!(stream.poll_read_ready(cx)) {
                return Poll::Ready(Err(e));
            }
            let fd = stream.as_raw_fd();
            let started = Instant::now();
            match stream.try_io(Interest::READABLE, || recv_stamped(fd, dst, 0)) {
                Ok((n, kernel)) => {
                    if n > 0 {
                        // SAFETY: recvmsg initialised the first `n` bytes.
                        let got =
                            unsafe { std::slice::from_raw_parts(dst.as_ptr().cast::<u8>(), n) };
                        self.record(got, dst.len(), kernel, started);
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.queue.drained_at = Some(started);
                    continue;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Publishes one read's stamp and interval and updates what the queue is known to hold.
    fn record(&mut self, got: &[u8], asked: usize, kernel: Option<i128>, started: Instant) {
        let read_at = Instant::now();
        let now_real = realtime_ns();
        let lower = self.queue.drained_at;
        let lag = kernel.map(|k| (now_real - k).max(0) as u64);
        let drained = got.len() < asked;
        if drained {
            self.queue.drained_at = Some(started);
        }
        let mut tail = [0u8; 4];
        let n = got.len().min(4);
        tail[4 - n..].copy_from_slice(&got[got.len() - n..]);
        let mut log = self.log.lock().expect("read log");
        log.seq += 1;
        log.read_at = read_at;
        log.lag_ns = lag;
        log.lower = lower;
        log.drained = drained;
        log.tail = (tail, n as u8);
    }
}

impl hyper::rt::Read for StampedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        // SAFETY: recvmsg only writes into the slice; we advance by what it wrote.
        let dst = unsafe { buf.as_mut() };
        let n = std::task::ready!(self.get_mut().poll_recv(cx, dst))?;
        // SAFETY: `n` bytes were initialised by recvmsg.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

/// The tokio view, for TLS (tokio-rustls) on top of a stamped socket: the kernel receive
/// time of the TCP read that carried a TLS record stamps what it decrypts to.
impl tokio::io::AsyncRead for StampedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        // SAFETY: recvmsg only writes into the unfilled part; we mark exactly what it wrote.
        let dst = unsafe { buf.unfilled_mut() };
        let n = std::task::ready!(self.get_mut().poll_recv(cx, dst))?;
        // SAFETY: `n` bytes were initialised by recvmsg.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for StampedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, std::io::Error>> {
        self.io.stamp();
        Pin::new(self.io.get_mut()).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(self.io.get_mut()).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(self.io.get_mut()).poll_shutdown(cx)
    }
}

impl hyper::rt::Write for StampedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, std::io::Error>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<Result<usize, std::io::Error>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Runs `f` on a current-thread runtime, as the load generator does.
    fn block_on<F: std::future::Future<Output = ()>>(f: F) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// A stamped client stream, its read log and the server's end of the loopback
    /// connection, with receive timestamping already switched on system-wide (the kernel
    /// does that through deferred work when the first socket asks; a campaign's readiness
    /// probe and warmup ask long before the measured requests).
    async fn loopback() -> (StampedStream, ReadLog, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let (stream, log, kernel) = StampedStream::new(c, Arc::default());
        assert!(kernel, "SO_TIMESTAMPNS refused");
        std::thread::sleep(Duration::from_millis(50));
        (stream, log, s)
    }

    /// One read of at most `N` bytes through the hyper read trait; returns the bytes.
    async fn read_some<const N: usize>(stream: &mut StampedStream) -> Vec<u8> {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); N];
        let mut rb = hyper::rt::ReadBuf::uninit(&mut buf);
        std::future::poll_fn(|cx| {
            hyper::rt::Read::poll_read(Pin::new(&mut *stream), cx, rb.unfilled())
        })
        .await
        .unwrap();
        rb.filled().to_vec()
    }

    /// A segment that waited 30 ms in the socket: the kernel timestamp says so, the read
    /// time does not.
    #[test]
    fn kernel_timestamp_predates_a_late_read() {
        block_on(async {
            let (mut stream, log, mut s) = loopback().await;
            s.write_all(b"abc").unwrap();
            std::thread::sleep(Duration::from_millis(30));
            assert_eq!(read_some::<16>(&mut stream).await, b"abc");
            let st = *log.lock().unwrap();
            assert_eq!(st.seq, 1);
            let lag = st.lag_ns.expect("kernel timestamp");
            assert!(lag >= 29_000_000, "lag {lag} ns");
            assert!(lag < 2_000_000_000, "lag {lag} ns");
        });
    }

    /// A backlog of three segments written 3 ms apart and read 15 ms late: however the
    /// kernel queued them, every byte's write lies inside the interval of the read that
    /// delivered it, and a read that did not drain the queue is never taken for exact.
    #[test]
    fn a_late_backlog_keeps_its_bytes_inside_the_read_interval() {
        block_on(async {
            let (mut stream, log, mut s) = loopback().await;
            // One byte first, read at once: the queue is then known empty.
            s.write_all(b"0").unwrap();
            read_some::<8>(&mut stream).await;
            let mut windows = Vec::new();
            for part in [&b"first-event"[..], b"second", b"third-part"] {
                let before = Instant::now();
                s.write_all(part).unwrap();
                windows.push((before, Instant::now()));
                std::thread::sleep(Duration::from_millis(3));
            }
            std::thread::sleep(Duration::from_millis(15));
            let slack = Duration::from_micros(100);
            // Small reads (8 bytes): the first ones cannot drain the queue.
            let mut offset = 0usize;
            let ends = [11usize, 17, 27];
            while offset < 27 {
                let n = read_some::<8>(&mut stream).await.len();
                let st = *log.lock().unwrap();
                let (lower, upper) = (st.lower_bound().expect("bounded below"), st.arrival());
                // Every segment with a byte in this read was written inside [lower, upper].
                for (i, (before, after)) in windows.iter().enumerate() {
                    let start = if i == 0 { 0 } else { ends[i - 1] };
                    if start < offset + n && ends[i] > offset {
                        assert!(
                            *after + slack >= lower,
                            "segment {i} before the lower bound"
                        );
                        assert!(
                            *before <= upper + slack,
                            "segment {i} after the upper bound"
                        );
                    }
                }
                assert_eq!(st.drained, offset + n == 27 && n < 8);
                offset += n;
            }
        });
    }

    /// A read that finds the queue empty bounds what comes next from below: bytes written
    /// after it cannot have arrived before it started.
    #[test]
    fn a_drained_queue_bounds_the_next_read_from_below() {
        block_on(async {
            let (mut stream, log, mut s) = loopback().await;
            s.write_all(b"0").unwrap();
            std::thread::sleep(Duration::from_millis(5));
            let started = Instant::now();
            read_some::<64>(&mut stream).await;
            assert!(
                log.lock().unwrap().drained,
                "one byte of 64 drains the queue"
            );
            let writer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                let before = Instant::now();
                s.write_all(b"late").unwrap();
                (before, s)
            });
            read_some::<64>(&mut stream).await;
            let (before, _s) = writer.join().unwrap();
            let st = *log.lock().unwrap();
            let lower = st.lower_bound().expect("a lower bound");
            assert!(lower >= started, "the drained queue's time bounds the read");
            assert!(lower <= before + Duration::from_micros(100));
            assert!(st.arrival() + Duration::from_micros(100) >= before);
        });
    }
}
