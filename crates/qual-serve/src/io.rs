//! Glue between tokio sockets and hyper's runtime-agnostic I/O traits, plus the two body
//! types this crate sends.
//!
//! Owns: [`TokioIo`] (a `tokio::net::TcpStream` seen through `hyper::rt::{Read, Write}`),
//! [`FullBody`] (one buffer, then end of stream) and [`ChannelBody`] (frames pushed by a task;
//! an `Err` item aborts the connection, which is how the mock server drops a stream).
//! Invariant: no body type here buffers more than what its producer already handed over.

use hyper::body::{Body, Bytes, Frame};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A tokio stream usable by hyper's connection types.
#[derive(Debug)]
pub struct TokioIo<T> {
    inner: T,
    write_stamp: Option<Arc<AtomicU64>>,
}

impl<T> TokioIo<T> {
    /// Wraps a tokio stream.
    pub fn new(inner: T) -> TokioIo<T> {
        TokioIo {
            inner,
            write_stamp: None,
        }
    }

    /// Wraps a tokio stream and stamps `stamp` with [`mono_ns`] at the first write after it
    /// was reset to 0 (the client uses this to know when a request really left).
    pub fn with_write_stamp(inner: T, stamp: Arc<AtomicU64>) -> TokioIo<T> {
        TokioIo {
            inner,
            write_stamp: Some(stamp),
        }
    }
}

fn mono_base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Nanoseconds on a process-wide monotonic clock, never 0 (0 means "not stamped").
pub fn mono_ns() -> u64 {
    mono_base().elapsed().as_nanos() as u64 + 1
}

/// The instant of a [`mono_ns`] reading.
pub fn mono_instant(ns: u64) -> Instant {
    mono_base() + Duration::from_nanos(ns.saturating_sub(1))
}

impl<T> TokioIo<T> {
    /// The wrapped stream.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped stream, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T: AsyncRead + Unpin> hyper::rt::Read for TokioIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        // SAFETY: the slice is only handed to tokio's ReadBuf, which never de-initialises
        // bytes, and we advance the cursor by exactly the number of bytes tokio filled.
        let n = unsafe {
            let mut tbuf = ReadBuf::uninit(buf.as_mut());
            match Pin::new(&mut self.inner).poll_read(cx, &mut tbuf) {
                Poll::Ready(Ok(())) => tbuf.filled().len(),
                other => return other,
            }
        };
        // SAFETY: `n` bytes were initialised by the read above.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> hyper::rt::Write for TokioIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, std::io::Error>> {
        self.stamp();
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<Result<usize, std::io::Error>> {
        self.stamp();
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
}

impl<T> TokioIo<T> {
    pub(crate) fn stamp(&self) {
        if let Some(s) = &self.write_stamp {
            let _ = s.compare_exchange(0, mono_ns(), Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

/// A body made of one buffer (possibly empty).
#[derive(Debug, Default)]
pub struct FullBody(Option<Bytes>);

impl FullBody {
    /// A body carrying `bytes`.
    pub fn new(bytes: impl Into<Bytes>) -> FullBody {
        let b: Bytes = bytes.into();
        if b.is_empty() {
            FullBody(None)
        } else {
            FullBody(Some(b))
        }
    }
}

impl Body for FullBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// Why a [`ChannelBody`] stopped early: the producer asked to drop the connection.
#[derive(Debug, thiserror::Error)]
#[error("connection dropped on purpose")]
pub struct Dropped;

/// One item pushed into a [`ChannelBody`]: bytes, or a request to abort the connection.
pub type BodyItem = Result<Bytes, Dropped>;

/// A streaming body fed by a task through a bounded channel.
#[derive(Debug)]
pub struct ChannelBody {
    rx: tokio::sync::mpsc::Receiver<BodyItem>,
}

impl ChannelBody {
    /// A body and the sender that feeds it; dropping the sender ends the body cleanly.
    pub fn channel(capacity: usize) -> (tokio::sync::mpsc::Sender<BodyItem>, ChannelBody) {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity);
        (tx, ChannelBody { rx })
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Dropped;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Dropped>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Either body, so one handler can answer with a buffer or a stream.
#[derive(Debug)]
pub enum EitherBody {
    /// A complete buffer.
    Full(FullBody),
    /// A stream fed by a task.
    Channel(ChannelBody),
}

impl Body for EitherBody {
    type Data = Bytes;
    type Error = Dropped;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Dropped>>> {
        match self.get_mut() {
            EitherBody::Full(b) => match Pin::new(b).poll_frame(cx) {
                Poll::Ready(Some(Ok(f))) => Poll::Ready(Some(Ok(f))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(Err(never))) => match never {},
            },
            EitherBody::Channel(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            EitherBody::Full(b) => b.is_end_stream(),
            EitherBody::Channel(_) => false,
        }
    }
}
