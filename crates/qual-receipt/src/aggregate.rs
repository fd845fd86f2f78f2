//! Per-execution outcomes to per-case results: repetition aggregation, the skip policy,
//! infrastructure failures and the verdict.
//!
//! - status over repetitions: any `failed` → failed, else any `skipped` → skipped, else passed;
//! - duration: the sum of the repetitions' monotonic durations;
//! - metrics: one repetition keeps its metrics; several must have the same names and the same
//!   (unit, aggregation, lower_is_better) per name. Runner metrics: `case_pass` is 1 only when
//!   every repetition passed, `exit_code` must agree, `output_assertion_failures` is summed.
//!   Command metrics become the mean with aggregation `mean_of_<n>_<aggregation>`: an exact
//!   integer mean when every value is an integer and the sum divides evenly, else a float mean
//!   of a compensated (Neumaier) sum; a non-finite or underflowing mean fails the case;
//! - skip policy `fail`: any skipped result fails the FIRST required result;
//! - infrastructure failures fail every required result (and zero its `case_pass`);
//! - verdict: passed iff every required result passed.

use crate::model::{CaseResultEntry, Metric, ResultStatus, Verdict};
use qual_json::{Int, Number};

use crate::details::join_details;

/// One execution's normalized outcome.
#[derive(Clone, Debug)]
pub struct ExecutionOutcome {
    /// Status after contract checks.
    pub status: ResultStatus,
    /// Runner-measured duration.
    pub duration_seconds: f64,
    /// Metrics.
    pub metrics: Vec<Metric>,
    /// Details.
    pub details: Option<String>,
}

/// The canonical runner metric `name` with `value`.
pub fn runner_metric(name: &str, value: i64) -> Option<Metric> {
    let d = qual_contract::constants::runner_metric(name)?;
    Some(Metric {
        name: d.name.into(),
        value: Number::Int(Int::from(value)),
        unit: d.unit.into(),
        aggregation: d.aggregation.into(),
        lower_is_better: d.lower_is_better,
    })
}

fn int_value(n: &Number) -> Option<i128> {
    match n {
        Number::Int(i) => i.as_i128(),
        Number::Float(_) => None,
    }
}

fn mean(values: &[Number]) -> Result<Number, String> {
    let n = values.len() as i128;
    if let Some(ints) = values.iter().map(int_value).collect::<Option<Vec<i128>>>() {
        let mut total: i128 = 0;
        for v in ints {
            total = total.checked_add(v).ok_or("integer overflow")?;
        }
        if total % n == 0 {
            return Ok(Number::Int(Int::from_parts(
                total < 0,
                &(total / n).unsigned_abs().to_string(),
            )));
        }
        let f = total as f64 / n as f64;
        return if f.is_finite() {
            Ok(Number::Float(f))
        } else {
            Err("non-finite mean".into())
        };
    }
    let floats: Vec<f64> = values
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect();
    // Neumaier compensated sum.
    let mut sum = 0.0f64;
    let mut c = 0.0f64;
    for x in &floats {
        let t = sum + x;
        if sum.abs() >= x.abs() {
            c += (sum - t) + x;
        } else {
            c += (x - t) + sum;
        }
        sum = t;
    }
    let total = sum + c;
    if !total.is_finite() {
        return Err("could not be aggregated: float overflow".into());
    }
    let m = total / n as f64;
    if !m.is_finite() {
        return Err("produced a non-finite mean".into());
    }
    if m == 0.0 && floats.iter().any(|x| *x != 0.0) && total != 0.0 {
        return Err("mean underflowed to zero".into());
    }
    Ok(Number::Float(if m == 0.0 { 0.0 } else { m }))
}

/// Aggregates the repetitions of one case.
pub fn aggregate_case(
    id: &str,
    required: bool,
    runner_producer: bool,
    reps: &[ExecutionOutcome],
) -> CaseResultEntry {
    let status = if reps.iter().any(|r| r.status == ResultStatus::Failed) {
        ResultStatus::Failed
    } else if reps.iter().any(|r| r.status == ResultStatus::Skipped) {
        ResultStatus::Skipped
    } else {
        ResultStatus::Passed
    };
    let duration_seconds = reps.iter().map(|r| r.duration_seconds).sum();
    let mut details: Vec<String> = reps.iter().filter_map(|r| r.details.clone()).collect();
    let mut status = status;
    let metrics = if reps.len() == 1 {
        reps[0].metrics.clone()
    } else {
        match aggregate_metrics(runner_producer, reps) {
            Ok(m) => m,
            Err(e) => {
                status = ResultStatus::Failed;
                details.push(e);
                Vec::new()
            }
        }
    };
    let mut entry = CaseResultEntry {
        id: id.into(),
        required,
        status,
        duration_seconds,
        metrics,
        details: join_details(&details),
    };
    if runner_producer {
        let pass = i64::from(entry.status == ResultStatus::Passed);
        for m in entry.metrics.iter_mut().filter(|m| m.name == "case_pass") {
            *m = runner_metric("case_pass", pass).expect("runner metric");
        }
    }
    entry
}

