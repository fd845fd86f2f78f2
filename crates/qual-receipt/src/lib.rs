//! qual-receipt: see docs/design.md (work in progress).
