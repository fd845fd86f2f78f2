//! The integration tests of `qual-git`, linked as one test binary (one link instead of one per
//! file on a 2-core machine): status and hostile repositories. `tests/environment.rs` stays its
//! own binary: it changes the process environment (`GIT_DIR`, `HOME`, …) that this binary's
//! helpers pass to the git they run to build repositories.

#[path = "../common/mod.rs"]
mod common;
mod hostile;
mod status;
