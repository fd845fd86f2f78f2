//! qual-serve: see docs/design.md (work in progress).
