//! qual-legacy: see docs/design.md (work in progress).
