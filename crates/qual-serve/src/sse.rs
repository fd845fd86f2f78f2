//! Incremental Server-Sent Events parser.
//!
//! Owns the byte-level SSE grammar (WHATWG "event stream interpretation") as far as the
//! OpenAI-compatible streaming APIs use it: lines end in LF, CRLF or CR (a CR at the end of
//! one read and an LF at the start of the next are one line ending); a blank line dispatches
//! the event; `data:` fields of one event are joined with `\n`; one space after the colon is
//! dropped; lines starting with `:` are comments; `event:` sets the event type; `id:` and
//! `retry:` are accepted and ignored; unknown fields are ignored. A final event without the
//! blank line is **not** dispatched (the stream was cut).
//!
//! Invariants: the parser is a pure function of the concatenated input, whatever the read
//! boundaries (property-tested); it never holds more than the bytes of the event being read
//! (bounded by `max_event_bytes`, beyond which it reports [`SseError::EventTooLarge`]).
//!
//! Cost: this runs once per streamed token, so the steady state allocates nothing. Line ends
//! are found with `memchr`, and [`SseParser::push_each`] hands each event to the caller as it
//! completes, borrowed from the parser's own buffers (which are reused for the next event);
//! [`SseParser::push`] collects owned copies for callers that want a list.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` type, if one was given.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Why [`SseParser::push_each`] stopped: the byte stream, or the caller's handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushError<E> {
    /// The bytes are not a usable SSE stream.
    Sse(SseError),
    /// The handler refused an event.
    Handler(E),
}

/// Why the byte stream is not a usable SSE stream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// One event grew beyond the limit.
    #[error("read an SSE event larger than {limit} bytes")]
    EventTooLarge {
        /// The limit in force.
        limit: usize,
    },
    /// A field line is not UTF-8.
    #[error("read an SSE line that is not UTF-8")]
    InvalidUtf8,
}

/// The incremental parser; feed it reads with [`SseParser::push`].
#[derive(Debug)]
pub struct SseParser {
    line: Vec<u8>,
    /// The event being read: its `data` and `event` fields (reused between events).
    current: SseEvent,
    has_data: bool,
    pending_cr: bool,
    event_bytes: usize,
    max_event_bytes: usize,
}

impl Default for SseParser {
    fn default() -> SseParser {
        SseParser::new(16 * 1024 * 1024)
    }
}

