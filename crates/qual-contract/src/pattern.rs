//! Regular expressions declared by workloads (variable `pattern`, output assertion `pattern`).
//!
//! The original implementation uses Python's `re`. We use the `regex` crate (linear time, no
//! catastrophic backtracking on untrusted output), after translating the few Python spellings
//! that differ (`\Z` → `\z`). Python features that `regex` cannot express (look-around,
//! back-references, possessive or atomic groups) are refused at validation time with a clear
//! message: a deliberate, documented difference. None of the real Kiln workloads use them.
//!
//! Python `re.search` is unanchored; `re.fullmatch` is emulated by wrapping in `^(?:…)$` with
//! `\z`-style anchoring.

use regex::Regex;

/// Checks that a pattern is acceptable without building its automaton (validation runs over
/// thousands of patterns; a full compile costs far more than a syntax parse).
pub fn check_syntax(pattern: &str) -> Result<(), String> {
    let translated = translate(pattern)?;
    regex_syntax::ParserBuilder::new()
        .build()
        .parse(&translated)
        .map(|_| ())
        .map_err(|e| first_line(&e.to_string()))
}

/// Compiles a workload pattern for unanchored search.
pub fn compile_search(pattern: &str) -> Result<Regex, String> {
    Regex::new(&translate(pattern)?).map_err(|e| first_line(&e.to_string()))
}

/// Compiles a workload pattern for full-match use (Python `re.fullmatch`).
pub fn compile_full(pattern: &str) -> Result<Regex, String> {
    let inner = translate(pattern)?;
    Regex::new(&format!(r"\A(?:{inner})\z")).map_err(|e| first_line(&e.to_string()))
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
    fn syntax_check_agrees_with_compile() {
        for p in ["(?i)error", "a{2,3}", "[", "(", "x**", r"\d+", "(?m)^ok$"] {
            assert_eq!(check_syntax(p).is_ok(), compile_search(p).is_ok(), "{p}");
        }
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