fn aggregate_metrics(runner: bool, reps: &[ExecutionOutcome]) -> Result<Vec<Metric>, String> {
    let names: Vec<&str> = reps[0].metrics.iter().map(|m| m.name.as_str()).collect();
    for r in &reps[1..] {
        let other: Vec<&str> = r.metrics.iter().map(|m| m.name.as_str()).collect();
        if other != names {
            return Err("repetition metric names were inconsistent".into());
        }
    }
    let mut out = Vec::new();
    for (k, first) in reps[0].metrics.iter().enumerate() {
        let all: Vec<&Metric> = reps.iter().map(|r| &r.metrics[k]).collect();
        if all.iter().any(|m| {
            (m.unit.as_str(), m.aggregation.as_str(), m.lower_is_better)
                != (
                    first.unit.as_str(),
                    first.aggregation.as_str(),
                    first.lower_is_better,
                )
        }) {
            return Err(format!(
                "repetition metric definition for {} was inconsistent",
                qual_json::show::quote(&first.name)
            ));
        }
        let values: Vec<Number> = all.iter().map(|m| m.value.clone()).collect();
        if runner {
            let ints: Vec<i64> = values
                .iter()
                .map(|v| match v {
                    Number::Int(i) => i.as_i64().unwrap_or(0),
                    Number::Float(f) => *f as i64,
                })
                .collect();
            let value = match first.name.as_str() {
                "case_pass" => i64::from(ints.iter().all(|v| *v == 1)),
                "exit_code" => {
                    if ints.windows(2).any(|w| w[0] != w[1]) {
                        return Err("exit_code differed across repetitions".into());
                    }
                    ints[0]
                }
                _ => ints.iter().sum(),
            };
            out.push(runner_metric(&first.name, value).unwrap_or_else(|| first.clone()));
        } else {
            let value = mean(&values).map_err(|e| {
                format!(
                    "repetition metric {} {e}",
                    qual_json::show::quote(&first.name)
                )
            })?;
            out.push(Metric {
                name: first.name.clone(),
                value,
                unit: first.unit.clone(),
                aggregation: format!("mean_of_{}_{}", reps.len(), first.aggregation),
                lower_is_better: first.lower_is_better,
            });
        }
    }
    Ok(out)
}

/// The results of a run whose cases never executed (the initial model fingerprint failed):
/// every required case failed, every optional one skipped, no duration, no metrics, the same
/// details.
pub fn unexecuted_results<'a>(
    cases: impl IntoIterator<Item = (&'a str, bool)>,
    details: Option<String>,
) -> Vec<CaseResultEntry> {
    not_executed(cases, details, |required| {
        if required {
            ResultStatus::Failed
        } else {
            ResultStatus::Skipped
        }
    })
}

fn not_executed<'a>(
    cases: impl IntoIterator<Item = (&'a str, bool)>,
    details: Option<String>,
    status: impl Fn(bool) -> ResultStatus,
) -> Vec<CaseResultEntry> {
    cases
        .into_iter()
        .map(|(id, required)| CaseResultEntry {
            id: id.into(),
            required,
            status: status(required),
            duration_seconds: 0.0,
            metrics: Vec::new(),
            details: details.clone(),
        })
        .collect()
}

/// `run-config.json`'s `pre_case_failure` when the initial model fingerprint failed.
pub const PRE_CASE_MODEL: &str = "initial_model_fingerprint";

/// `run-config.json`'s `pre_case_failure` when the variant requires a device the backend probe
/// did not detect (a kiln-qual extension: the original ran the cases anyway).
pub const PRE_CASE_DEVICE: &str = "required_device_not_detected";

/// The results of a variant none of whose cases ran because its required device is absent:
/// every case `skipped` with `details`, so that the variant's skip policy decides
/// ([`apply_skip_policy`]; `fail`, the only policy a required device allows, fails the first
/// required result) and the infrastructure failure fails the others.
pub fn skipped_results<'a>(
    cases: impl IntoIterator<Item = (&'a str, bool)>,
    details: String,
) -> Vec<CaseResultEntry> {
    not_executed(cases, Some(details), |_| ResultStatus::Skipped)
}

/// Applies `skip_policy: fail`: any skipped result fails the first required one.
pub fn apply_skip_policy(results: &mut [CaseResultEntry], fail_on_skip: bool) {
    if !fail_on_skip || !results.iter().any(|r| r.status == ResultStatus::Skipped) {
        return;
    }
    if let Some(r) = results.iter_mut().find(|r| r.required) {
        r.status = ResultStatus::Failed;
        let mut parts: Vec<String> = r.details.iter().cloned().collect();
        parts.push("variant skip_policy forbids skipped cases".into());
        r.details = join_details(&parts);
        zero_case_pass(r);
    }
}

fn zero_case_pass(r: &mut CaseResultEntry) {
    for m in r.metrics.iter_mut().filter(|m| m.name == "case_pass") {
        *m = runner_metric("case_pass", 0).expect("runner metric");
    }
}

