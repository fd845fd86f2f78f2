//! qual-fleet: qualification on a fleet, through the schedulers people already run.
//!
//! - [`plan`] owns the fleet plan (`kiln-qual.fleet-plan.v1`): which workload and variant run
//!   on which host, selected by Slurm partition/constraint/GRES or by runner labels, the
//!   pushed commit to run, and each host's public key.
//! - [`slurm`] owns dispatch as `sbatch` job arrays (one task per target), the job record it
//!   leaves, and job state read back from Slurm (`scontrol`, `sacct` where accounting exists).
//! - [`gha`] owns the generated GitHub Actions `workflow_dispatch` workflow (a matrix over the
//!   plan's targets).
//! - [`collect`] owns bringing each target's evidence into one evidence tree (exclusive copies,
//!   idempotent), and verifying it: the receipt against its run directory, its attestation
//!   against the planned host's key, host id and commit as planned, and the publication gate.
//! - [`report`] renders a collected fleet: host × workload/variant, failures first, missing
//!   targets, who signed.
//!
//! The CLI (`kiln-qual fleet …`) only wires these.
#![forbid(unsafe_code)]

pub mod collect;
pub mod gha;
pub mod plan;
pub mod report;
pub mod slurm;

pub use plan::{Plan, PlanError, Target};
