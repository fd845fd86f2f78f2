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
//! This module is the only place a workload pattern is compiled. `workload check` validates
//! an output assertion with [`validate_assertion`], which accepts exactly the patterns that
//! [`compile_assertion`] (what the runner evaluates with) compiles, so a workload that passes
//! the check never fails at run time on its own pattern. Validation does not build the
//! matcher: compiling a matcher (forward and reverse automata, prefilters) cost about 0.3 ms
//! per assertion and was 70% of `workload check`. It parses the translated pattern with
//! `regex-syntax`, the parser the `regex` crate itself uses, with the same settings, which
//! gives the same syntax errors with the same text; the one other way compilation fails, the
//! [`SIZE_LIMIT`], is decided by an upper bound on the automaton's size computed from the
//! parsed pattern ([`nfa_size_bound`]): below half the limit the pattern certainly compiles,
//! otherwise the real compiler decides. The bound is hand-written because no crate exposes
//! one; a property test checks it against the real compiler's limit.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::{Regex, RegexBuilder};
use regex_syntax::hir::{Class, Hir, HirKind};

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

/// Whether [`compile_assertion`] would compile `pattern`, with the same error text when it
/// would not, without building the matcher (see the module docs). Verdicts are remembered
/// for the process: the real workloads repeat the same assertion in many cases and variants.
pub fn validate_assertion(pattern: &str) -> Result<(), String> {
    static SEEN: LazyLock<Mutex<HashMap<String, Result<(), String>>>> =
        LazyLock::new(Mutex::default);
    let seen = |p: &str| {
        SEEN.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(p)
            .cloned()
    };
    if let Some(r) = seen(pattern) {
        return r;
    }
    let r = validate_uncached(pattern);
    SEEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pattern.to_owned(), r.clone());
    r
}

/// Longest pattern that [`is_short_literal`] answers for: its automaton (one state per byte,
/// [`nfa_size_bound`] counts 64 bytes each) stays far below half of [`SIZE_LIMIT`].
const MAX_LITERAL_BYTES: usize = 4096;

/// Whether `pattern` is a short plain literal: every character is either not a regex meta
/// character or a meta character escaped with `\` (`\[`, `\.`, `\(`…). Such a pattern
/// always parses (escaping a meta character is always allowed, every other character stands
/// for itself) and its automaton is far below the size limit, so it certainly compiles; most
/// output assertions of the real workloads are of this form (`\[CUDA TIER3 PASS\] …`).
/// Anything else (classes, groups, repetitions, flags, other escapes such as `\d`, `\Z` or
/// back-references, `#`, `&`, `-`, `~`) goes to the parser.
fn is_short_literal(pattern: &str) -> bool {
    if pattern.len() > MAX_LITERAL_BYTES {
        return false;
    }
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n) if regex_syntax::is_meta_character(n) => {}
                _ => return false,
            }
        } else if regex_syntax::is_meta_character(c) {
            return false;
        }
    }
    true
}

fn validate_uncached(pattern: &str) -> Result<(), String> {
    if is_short_literal(pattern) {
        return Ok(());
    }
    let translated = format!("(?m){}", translate(pattern)?);
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(&translated)
        .map_err(|e| first_line(&e.to_string()))?;
    if nfa_size_bound(&hir) <= SIZE_LIMIT / 2 {
        return Ok(());
    }
    build(&translated).map(drop)
}

// Upper bounds, in bytes, of what the `regex` crate's Thompson NFA builder counts against
// its size limit (`states * size_of::<State>() + transitions + union alternates`), generous
// on purpose: a state is 32 bytes there, a transition 8, an alternate 4.
const STATE: u64 = 64;
const TRANSITION: u64 = 16;
const ALTERNATE: u64 = 8;
/// One UTF-8 byte sequence of a Unicode class: at most four states, each with one transition,
/// and one alternate (forward or reverse compilation).
const UTF8_SEQUENCE: u64 = 4 * (STATE + TRANSITION) + ALTERNATE;
/// The fixed part around the pattern: unanchored prefix, the implicit capture group, match
/// and start states.
const FIXED: u64 = 64 * STATE;

/// An upper bound on the NFA builder memory the `regex` crate needs for `hir`, forward or
/// reverse (which it may build both of); saturating, so absurd repetitions read as huge.
pub fn nfa_size_bound(hir: &Hir) -> usize {
    usize::try_from(FIXED.saturating_add(bound(hir))).unwrap_or(usize::MAX)
}

