//! `kiln-qual serve` and `kiln-qual mock-server`.

use clap::Args;

/// Arguments of `kiln-qual serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {}

/// Arguments of `kiln-qual mock-server`.
#[derive(Args, Debug)]
pub struct MockServerArgs {}

/// Runs `kiln-qual serve`.
pub fn serve(_a: ServeArgs) -> i32 {
    super::not_implemented("run a serving campaign")
}

/// Runs `kiln-qual mock-server`.
pub fn mock_server(_a: MockServerArgs) -> i32 {
    super::not_implemented("start the mock server")
}
