//! A child writing 1 GiB to stdout: the pipe is drained to the end, the capture keeps only
//! head + tail, and this process's peak RSS stays bounded (own test binary, so no other test
//! inflates the peak).

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use qual_exec::{execute, Termination};

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().trim_end_matches("kB").trim().parse().unwrap())
        .unwrap_or_else(|| panic!("{field} missing from /proc/self/status"))
}

#[test]
fn one_gib_flood_is_drained_with_bounded_memory() {
    let d = tempfile::tempdir().unwrap();
    const GIB: u64 = 1 << 30;
    let c = case(&["flood", &GIB.to_string()], 600.0, 5.0, d.path());
    let hwm_before = status_kib("VmHWM:");
    let e = execute(&c.spec).unwrap();
    let hwm_after = status_kib("VmHWM:");
    let rss_after = status_kib("VmRSS:");
    eprintln!("VmHWM before {hwm_before} kB, after {hwm_after} kB; VmRSS after {rss_after} kB");
    assert_eq!(e.termination, Termination::Exited { code: 0 });
    assert_eq!(e.stdout.total_bytes, GIB);
    assert!(e.stdout.truncated);
    assert_eq!(e.stdout.head.len(), 64 * 1024);
    assert_eq!(e.stdout.tail.len(), 64 * 1024);
    assert!(e
        .stdout
        .head
        .iter()
        .chain(&e.stdout.tail)
        .all(|b| *b == b'x'));
    // 1 GiB went through; the peak grew by far less than that (generous 64 MiB bound).
    assert!(
        hwm_after < hwm_before + 64 * 1024,
        "peak RSS grew from {hwm_before} kB to {hwm_after} kB"
    );
    assert_nothing_left(&e, &c.marker);
}