fn bound(hir: &Hir) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => STATE,
        HirKind::Literal(lit) => (lit.0.len() as u64).saturating_mul(STATE),
        HirKind::Class(Class::Bytes(c)) => {
            2 * STATE + (c.ranges().len() as u64).saturating_mul(TRANSITION)
        }
        HirKind::Class(Class::Unicode(c)) => {
            let sequences: u64 = c
                .iter()
                .map(|r| regex_syntax::utf8::Utf8Sequences::new(r.start(), r.end()).count() as u64)
                .sum();
            4 * STATE + sequences.saturating_mul(UTF8_SEQUENCE)
        }
        HirKind::Capture(c) => bound(&c.sub).saturating_add(2 * STATE),
        HirKind::Concat(subs) => subs
            .iter()
            .fold(STATE, |acc, h| acc.saturating_add(bound(h))),
        HirKind::Alternation(subs) => subs.iter().fold(2 * STATE, |acc, h| {
            acc.saturating_add(bound(h)).saturating_add(ALTERNATE)
        }),
        HirKind::Repetition(r) => {
            // `{m,n}` compiles n copies (with a union each after the m-th); `{m,}` compiles
            // m copies and one looping copy (two when the body can match the empty string).
            let copies = match r.max {
                Some(max) => u64::from(max),
                None => u64::from(r.min) + 2,
            };
            copies
                .saturating_mul(bound(&r.sub).saturating_add(STATE + 2 * ALTERNATE))
                .saturating_add(4 * STATE)
        }
    }
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

    fn assertion_hir(p: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .build()
            .parse(&format!("(?m){}", translate(p).unwrap()))
            .unwrap()
    }

    #[test]
    fn validation_agrees_with_compilation_including_error_text() {
        for p in [
            "test result: ok",
            r"(?i)(no rocm device|skipp(?:ed|ing)[^\r\n]{0,160}rocm (?:device|test))",
            r"(?m)^GPU[0-9]+:$",
            r"\w{1000}{1000}",
            r"\w{300}",
            r"(?i)\w{120}",
            r"[^\r\n]{0,1000}",
            r"(?i)[a-z]{0,5000}",
            "(",
            "a{2,1}",
            "[z-a]",
            r"\p{NoSuchClass}",
            "x{1001}",
            r"\bword\b.*\d+",
            "(?=x)",
            r"(a)\1",
            r"end\Z",
        ] {
            let want = compile_assertion(p).map(drop);
            assert_eq!(validate_assertion(p), want, "{p}");
            // The memoised answer is the same.
            assert_eq!(validate_assertion(p), want, "{p}");
        }
    }

    #[test]
    fn short_literals_skip_the_parser_and_always_compile() {
        let longest = "\u{10348}".repeat(MAX_LITERAL_BYTES / 4);
        for p in [
            "test result: FAILED",
            r"\[CUDA TIER3 PASS\] one full SFT step on Device::Cuda\(0\)",
            r"matmul_matrix_core_f32_parity \.\.\. ok",
            r#"eval_completion="t1 t1""#,
            "",
            r"\\ \^\$\|\*\+\?\{\}",
            longest.as_str(),
        ] {
            assert!(is_short_literal(p), "{p}");
            assert_eq!(compile_assertion(p).map(drop), Ok(()), "{p}");
            assert_eq!(validate_assertion(p), Ok(()), "{p}");
        }
        for p in [
            r"a\d",
            r"end\Z",
            r"(a)\1",
            "a.b",
            "a-b",
            "a#b",
            "(?i)x",
            "x\\",
            r"\q",
            &"a".repeat(MAX_LITERAL_BYTES + 1),
        ] {
            assert!(!is_short_literal(p), "{p}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Whatever the characters, a pattern taken for a short literal compiles.
        #[test]
        fn a_short_literal_always_compiles(
            atoms in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", " ", "\"", ":", "=", "/", "é", "\u{1F600}", "\t", r"\.", r"\[", r"\]",
                    r"\(", r"\)", r"\\", r"\{", r"\}", r"\-", r"\#", r"\&", r"\~", r"\d",
                    r"\Z", "[", "(", "*", "\\", "{", "-", "#",
                ]),
                0..40,
            ),
        ) {
            let p: String = atoms.concat();
            if is_short_literal(&p) {
                proptest::prop_assert_eq!(compile_assertion(&p).map(drop), Ok(()), "{}", p);
            }
        }
    }

    #[test]
    fn the_size_bound_covers_real_patterns() {
        for p in [
            r"(?i)(no rocm device|skipp(?:ed|ing)[^\r\n]{0,160}rocm (?:device|test))",
            r"\w{300}",
            r"(?i)\w{50}|\d+|.{0,200}",
            r"(?:(?:a|b)*c?){3,20}",
        ] {
            let bound = nfa_size_bound(&assertion_hir(p));
            let translated = format!("(?m){}", translate(p).unwrap());
            assert!(
                RegexBuilder::new(&translated)
                    .size_limit(bound)
                    .build()
                    .is_ok(),
                "{p}: bound {bound} is too small"
            );
        }
        // The heaviest real Kiln assertion is decided on the bound, without compiling.
        let rocm = r"(?i)(no rocm device|skipp(?:ed|ing)[^\r\n]{0,160}rocm (?:device|test))";
        assert!(nfa_size_bound(&assertion_hir(rocm)) <= SIZE_LIMIT / 2);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever the pattern, the real compiler fits it in the computed bound, so a pattern
        /// accepted on the bound alone always compiles under [`SIZE_LIMIT`].
        #[test]
        fn the_size_bound_is_an_upper_bound(
            atoms in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "(?i)k", r"\w", r"\d", ".", r"[^\r\n]", r"\b", "^", "$", "(?:ab|c)",
                    "(x)", "[α-ω]", r"\s", r"(?i)\p{Greek}", "",
                ]),
                1..6,
            ),
            reps in proptest::collection::vec(
                proptest::sample::select(vec!["", "*", "+", "?", "{3}", "{0,40}", "{2,}", "{1,90}"]),
                6,
            ),
            outer in proptest::sample::select(vec!["", "{2}", "{0,7}", "*"]),
        ) {
            let body: String = atoms
                .iter()
                .zip(&reps)
                .map(|(a, r)| format!("(?:{a}){r}"))
                .collect::<Vec<_>>()
                .join("|");
            let p = format!("(?:{body}){outer}");
            let bound = nfa_size_bound(&assertion_hir(&p));
            let translated = format!("(?m){}", translate(&p).unwrap());
            proptest::prop_assert!(
                RegexBuilder::new(&translated).size_limit(bound).build().is_ok(),
                "{}: bound {} is too small", p, bound
            );
        }
    }
}
