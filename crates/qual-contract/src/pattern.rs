//! Regular expressions declared by workloads (variable `pattern`, output assertion `pattern`).
//!
//! The original implementation uses Python's `re`. We use the `regex` crate (linear time, no
//! catastrophic backtracking on untrusted output), after translating the few Python spellings
//! that differ (`\Z` → `\z`). Python features that `regex` cannot express (look-around,
//! back-references, possessive or atomic groups) are refused at validation time with a clear
//! message: a deliberate, documented difference. None of the real Kiln workloads use them.
//!
//! Python `re.search` is unanchored; `re.fullmatch` is emulated by wrapping in `^(?:…)$` with
//! `\z`-style anchoring. Output assertions are searched in multi-line mode (`(?m)`, as the
//! original's `re.MULTILINE`).
//!
//! This module is the only place a workload pattern is compiled: `workload check` validates
//! an output assertion with [`compile_assertion`], the very function the runner evaluates it
//! with, so the same translation and the same [`SIZE_LIMIT`] apply and a workload that passes
//! the check never fails at run time on its own pattern.

use regex::{Regex, RegexBuilder};

/// The most heap a compiled pattern may use (the `regex` crate's default, stated so that
/// validation and evaluation cannot drift apart).
pub const SIZE_LIMIT: usize = 10 * (1 << 20);

fn build(translated: &str) -> Result<Regex, String> {
    RegexBuilder::new(translated)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| first_line(&e.to_string()))
}

/// Compiles a workload pattern for unanchored search.
pub fn compile_search(pattern: &str) -> Result<Regex, String> {
    build(&translate(pattern)?)
}

/// Compiles a workload pattern for full-match use (Python `re.fullmatch`).
pub fn compile_full(pattern: &str) -> Result<Regex, String> {
    let inner = translate(pattern)?;
    build(&format!(r"\A(?:{inner})\z"))
}

/// Compiles an output assertion exactly as the runner evaluates it: unanchored, multi-line.
pub fn compile_assertion(pattern: &str) -> Result<Regex, String> {
    build(&format!("(?m){}", translate(pattern)?))
}

fn translate(pattern: &str) -> Result<String, String> {
    for (needle, what) in [
        ("(?=", "look-ahead"),
        ("(?!", "negative look-ahead"),
        ("(?<=", "look-behind"),
        ("(?<!", "negative look-behind"),
        ("(?>", "atomic groups"),
    ] {
        if pattern.contains(needle) {
            return Err(format!(
                "{what} is not supported by kiln-qual's linear-time regex engine"
            ));
        }
    }
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('Z') => out.push_str("\\z"),
                Some(d @ '1'..='9') => {
                    return Err(format!(
                    "back-reference \\{d} is not supported by kiln-qual's linear-time regex engine"
                ))
                }
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => return Err("bad escape (end of pattern)".into()),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

fn first_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .trim_start_matches("error: ")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_and_fullmatch() {
        assert!(compile_search("(?i)error")
            .unwrap()
            .is_match("an ERROR here"));
        let full = compile_full("^.+$").unwrap();
        assert!(full.is_match("abc"));
        assert!(!compile_full("ab").unwrap().is_match("abc"));
        assert!(compile_full(r"a\Z").unwrap().is_match("a"));
    }

    #[test]
    fn assertions_translate_and_respect_the_size_limit() {
        let re = compile_assertion(r"^done\Z").unwrap();
        assert!(re.is_match("start\ndone"));
        assert!(!re.is_match("done\nmore"));
        let e = compile_assertion(r"\w{1000}{1000}").unwrap_err();
        assert!(e.contains("size limit"), "{e}");
        assert!(compile_assertion("(").is_err());
    }

    #[test]
    fn refusals_are_explained() {
        assert!(compile_search("(?=x)").unwrap_err().contains("look-ahead"));
        assert!(compile_search(r"(a)\1")
            .unwrap_err()
            .contains("back-reference"));
        assert!(compile_search("(").is_err());
    }
}
