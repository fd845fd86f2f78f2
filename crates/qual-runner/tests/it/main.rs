//! The integration tests of `qual-runner`, linked as one test binary (one link instead of one
//! per file on a 2-core machine): runs, refusals, containment and `kill -9` of the runner, over
//! the temporary repositories of `common`.

// Tests: libc calls (signals, ids, forks) set up and observe the processes under test.
#![allow(unsafe_code)]
// Tests start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod common;
mod containment;
mod kill9;
mod refusals;
mod run;
