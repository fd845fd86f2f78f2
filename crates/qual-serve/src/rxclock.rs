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
//! Each read also gets a sequence number: content events delivered by one read share it,
//! which is how the client counts events coalesced into one read (all but the last of them
//! carry a later time than their own arrival). Invariant: [`ReadStamp::arrival`] ≤
//! [`ReadStamp::read_at`], and `seq` increases by one per read that returned bytes.

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
}

impl ReadStamp {
    /// The best known arrival time: the kernel's, else the read's.
    pub fn arrival(&self) -> Instant {
        self.lag_ns
            .and_then(|l| self.read_at.checked_sub(Duration::from_nanos(l)))
            .unwrap_or(self.read_at)
    }
}

/// The latest read of one connection, shared with the code that consumes its frames.
pub type ReadLog = Arc<Mutex<ReadStamp>>;

/// A client TCP stream whose reads carry kernel receive timestamps.
#[derive(Debug)]
pub struct StampedStream {
    io: TokioIo<TcpStream>,
    log: ReadLog,
}

impl StampedStream {
    /// Wraps `stream`, asking the kernel for receive timestamps (returned: whether it agreed),
    /// stamping `write_stamp` at the first write after each reset (see [`TokioIo`]).
    pub fn new(stream: TcpStream, write_stamp: Arc<AtomicU64>) -> (StampedStream, ReadLog, bool) {
        let on: libc::c_int = 1;
        // SAFETY: a valid socket descriptor and a c_int option value of the stated size.
        let kernel = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        } == 0;
        let log = Arc::new(Mutex::new(ReadStamp {
            seq: 0,
            read_at: Instant::now(),
            lag_ns: None,
        }));
        (
            StampedStream {
                io: TokioIo::with_write_stamp(stream, write_stamp),
                log: log.clone(),
            },
            log,
            kernel,
        )
    }
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

/// One `recvmsg` into `dst`; returns the byte count and the kernel timestamp (realtime ns).
fn recv_stamped(
    fd: libc::c_int,
    dst: &mut [std::mem::MaybeUninit<u8>],
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
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
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
            match stream.try_io(Interest::READABLE, || recv_stamped(fd, dst)) {
                Ok((n, kernel)) => {
                    if n > 0 {
                        let read_at = Instant::now();
                        let lag = kernel.map(|k| (realtime_ns() - k).max(0) as u64);
                        let mut log = self.log.lock().expect("read log");
                        log.seq += 1;
                        log.read_at = read_at;
                        log.lag_ns = lag;
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
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

    /// A segment that waited 30 ms in the socket: the kernel timestamp says so, the read
    /// time does not.
    #[test]
    fn kernel_timestamp_predates_a_late_read() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let c = TcpStream::connect(addr).await.unwrap();
            let (mut s, _) = l.accept().unwrap();
            let (mut stream, log, kernel) = StampedStream::new(c, Arc::default());
            assert!(kernel, "SO_TIMESTAMPNS refused");
            // The kernel switches receive timestamping on system-wide through deferred work
            // when the first socket asks; give it a moment, as a campaign's readiness probe
            // and warmup do.
            std::thread::sleep(std::time::Duration::from_millis(50));
            s.write_all(b"abc").unwrap();
            std::thread::sleep(Duration::from_millis(30));
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16];
            let mut rb = hyper::rt::ReadBuf::uninit(&mut buf);
            std::future::poll_fn(|cx| {
                hyper::rt::Read::poll_read(Pin::new(&mut stream), cx, rb.unfilled())
            })
            .await
            .unwrap();
            assert_eq!(rb.filled(), b"abc");
            let st = *log.lock().unwrap();
            assert_eq!(st.seq, 1);
            let lag = st.lag_ns.expect("kernel timestamp");
            assert!(lag >= 29_000_000, "lag {lag} ns");
            assert!(lag < 2_000_000_000, "lag {lag} ns");
        });
    }
}