impl SseParser {
    /// A parser refusing events larger than `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> SseParser {
        SseParser {
            line: Vec::new(),
            current: SseEvent {
                event: None,
                data: String::new(),
            },
            has_data: false,
            pending_cr: false,
            event_bytes: 0,
            max_event_bytes,
        }
    }

    /// Consumes one read and appends every event it completes to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.push_each(bytes, |ev| {
            out.push(ev.clone());
            Ok::<(), std::convert::Infallible>(())
        })
        .map_err(|e| match e {
            PushError::Sse(e) => e,
            PushError::Handler(never) => match never {},
        })
    }

    /// Consumes one read and hands every event it completes to `each`, in order, as soon as
    /// it completes. An error from `each` stops the read there (the parser is then in no
    /// state to continue the stream).
    pub fn push_each<E>(
        &mut self,
        mut bytes: &[u8],
        mut each: impl FnMut(&SseEvent) -> Result<(), E>,
    ) -> Result<(), PushError<E>> {
        // An empty read must not consume a pending CR: its LF may still come.
        if bytes.is_empty() {
            return Ok(());
        }
        if self.pending_cr {
            self.pending_cr = false;
            if bytes.first() == Some(&b'\n') {
                bytes = &bytes[1..];
            }
        }
        while !bytes.is_empty() {
            match memchr::memchr2(b'\n', b'\r', bytes) {
                None => {
                    self.grow(bytes.len()).map_err(PushError::Sse)?;
                    self.line.extend_from_slice(bytes);
                    return Ok(());
                }
                Some(i) => {
                    self.grow(i).map_err(PushError::Sse)?;
                    let is_cr = bytes[i] == b'\r';
                    if self.line.is_empty() {
                        self.process_line(&bytes[..i], &mut each)?;
                    } else {
                        self.line.extend_from_slice(&bytes[..i]);
                        let line = std::mem::take(&mut self.line);
                        let r = self.process_line(&line, &mut each);
                        self.line = line;
                        self.line.clear();
                        r?;
                    }
                    bytes = &bytes[i + 1..];
                    if is_cr {
                        match bytes.first() {
                            Some(b'\n') => bytes = &bytes[1..],
                            None => self.pending_cr = true,
                            _ => {}
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn grow(&mut self, n: usize) -> Result<(), SseError> {
        self.event_bytes += n;
        if self.event_bytes > self.max_event_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        Ok(())
    }

    fn process_line<E>(
        &mut self,
        line: &[u8],
        each: &mut impl FnMut(&SseEvent) -> Result<(), E>,
    ) -> Result<(), PushError<E>> {
        if line.is_empty() {
            let dispatch = self.has_data;
            self.has_data = false;
            self.event_bytes = 0;
            let r = if dispatch {
                each(&self.current).map_err(PushError::Handler)
            } else {
                Ok(())
            };
            self.current.event = None;
            self.current.data.clear();
            return r;
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                let v = utf8(value)?;
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(v);
                self.has_data = true;
            }
            b"event" => {
                let v = utf8(value)?;
                self.current.event = Some(v.to_string());
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether bytes of an undispatched event are buffered (a stream ending now was cut).
    pub fn has_partial_event(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }
}

fn utf8<E>(v: &[u8]) -> Result<&str, PushError<E>> {
    std::str::from_utf8(v).map_err(|_| PushError::Sse(SseError::InvalidUtf8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut out).unwrap();
        }
        out
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn events_split_across_reads_are_reassembled() {
        let ev = parse_all(&[b"da", b"ta: {\"a\"", b":1}\n", b"\n", b"data: [DONE]\n\n"]);
        assert_eq!(data(&ev), vec!["{\"a\":1}", "[DONE]"]);
    }

    #[test]
    fn reused_buffers_carry_nothing_into_the_next_event() {
        let mut p = SseParser::default();
        let mut seen = Vec::new();
        let mut keep = |ev: &SseEvent| {
            seen.push((ev.event.clone(), ev.data.clone()));
            Ok::<(), ()>(())
        };
        p.push_each(
            b"event: a\ndata: a long first payload\n\ndata: x\n\n",
            &mut keep,
        )
        .unwrap();
        p.push_each(b"data: y\n\nevent: b\ndata: zz\n\n", &mut keep)
            .unwrap();
        let got: Vec<(Option<&str>, &str)> = seen
            .iter()
            .map(|(e, d)| (e.as_deref(), d.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some("a"), "a long first payload"),
                (None, "x"),
                (None, "y"),
                (Some("b"), "zz")
            ]
        );
    }

    #[test]
    fn a_refusing_handler_stops_the_read_at_that_event() {
        let mut p = SseParser::default();
        let mut n = 0;
        let r = p.push_each(b"data: 1\n\ndata: 2\n\ndata: 3\n\n", |ev| {
            n += 1;
            if ev.data == "2" {
                Err("refused")
            } else {
                Ok(())
            }
        });
        assert_eq!(r, Err(PushError::Handler("refused")));
        assert_eq!(n, 2);
    }

    #[test]
    fn multi_line_data_is_joined_with_newline() {
        let ev = parse_all(&[b"data: one\ndata:two\ndata:  three\n\n"]);
        assert_eq!(data(&ev), vec!["one\ntwo\n three"]);
    }

    #[test]
    fn comments_unknown_fields_and_event_types() {
        let ev = parse_all(&[b": ping\n\nid: 7\nretry: 10\nevent: error\ndata: {}\n\n"]);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].event.as_deref(), Some("error"));
        assert_eq!(ev[0].data, "{}");
    }

    #[test]
    fn crlf_split_between_reads_is_one_line_ending() {
        let ev = parse_all(&[b"data: a\r", b"\n\r", b"\ndata: b\r\r"]);
        assert_eq!(data(&ev), vec!["a", "b"]);
    }

    #[test]
    fn empty_read_between_cr_and_lf_keeps_one_line_ending() {
        let ev = parse_all(&[b"data: a\r", b"", b"\ndata: b\r\n\r\n"]);
        assert_eq!(data(&ev), vec!["a\nb"]);
    }

    #[test]
    fn unterminated_final_event_is_not_dispatched() {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        p.push(b"data: x\n\ndata: cut", &mut out).unwrap();
        assert_eq!(data(&out), vec!["x"]);
        assert!(p.has_partial_event());
    }

    #[test]
    fn oversized_event_is_refused() {
        let mut p = SseParser::new(8);
        let mut out = Vec::new();
        assert_eq!(
            p.push(b"data: 0123456789\n\n", &mut out),
            Err(SseError::EventTooLarge { limit: 8 })
        );
    }

    #[test]
    fn invalid_utf8_is_refused() {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        assert_eq!(
            p.push(b"data: \xff\n\n", &mut out),
            Err(SseError::InvalidUtf8)
        );
    }

    proptest! {
        #[test]
        fn read_boundaries_never_change_the_events(
            payloads in proptest::collection::vec("[a-z{}\":, ]{0,12}", 0..8),
            ending in 0usize..3,
            cuts in proptest::collection::vec(0usize..400, 0..10),
        ) {
            let eol = ["\n", "\r\n", "\r"][ending];
            let mut text = String::new();
            for p in &payloads {
                text.push_str(&format!(": c{eol}data: {p}{eol}data:{p}{eol}{eol}"));
            }
            let bytes = text.as_bytes();
            let whole = parse_all(&[bytes]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut prev = 0;
            for c in cuts { pieces.push(&bytes[prev..c]); prev = c; }
            pieces.push(&bytes[prev..]);
            let split = parse_all(&pieces);
            prop_assert_eq!(&whole, &split);
            // The first line keeps the payload (its leading space is the one dropped); the second
            // has no space after the colon, so a leading space of the payload is dropped.
            let expected: Vec<String> = payloads
                .iter()
                .map(|p| format!("{p}\n{}", p.strip_prefix(' ').unwrap_or(p)))
                .collect();
            prop_assert_eq!(whole.iter().map(|e| e.data.clone()).collect::<Vec<_>>(), expected);
        }
    }
}
