//! The integration tests of `qual-runner`, linked as one test binary (one link instead of one
//! per file on a 2-core machine): runs, refusals, containment and `kill -9` of the runner, over
//! the temporary repositories of `common`.

mod common;
mod containment;
mod kill9;
mod refusals;
mod run;
