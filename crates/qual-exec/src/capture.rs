//! Bounded output capture: the first `head_bytes` and the last `tail_bytes` of a stream, the
//! total byte count and a `truncated` flag, kept *while* the stream is read.
//!
//! Invariant: memory held per stream never exceeds `head_bytes + tail_bytes`, however much the
//! child writes; the caller keeps draining the pipe so the child never blocks on a full pipe.

use serde::{Deserialize, Serialize};

/// Per-stream capture bounds. The pipe is always drained; bytes beyond the bounds are counted,
/// not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureLimits {
    /// Bytes kept from the start of the stream.
    pub head_bytes: usize,
    /// Bytes kept from the end of the stream.
    pub tail_bytes: usize,
}

impl Default for CaptureLimits {
    /// 64 KiB head + 64 KiB tail.
    fn default() -> Self {
        CaptureLimits {
            head_bytes: 64 * 1024,
            tail_bytes: 64 * 1024,
        }
    }
}

/// What was kept of one output stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Captured {
    /// The first bytes of the stream (at most `head_bytes`).
    pub head: Vec<u8>,
    /// The last bytes of the stream that are not already in `head` (at most `tail_bytes`).
    pub tail: Vec<u8>,
    /// Every byte the stream produced, kept or not.
    pub total_bytes: u64,
    /// True when bytes between `head` and `tail` were dropped.
    pub truncated: bool,
}

impl Captured {
    /// `head`, then (when truncated) a marker line naming the number of dropped bytes, then
    /// `tail`, decoded as UTF-8 with replacement characters.
    pub fn text_lossy(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.truncated {
            let dropped = self
                .total_bytes
                .saturating_sub(self.head.len() as u64 + self.tail.len() as u64);
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!("[... {dropped} bytes omitted ...]\n"));
        }
        out.push_str(&String::from_utf8_lossy(&self.tail));
        out
    }

    /// The kept bytes: `head` followed by `tail` (without a marker).
    pub fn kept_bytes(&self) -> Vec<u8> {
        let mut v = self.head.clone();
        v.extend_from_slice(&self.tail);
        v
    }
}

/// Accumulates one stream under [`CaptureLimits`].
#[derive(Debug)]
pub(crate) struct Capture {
    limits: CaptureLimits,
    head: Vec<u8>,
    /// Ring buffer of capacity `tail_bytes`; `ring_start` is the oldest byte once full.
    ring: Vec<u8>,
    ring_start: usize,
    total: u64,
}

impl Capture {
    pub(crate) fn new(limits: CaptureLimits) -> Self {
        Capture {
            limits,
            head: Vec::with_capacity(limits.head_bytes.min(64 * 1024)),
            ring: Vec::new(),
            ring_start: 0,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        let room = self.limits.head_bytes.saturating_sub(self.head.len());
        if room > 0 {
            let n = room.min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        let cap = self.limits.tail_bytes;
        if data.is_empty() || cap == 0 {
            return;
        }
        if data.len() >= cap {
            // The chunk alone fills the ring: keep its last `cap` bytes.
            self.ring.clear();
            self.ring.extend_from_slice(&data[data.len() - cap..]);
            self.ring_start = 0;
            return;
        }
        if self.ring.len() < cap {
            let n = (cap - self.ring.len()).min(data.len());
            self.ring.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        // Ring is full: overwrite the oldest bytes.
        for chunk_start in (0..data.len()).step_by(cap.max(1)) {
            let chunk = &data[chunk_start..(chunk_start + cap).min(data.len())];
            let first = (cap - self.ring_start).min(chunk.len());
            self.ring[self.ring_start..self.ring_start + first].copy_from_slice(&chunk[..first]);
            let rest = chunk.len() - first;
            self.ring[..rest].copy_from_slice(&chunk[first..]);
            self.ring_start = (self.ring_start + chunk.len()) % cap;
        }
    }

    pub(crate) fn finish(self) -> Captured {
        let mut tail = Vec::with_capacity(self.ring.len());
        tail.extend_from_slice(&self.ring[self.ring_start..]);
        tail.extend_from_slice(&self.ring[..self.ring_start]);
        let kept = self.head.len() as u64 + tail.len() as u64;
        Captured {
            head: self.head,
            tail,
            total_bytes: self.total,
            truncated: self.total > kept,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(limits: CaptureLimits, chunks: &[&[u8]]) -> Captured {
        let mut c = Capture::new(limits);
        for ch in chunks {
            c.push(ch);
        }
        c.finish()
    }

    fn lim(h: usize, t: usize) -> CaptureLimits {
        CaptureLimits {
            head_bytes: h,
            tail_bytes: t,
        }
    }

    #[test]
    fn small_stream_is_kept_whole() {
        let c = run(lim(8, 8), &[b"hello"]);
        assert_eq!(c.head, b"hello");
        assert!(c.tail.is_empty());
        assert_eq!(c.total_bytes, 5);
        assert!(!c.truncated);
        assert_eq!(c.text_lossy(), "hello");
    }

    #[test]
    fn head_and_tail_without_loss_is_not_truncated() {
        let c = run(lim(4, 4), &[b"abcdefgh"]);
        assert_eq!(c.head, b"abcd");
        assert_eq!(c.tail, b"efgh");
        assert!(!c.truncated);
    }

    #[test]
    fn ring_keeps_last_bytes_across_many_small_chunks() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        for chunk in [1usize, 3, 7, 64, 999] {
            let chunks: Vec<&[u8]> = data.chunks(chunk).collect();
            let c = run(lim(10, 17), &chunks);
            assert_eq!(c.head, &data[..10]);
            assert_eq!(c.tail, &data[data.len() - 17..], "chunk size {chunk}");
            assert_eq!(c.total_bytes, 1000);
            assert!(c.truncated);
        }
    }

    #[test]
    fn marker_names_dropped_bytes() {
        let c = run(lim(2, 2), &[b"ab", b"0123456789", b"yz"]);
        assert_eq!(c.text_lossy(), "ab\n[... 10 bytes omitted ...]\nyz");
    }

    proptest::proptest! {
        /// Any split of any stream keeps exactly the first `head` bytes and the last `tail`
        /// bytes not already in the head, and counts everything.
        #[test]
        fn capture_matches_reference(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..2000),
            cuts in proptest::collection::vec(0usize..2000, 0..20),
            head in 0usize..300,
            tail in 0usize..300,
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort();
            let mut chunks = Vec::new();
            let mut prev = 0;
            for c in cuts.into_iter().chain([data.len()]) {
                chunks.push(&data[prev..c]);
                prev = c;
            }
            let got = run(lim(head, tail), &chunks);
            let h = head.min(data.len());
            let t = tail.min(data.len() - h);
            proptest::prop_assert_eq!(&got.head, &data[..h].to_vec());
            proptest::prop_assert_eq!(&got.tail, &data[data.len() - t..].to_vec());
            proptest::prop_assert_eq!(got.total_bytes, data.len() as u64);
            proptest::prop_assert_eq!(got.truncated, data.len() > h + t);
        }
    }

    #[test]
    fn zero_limits_only_count() {
        let c = run(lim(0, 0), &[b"abc", b"def"]);
        assert!(c.head.is_empty() && c.tail.is_empty());
        assert_eq!(c.total_bytes, 6);
        assert!(c.truncated);
    }
}
