//! `KILN_LATENCY_METRIC` log parser: any bytes decode and parse without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = qual_latency::metric::decode_log(data);
    let _ = qual_latency::metric::parse_metric_text(&text, "fuzz.log");
});
