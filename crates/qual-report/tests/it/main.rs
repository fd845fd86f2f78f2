//! The integration tests of `qual-report`, linked as one test binary (one link instead of one
//! per file on a 2-core machine): the formats' snapshots and shapes. The checks that need a real
//! program (Chromium, xmllint) are the `browser` target (`tests/browser/main.rs`).

// Tests start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod formats;
