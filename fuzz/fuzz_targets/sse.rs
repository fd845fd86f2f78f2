//! Incremental SSE parser: the same bytes split at any point yield the same events as
//! when fed whole (the first byte chooses the split), and nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use qual_serve::sse::SseParser;

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else { return };
    let cut = (split as usize).min(body.len());
    let mut whole = SseParser::new(1 << 16);
    let mut a = Vec::new();
    let ra = whole.push(body, &mut a);
    let mut parts = SseParser::new(1 << 16);
    let mut b = Vec::new();
    let rb = parts.push(&body[..cut], &mut b).and_then(|()| parts.push(&body[cut..], &mut b));
    if ra.is_ok() && rb.is_ok() {
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
});
