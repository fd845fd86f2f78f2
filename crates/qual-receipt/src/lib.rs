//! Receipt v1: the data model and exclusive writer (used by the runner), the validator, the
//! comparator and the human rendering.

pub mod compare;
pub mod model;
pub mod render;
pub mod validate;
pub mod write;
