//! The integration tests of `qual-receipt`, linked as one test binary (one link instead of one
//! per file on a 2-core machine): comparison modes, properties and the validator's rules, over
//! the hand-written fixtures of `common`.

mod common;
mod compare_modes;
mod properties;
mod validate_rules;
