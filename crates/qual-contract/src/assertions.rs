//! Output assertions evaluated on a case's captured output: the runner judges each execution
//! with [`failures`], and `receipt verify` re-judges the retained logs with the same function.
//!
//! Streams: `stdout`, `stderr`, and `combined` = stdout + `"\n"` + stderr, each decoded as
//! UTF-8 with replacement. A pattern is compiled by [`crate::pattern::compile_assertion`] (the
//! same translation and limits as `workload check`) and searched in multi-line mode.
//! An assertion on a stream whose middle was dropped by the bounded capture cannot be decided
//! and fails.

use crate::{Match, OutputAssertion, Stream};

/// One captured stream: the kept bytes and whether bytes were dropped.
#[derive(Clone, Copy, Debug)]
pub struct Captured<'a> {
    /// The kept bytes (head and tail when truncated).
    pub bytes: &'a [u8],
    /// Whether the capture dropped bytes.
    pub truncated: bool,
}

/// The failure text of every assertion that fails, in declared order (empty: all hold).
pub fn failures(
    assertions: &[OutputAssertion],
    stdout: Captured<'_>,
    stderr: Captured<'_>,
) -> Vec<String> {
    let so = String::from_utf8_lossy(stdout.bytes);
    let se = String::from_utf8_lossy(stderr.bytes);
    let mut out = Vec::new();
    for a in assertions {
        let (name, text, truncated) = match a.stream {
            Stream::Stdout => ("stdout", so.to_string(), stdout.truncated),
            Stream::Stderr => ("stderr", se.to_string(), stderr.truncated),
            Stream::Combined => (
                "combined",
                format!("{so}\n{se}"),
                stdout.truncated || stderr.truncated,
            ),
        };
        let (kind, verb) = match a.r#match {
            Match::Required => ("required", "did not match"),
            Match::Forbidden => ("forbidden", "matched"),
        };
        if truncated {
            out.push(format!(
                "{kind} {name} pattern cannot be evaluated on truncated output: {}",
                a.pattern
            ));
            continue;
        }
        match crate::pattern::compile_assertion(&a.pattern) {
            Ok(re) => {
                let found = re.is_match(&text);
                let bad = match a.r#match {
                    Match::Required => !found,
                    Match::Forbidden => found,
                };
                if bad {
                    out.push(format!("{kind} {name} pattern {verb}: {}", a.pattern));
                }
            }
            Err(e) => out.push(format!("{kind} {name} pattern is not a valid regex: {e}")),
        }
    }
    out
}
