//! The integration tests of `qual-report`, linked as one test binary (one link instead of one
//! per file on a 2-core machine): the formats' snapshots and the HTML report in a real browser.

mod browser;
mod formats;
