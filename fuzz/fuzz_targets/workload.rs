//! Workload loader: strict parse + semantic validation + typed conversion never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = qual_contract::check_bytes(data) {
        let _ = qual_contract::typed(&v);
    }
});
