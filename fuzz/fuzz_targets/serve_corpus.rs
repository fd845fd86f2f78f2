//! Serving corpus (JSONL) reader: any bytes are accepted or refused with reasons, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = qual_serve::corpus::parse(data);
});
