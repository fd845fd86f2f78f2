//! `kiln-qual receipt check|show` and `kiln-qual compare`.

use clap::{Args, Subcommand};

/// `kiln-qual receipt ...`
#[derive(Subcommand, Debug)]
pub enum ReceiptCommand {}

/// Arguments of `kiln-qual compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {}

/// Runs `kiln-qual receipt ...`.
pub fn run(c: ReceiptCommand) -> i32 {
    match c {}
}

/// Runs `kiln-qual compare`.
pub fn compare(_a: CompareArgs) -> i32 {
    super::not_implemented("compare receipts")
}
