//! Launch recipe reader: strict parse + validation never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = qual_json::from_slice(data) {
        let _ = qual_serve::recipe::validate(&doc, std::path::Path::new("."), String::new());
    }
});
