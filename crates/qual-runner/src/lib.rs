//! qual-runner: see docs/design.md (work in progress).
