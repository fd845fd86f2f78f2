//! Strict JSON reader: never panics; accepted documents re-serialise canonically and
//! re-parse to the same canonical text.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = qual_json::from_slice(data) {
        let text = qual_json::to_canonical_string(&v);
        let back = qual_json::from_str(&text).expect("canonical text parses");
        assert_eq!(qual_json::to_canonical_string(&back), text);
    }
});
