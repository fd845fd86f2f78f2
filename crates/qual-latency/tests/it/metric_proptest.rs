//! Property tests for the `KILN_LATENCY_METRIC` line parser.

use proptest::prelude::*;
use qual_latency::metric::{match_metric_line, parse_metric_text, py_float, MetricLogError};

/// The original's regex, applied with the `regex` crate (whose `\s` equals Python's except
/// for U+001C..U+001F, which the generators below never produce).
fn reference_match(line: &str) -> Option<(String, String, String)> {
    let re =
        regex::Regex::new(r"^\s*KILN_LATENCY_METRIC\s+(\S+)\s+([-+0-9.eE]+)\s+(\S+)\s*$").unwrap();
    re.captures(line)
        .map(|c| (c[1].to_string(), c[2].to_string(), c[3].to_string()))
}

/// Python's `float()` grammar restricted to `[-+0-9.eE]`.
fn reference_float_ok(token: &str) -> bool {
    regex::Regex::new(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")
        .unwrap()
        .is_match(token)
}

fn ws() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop::sample::select(vec![' ', '\t', '\u{a0}', '\u{2003}', '\u{3000}']),
        1..3,
    )
    .prop_map(|v| v.into_iter().collect())
}

fn token() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_/µ%.-]{1,12}"
}

fn line_char() -> impl Strategy<Value = char> {
    prop::sample::select(vec![
        'K', 'I', 'L', 'N', '_', 'A', 'T', 'E', 'C', 'Y', 'M', 'R', ' ', '\t', '\u{a0}', '1', '.',
        'e', '-', '+', 'x', 'µ', 's',
    ])
}

proptest! {
    #[test]
    fn tokenizer_equals_the_original_regex(
        pieces in proptest::collection::vec(prop_oneof![
            Just("KILN_LATENCY_METRIC".to_string()),
            proptest::collection::vec(line_char(), 0..6).prop_map(|v| v.into_iter().collect::<String>()),
        ], 0..7)
    ) {
        let line = pieces.join(" ");
        let ours = match_metric_line(&line).map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
        prop_assert_eq!(ours, reference_match(&line));
    }

    #[test]
    fn float_grammar_matches_python(token in "[-+0-9.eE]{1,8}") {
        prop_assert_eq!(py_float(&token).is_some(), reference_float_ok(&token));
    }

    #[test]
    fn well_formed_lines_round_trip(
        lead in proptest::option::of(ws()),
        sep1 in ws(), sep2 in ws(), sep3 in ws(),
        trail in proptest::option::of(ws()),
        name in token(), unit in token(),
        value in -1.0e12f64..1.0e12f64,
        decimals in 0usize..9,
    ) {
        let raw = format!("{value:.decimals$}");
        let line = format!(
            "{}KILN_LATENCY_METRIC{sep1}{name}{sep2}{raw}{sep3}{unit}{}",
            lead.unwrap_or_default(),
            trail.unwrap_or_default()
        );
        let text = format!("noise before\n{line}\r\nnoise after\n");
        let obs = parse_metric_text(&text, "x.log").unwrap();
        prop_assert_eq!(obs.len(), 1);
        let o = &obs[&name];
        prop_assert_eq!(o.value, raw.parse::<f64>().unwrap());
        prop_assert_eq!(&o.unit, &unit);
        prop_assert_eq!(o.line, 2);
    }

    #[test]
    fn arbitrary_text_never_panics_and_results_are_sane(text in "\\PC{0,200}") {
        match parse_metric_text(&text, "x") {
            Ok(obs) => {
                prop_assert!(!obs.is_empty());
                prop_assert!(obs.values().all(|o| o.value.is_finite()));
            }
            Err(MetricLogError::Duplicate { line, .. }
                | MetricLogError::InvalidNumber { line, .. }
                | MetricLogError::NonFinite { line, .. }) => prop_assert!(line >= 1),
            Err(MetricLogError::NoMetricLines { .. }) => {}
            Err(MetricLogError::Unreadable { .. }) => prop_assert!(false, "text input cannot be unreadable"),
        }
    }

    #[test]
    fn second_occurrence_is_a_duplicate(name in token(), a in 0u32..1000, b in 0u32..1000, gap in 0usize..3) {
        let text = format!("KILN_LATENCY_METRIC {name} {a} ms\n{}KILN_LATENCY_METRIC {name} {b} us\n", "x\n".repeat(gap));
        let e = parse_metric_text(&text, "x").unwrap_err();
        prop_assert_eq!(e, MetricLogError::Duplicate { name: name.clone(), line: 2 + gap });
    }
}
