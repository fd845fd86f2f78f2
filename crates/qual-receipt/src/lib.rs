//! Receipt v1: the data model and exclusive writer (used by the runner), the validator, the
//! comparator and the human rendering.
//!
//! - [`validate`]: every rule of a receipt document, on the strictly parsed JSON value, with
//!   all violations and their paths, plus the strict checks against a repository;
//! - [`consistency`]: rules that tie a receipt's verdict, statuses, runner metrics and case
//!   artifacts together without any evidence;
//! - [`verify`]: a receipt recomputed from its retained run directory (`receipt verify`);
//! - [`compare`]: two receipts under a committed workload's comparison policy, refusing every
//!   comparison the policy does not admit;
//! - [`render`]: the human summary of one receipt and of one comparison;
//! - [`decimal`]: exact decimal arithmetic for tolerances;
//! - [`aggregate`] and [`details`]: how per-execution case results become a receipt's results
//!   and verdict (the runner writes with them, `receipt verify` recomputes with them).

#![forbid(unsafe_code)]

pub mod aggregate;
pub mod compare;
pub mod consistency;
pub mod decimal;
pub mod details;
pub mod model;
pub mod render;
pub mod validate;
pub mod verify;
pub mod write;
