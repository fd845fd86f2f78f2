//! `kiln-qual run`, `source-tree`, `model fingerprint`.

use clap::{Args, Subcommand};

/// Arguments of `kiln-qual run`.
#[derive(Args, Debug)]
pub struct RunArgs {}

/// Arguments of `kiln-qual source-tree`.
#[derive(Args, Debug)]
pub struct SourceTreeArgs {}

/// `kiln-qual model ...`
#[derive(Subcommand, Debug)]
pub enum ModelCommand {}

/// Runs `kiln-qual run`.
pub fn run(_a: RunArgs) -> i32 {
    super::not_implemented("run a workload")
}

/// Runs `kiln-qual source-tree`.
pub fn source_tree(_a: SourceTreeArgs) -> i32 {
    super::not_implemented("compute the source-tree digest")
}

/// Runs `kiln-qual model ...`.
pub fn model(c: ModelCommand) -> i32 {
    match c {}
}