/// Fails every required result with the infrastructure failures.
pub fn apply_infrastructure_failures(results: &mut [CaseResultEntry], failures: &[String]) {
    if failures.is_empty() {
        return;
    }
    for r in results.iter_mut().filter(|r| r.required) {
        r.status = ResultStatus::Failed;
        let mut parts: Vec<String> = r.details.iter().cloned().collect();
        parts.extend(failures.iter().cloned());
        r.details = join_details(&parts);
        zero_case_pass(r);
    }
}

/// The verdict.
pub fn verdict(results: &[CaseResultEntry]) -> Verdict {
    if results
        .iter()
        .filter(|r| r.required)
        .all(|r| r.status == ResultStatus::Passed)
    {
        Verdict::Passed
    } else {
        Verdict::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(status: ResultStatus, metrics: Vec<Metric>) -> ExecutionOutcome {
        ExecutionOutcome {
            status,
            duration_seconds: 1.0,
            metrics,
            details: None,
        }
    }

    fn cmd_metric(v: Number) -> Metric {
        Metric {
            name: "m".into(),
            value: v,
            unit: "ms".into(),
            aggregation: "p50".into(),
            lower_is_better: true,
        }
    }

    #[test]
    fn command_means_keep_integer_identity_and_name_the_aggregation() {
        let big = Number::Int(Int::from(9007199254740993u64));
        let r = aggregate_case(
            "c",
            true,
            false,
            &[
                out(ResultStatus::Passed, vec![cmd_metric(big.clone())]),
                out(ResultStatus::Passed, vec![cmd_metric(big.clone())]),
            ],
        );
        assert_eq!(r.metrics[0].value, big);
        assert_eq!(r.metrics[0].aggregation, "mean_of_2_p50");
        assert_eq!(r.duration_seconds, 2.0);
        let r = aggregate_case(
            "c",
            true,
            false,
            &[
                out(
                    ResultStatus::Passed,
                    vec![cmd_metric(Number::Float(5e-324))],
                ),
                out(
                    ResultStatus::Passed,
                    vec![cmd_metric(Number::Float(5e-324))],
                ),
            ],
        );
        assert_eq!(r.metrics[0].value, Number::Float(5e-324));
        let r = aggregate_case(
            "c",
            true,
            false,
            &[
                out(
                    ResultStatus::Passed,
                    vec![cmd_metric(Number::Float(f64::MAX))],
                ),
                out(
                    ResultStatus::Passed,
                    vec![cmd_metric(Number::Float(f64::MAX))],
                ),
                out(
                    ResultStatus::Passed,
                    vec![cmd_metric(Number::Float(f64::MAX))],
                ),
            ],
        );
        assert_eq!(r.status, ResultStatus::Failed);
        assert!(r.details.unwrap().contains("could not be aggregated"));
    }

    #[test]
    fn runner_metrics_agree_sum_and_force_case_pass() {
        let m = |pass, code, fails| {
            vec![
                runner_metric("case_pass", pass).unwrap(),
                runner_metric("exit_code", code).unwrap(),
                runner_metric("output_assertion_failures", fails).unwrap(),
            ]
        };
        let r = aggregate_case(
            "c",
            true,
            true,
            &[
                out(ResultStatus::Passed, m(1, 0, 0)),
                out(ResultStatus::Failed, m(0, 0, 1)),
            ],
        );
        assert_eq!(r.status, ResultStatus::Failed);
        assert_eq!(r.metrics[0].value, Number::Int(Int::from(0i64)));
        assert_eq!(r.metrics[2].value, Number::Int(Int::from(1i64)));
        assert_eq!(r.metrics[2].aggregation, "sum");
        let r = aggregate_case(
            "c",
            true,
            true,
            &[
                out(ResultStatus::Passed, m(1, 0, 0)),
                out(ResultStatus::Passed, m(1, 2, 0)),
            ],
        );
        assert!(r.details.unwrap().contains("exit_code differed"));
    }

    #[test]
    fn skip_policy_infrastructure_and_verdict() {
        let mut rs = vec![
            aggregate_case("a", false, false, &[out(ResultStatus::Skipped, vec![])]),
            aggregate_case("b", true, false, &[out(ResultStatus::Passed, vec![])]),
        ];
        assert_eq!(verdict(&rs), Verdict::Passed);
        apply_skip_policy(&mut rs, true);
        assert_eq!(rs[1].status, ResultStatus::Failed);
        assert_eq!(verdict(&rs), Verdict::Failed);
        let mut rs = vec![aggregate_case(
            "b",
            true,
            true,
            &[out(
                ResultStatus::Passed,
                vec![runner_metric("case_pass", 1).unwrap()],
            )],
        )];
        apply_infrastructure_failures(
            &mut rs,
            &["source tree changed during qualification".into()],
        );
        assert_eq!(rs[0].status, ResultStatus::Failed);
        assert_eq!(rs[0].metrics[0].value, Number::Int(Int::from(0i64)));
    }
}
