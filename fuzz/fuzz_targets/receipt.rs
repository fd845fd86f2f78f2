//! Receipt validator: strict parse + basic validation never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = qual_json::from_slice(data) {
        let _ = qual_receipt::validate::validate(&v);
    }
});
