//! The integration tests of `qual-contract`, linked as one test binary (one link instead of
//! one per file on a 2-core machine): the contract notes' cases, the property round trips and
//! the committed JSON Schema.

mod contract;
mod roundtrip;
mod schema;
