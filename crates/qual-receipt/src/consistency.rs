//! Internal consistency of one receipt: rules that need no evidence beyond the document, so a
//! hand edit that leaves the receipt contradicting itself fails plain `receipt check`.
//!
//! These rules are kiln-qual's own (the original validator has none of them) and follow from
//! how every runner, ours and the original, writes a receipt:
//!
//! - a runner `case_pass` metric is `1` exactly when its result passed (the runner forces it to
//!   the final status, including after infrastructure failures);
//! - a result cannot pass with a positive `output_assertion_failures` (any assertion failure
//!   fails the execution);
//! - when the artifacts name case directories (`…/cases/<iii>-<case-id>-r<rrr>/<file>`), they
//!   name exactly the receipt's results, numbered in result order from `001`, each with the same
//!   repetitions `r001..rNNN` — so a dropped or added result, or a dropped repetition, shows
//!   unless every trace of it was removed consistently (which `receipt verify` then catches
//!   against the run directory).
//!
//! The verdict rules themselves (passed needs every required result passed, failed needs one
//! that did not) are in [`crate::validate`], with the original's wording.
//!
//! Only values that are well-formed are looked at: shape errors are reported by the validator
//! and never doubled here.

use std::collections::{BTreeMap, BTreeSet};

use qual_json::{Number, Value};

use crate::validate::Violation;

/// Every internal-consistency violation of a receipt document (empty when consistent).
pub fn check(receipt: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let results = receipt
        .get("results")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, r) in results.iter().enumerate() {
        metrics_against_status(r, i, &mut out);
    }
    let artifacts = receipt
        .get("artifacts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    case_directories(results, artifacts, &mut out);
    out
}

fn push(out: &mut Vec<Violation>, path: String, message: String) {
    out.push(Violation::new(path, message));
}

fn number_text(n: &Number) -> String {
    match n {
        Number::Int(i) => {
            let sign = if i.is_negative() { "-" } else { "" };
            format!("{sign}{}", i.digits())
        }
        Number::Float(f) => qual_json::python_float_repr(*f),
    }
}

fn metrics_against_status(result: &Value, i: usize, out: &mut Vec<Violation>) {
    let Some(status) = result.get("status").and_then(Value::as_str) else {
        return;
    };
    let Some(metrics) = result.get("metrics").and_then(Value::as_array) else {
        return;
    };
    let passed = status == "passed";
    for (j, m) in metrics.iter().enumerate() {
        let Some(Value::Number(value)) = m.get("value") else {
            continue;
        };
        let Some(v) = value.as_f64() else {
            continue;
        };
        match m.get("name").and_then(Value::as_str) {
            Some("case_pass") if (v == 1.0) != passed => push(
                out,
                format!("receipt.results[{i}].metrics[{j}].value"),
                format!(
                    "is case_pass {} but receipt.results[{i}].status is {}",
                    number_text(value),
                    qual_json::show::quote(status)
                ),
            ),
            Some("output_assertion_failures") if passed && v > 0.0 => push(
                out,
                format!("receipt.results[{i}].status"),
                format!(
                    "is 'passed' but receipt.results[{i}].metrics[{j}] counts {} output assertion failures",
                    number_text(value)
                ),
            ),
            _ => {}
        }
    }
}

/// `cases/<iii>-<case-id>-r<rrr>/<file>` at the end of an artifact path: (index, id, repetition).
pub fn case_directory(path: &str) -> Option<(u32, &str, u32)> {
    let mut parts = path.rsplit('/');
    let _file = parts.next()?;
    let dir = parts.next()?;
    if parts.next()? != "cases" {
        return None;
    }
    let digits = |s: &str| {
        (s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    let index = digits(dir.get(..3)?)?;
    let rest = dir.get(3..)?.strip_prefix('-')?;
    let (id, rep) = rest.rsplit_once("-r")?;
    Some((index, id, digits(rep)?))
}

fn case_directories(results: &[Value], artifacts: &[Value], out: &mut Vec<Violation>) {
    // (index, id) -> repetitions, and the first artifact naming each.
    let mut dirs: BTreeMap<(u32, &str), (BTreeSet<u32>, usize)> = BTreeMap::new();
    for (k, a) in artifacts.iter().enumerate() {
        let Some((index, id, rep)) = a
            .get("path")
            .and_then(Value::as_str)
            .and_then(case_directory)
        else {
            continue;
        };
        dirs.entry((index, id))
            .or_insert_with(|| (BTreeSet::new(), k))
            .0
            .insert(rep);
    }
    if dirs.is_empty() {
        return;
    }
    let ids: Vec<Option<&str>> = results
        .iter()
        .map(|r| r.get("id").and_then(Value::as_str))
        .collect();
    for (&(index, id), (_, k)) in &dirs {
        let expected = ids.iter().position(|x| *x == Some(id));
        match expected {
            None => push(
                out,
                format!("receipt.artifacts[{k}].path"),
                format!(
                    "names the case directory of {}, which receipt.results does not contain",
                    qual_json::show::quote(id)
                ),
            ),
            Some(pos) if pos as u32 + 1 != index => push(
                out,
                format!("receipt.artifacts[{k}].path"),
                format!(
                    "numbers case {} {index:03}, but it is receipt.results[{pos}] (expected {:03})",
                    qual_json::show::quote(id),
                    pos + 1
                ),
            ),
            Some(_) => {}
        }
    }
    let most = dirs.values().map(|(reps, _)| reps.len()).max().unwrap_or(0) as u32;
    for (i, id) in ids.iter().enumerate() {
        let Some(id) = id else { continue };
        let reps: BTreeSet<u32> = dirs
            .iter()
            .filter(|((_, d), _)| d == id)
            .flat_map(|(_, (reps, _))| reps.iter().copied())
            .collect();
        if reps.is_empty() {
            push(
                out,
                format!("receipt.results[{i}]"),
                "has no case artifacts, while the artifacts name case directories of other results"
                    .into(),
            );
        } else if reps != (1..=most).collect() {
            let listed: Vec<String> = reps.iter().map(|r| format!("r{r:03}")).collect();
            push(
                out,
                format!("receipt.results[{i}]"),
                format!(
                    "has case artifacts for repetitions {}, expected r001..r{most:03} like the other results",
                    listed.join(", ")
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_directory_paths_parse_exactly() {
        assert_eq!(
            case_directory(".qualification/runs/x/cases/002-a-b-r003/stdout.log"),
            Some((2, "a-b", 3))
        );
        assert_eq!(case_directory("cases/001-x-r001/f"), Some((1, "x", 1)));
        assert_eq!(case_directory("runs/x/cases/01-x-r001/f"), None);
        assert_eq!(case_directory("runs/x/case/001-x-r001/f"), None);
        assert_eq!(case_directory("runs/x/cases/001-x-r1/f"), None);
        assert_eq!(case_directory("001-x-r001/f"), None);
    }
}
