//! `kiln-qual cargo -- <cargo args>`.

use clap::Args;

/// Arguments of `kiln-qual cargo`.
#[derive(Args, Debug)]
pub struct CargoArgs {}

/// Runs `kiln-qual cargo`.
pub fn run(_a: CargoArgs) -> i32 {
    super::not_implemented("run bounded cargo")
}
