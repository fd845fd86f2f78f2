//! Case-result protocol: strict parse + validation against a declared contract never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = qual_json::from_slice(data) {
        let declared = vec!["max_abs_error".to_owned(), "tokens_per_second".to_owned()];
        let _ = qual_runner::case_result::validate(&v, "decode-throughput", &declared, true);
    }
});
