//! qual-exec: see docs/design.md (work in progress).
