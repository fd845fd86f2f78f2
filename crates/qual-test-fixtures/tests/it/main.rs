//! The integration tests of `qual-test-fixtures`, linked as one test binary (one link instead of
//! one per file on a 2-core machine): containment, owned processes, a killed runner and how the
//! fixtures are found. Three targets stay their own binaries, because they change or measure
//! process-wide state: `fallback` (the cgroup policy, and orphans re-parented to this process
//! are attributed to the running execution), `interrupt` (signal forwarding) and `flood`
//! (this process's peak RSS).

#[path = "../common/mod.rs"]
mod common;
mod containment;
mod locate;
mod owned;
mod runner_killed;
