//! qual-probe: the facts a qualification run binds before it executes anything.
//!
//! - [`git`]: commit, clean worktree, committed bytes at HEAD, index listing: a re-export of
//!   `qual_git`, the one hardened git binding (no repository filter, hook or helper runs);
//! - [`policy`]: the repository policy file `qualification/policy.json` (source-tree profile);
//! - [`source_tree`]: the `kiln-source-tree-v1` digest, byte for byte under the `kiln`
//!   profile, with a documented `generic` default;
//! - [`model`]: the model / tokenizer / weight fingerprint;
//! - [`platform`] and [`backend`] (with [`cuda`], which GPU the cases use): host and backend probes whose parsers are tested on
//!   captured tool output; [`tool`] runs probe tools with a deadline.
//!
//! Invariant across the crate: a fact that cannot be observed is reported as unavailable with
//! a reason, never invented.

pub mod backend;
pub mod cuda;
pub mod git;
// `unsafe`: the model root is opened with O_NOFOLLOW | O_DIRECTORY through libc.
#[allow(unsafe_code)]
pub mod model;
pub mod platform;
pub mod policy;
pub mod source_tree;
pub mod tool;
pub mod vulkan;

pub use policy::{load_policy, RepoPolicy, SourceTreeProfile};
