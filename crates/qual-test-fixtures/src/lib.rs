//! qual-test-fixtures: see docs/design.md (work in progress).
