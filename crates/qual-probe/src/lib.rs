//! qual-probe: see docs/design.md (work in progress).
