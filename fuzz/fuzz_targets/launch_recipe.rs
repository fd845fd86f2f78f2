//! Launch recipe readers (both schemas) and the base URL parser: strict parse + validation
//! never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = qual_json::from_slice(data) {
        let _ = qual_serve::recipe::validate(&doc, std::path::Path::new("."), String::new());
        if let Ok(k) = qual_serve::kiln_launch::validate(&doc, std::path::Path::new(".")) {
            let url: qual_serve::kiln_launch::BaseUrl = "http://127.0.0.1:8080".parse().unwrap();
            let _ = k.to_recipe(&url, Default::default(), String::new(), doc);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = text.parse::<qual_serve::kiln_launch::BaseUrl>();
    }
});
