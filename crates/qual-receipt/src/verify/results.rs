//! The results: each execution's `case-result.json` against the runner's record of it
//! (containment, exit code, the output assertions re-judged on the retained logs, the runner
//! metrics), then the aggregated results compared field by field with the receipt's.

use super::*;

fn metric_from(v: &Value) -> Option<Metric> {
    Some(Metric {
        name: get(v, "/name").as_str()?.to_owned(),
        value: match get(v, "/value") {
            Value::Number(n) => n.clone(),
            _ => return None,
        },
        unit: get(v, "/unit").as_str()?.to_owned(),
        aggregation: get(v, "/aggregation").as_str()?.to_owned(),
        lower_is_better: get(v, "/lower_is_better").as_bool()?,
    })
}

/// The exit code the runner derives from its containment record (`None`: never started).
fn return_code(termination: &Value) -> Option<i64> {
    let n = |k: &str| get(termination, k).as_int().and_then(|i| i.as_i64());
    match get(termination, "/status").as_str()? {
        "exited" => n("/code"),
        "signaled" => n("/signal").map(|s| -s),
        _ => n("/signal_used").map(|s| -s),
    }
}

/// Checks one execution's case result against the runner's record of it; returns the
/// outcome to aggregate.
fn execution(
    v: &mut Verifier<'_>,
    case: &qual_contract::Case,
    dir_rel: &str,
    record: Option<&Value>,
) -> Option<ExecutionOutcome> {
    let file = format!("{dir_rel}/case-result.json");
    let result = v.load(&file)?;
    let base = format!("{}/{file}", v.run_dir_rel);
    let ptr = |p: &str| format!("{base}#{p}");
    v.differs(
        &ptr("/case_id"),
        get(&result, "/case_id"),
        &Value::from(case.id.as_str()),
        "its directory names",
    );
    let status = get(&result, "/status")
        .as_str()
        .and_then(ResultStatus::parse);
    let Some(status) = status else {
        v.push(ptr("/status"), "is not a result status");
        return None;
    };
    let metrics: Vec<Metric> = get(&result, "/metrics")
        .as_array()
        .map(|ms| ms.iter().filter_map(metric_from).collect())
        .unwrap_or_default();
    let outcome = ExecutionOutcome {
        status,
        duration_seconds: get(&result, "/duration_seconds").as_f64().unwrap_or(-1.0),
        metrics,
        details: get(&result, "/details").as_str().map(str::to_owned),
    };
    let Some(record) = record else {
        v.push(
            ptr(""),
            "has no execution record in run-config.json (/cases)",
        );
        return Some(outcome);
    };
    let containment = get(record, "/containment");
    let rc = return_code(get(containment, "/termination"));
    let mut reasons = Vec::new();
    if !rc.is_some_and(|rc| case.expected_exit_codes.iter().any(|c| i64::from(*c) == rc)) {
        reasons.push(match rc {
            Some(rc) => format!("exit code {rc} is not expected"),
            None => "the command never ran".to_owned(),
        });
    }
    if get(containment, "/residue")
        .as_array()
        .is_some_and(|r| !r.is_empty())
    {
        reasons.push("descendant processes were left running".to_owned());
    }
    if get(containment, "/pipes_closed").as_bool() == Some(false) {
        reasons.push("output pipes stayed open".to_owned());
    }
    let runner = case.result_protocol.producer == Producer::Runner;
    let failed_assertions = rejudge_assertions(v, case, dir_rel, containment, &base);
    if let Some(failed) = &failed_assertions {
        if !failed.is_empty() {
            reasons.push(format!("the retained output fails: {}", failed.join("; ")));
        }
    }
    check_runner_metrics(
        v,
        &base,
        &outcome,
        rc,
        failed_assertions.as_ref(),
        runner,
        &mut reasons,
    );
    if status != ResultStatus::Failed && !reasons.is_empty() {
        v.push(
            ptr("/status"),
            format!(
                "is {}, but the runner's record shows {}",
                jstr(status.as_str()),
                reasons.join("; ")
            ),
        );
    }
    Some(outcome)
}

/// The output assertions, re-judged on the retained logs with the runner's own code (`None`
/// when the case never ran or its logs are unreadable, the latter reported).
fn rejudge_assertions(
    v: &mut Verifier<'_>,
    case: &qual_contract::Case,
    dir_rel: &str,
    containment: &Value,
    base: &str,
) -> Option<Vec<String>> {
    let ptr = |p: &str| format!("{base}#{p}");
    if containment.is_null() {
        None
    } else {
        // Logs hold at most the runner's capture bound (16 MiB per stream); regular files only.
        let log = |name: &str| {
            qual_json::file::read_regular_file(&v.run_dir.join(dir_rel).join(name), 64 << 20)
                .ok()
                .flatten()
                .ok_or(())
        };
        match (log("stdout.log"), log("stderr.log")) {
            (Ok(so), Ok(se)) => {
                let captured = |bytes, stream: &str| qual_contract::assertions::Captured {
                    bytes,
                    truncated: get(containment, &format!("/{stream}/truncated")).as_bool()
                        == Some(true),
                };
                Some(qual_contract::assertions::failures(
                    &case.output_assertions,
                    captured(&so, "stdout"),
                    captured(&se, "stderr"),
                ))
            }
            _ => {
                v.push(
                    ptr(""),
                    "has no readable stdout.log and stderr.log beside it",
                );
                None
            }
        }
    }
}

/// The runner metrics of one execution: `exit_code` against the containment record,
/// `output_assertion_failures` against the re-judged logs, `case_pass` against the status;
/// adds to `reasons` what makes the execution a failure.
fn check_runner_metrics(
    v: &mut Verifier<'_>,
    base: &str,
    outcome: &ExecutionOutcome,
    rc: Option<i64>,
    failed_assertions: Option<&Vec<String>>,
    runner: bool,
    reasons: &mut Vec<String>,
) {
    let ptr = |p: &str| format!("{base}#{p}");
    let status = outcome.status;
    for m in &outcome.metrics {
        let value = m.value.as_f64().unwrap_or(0.0);
        if runner && m.name == "exit_code" {
            let expected = Value::from(rc.unwrap_or(-1));
            v.differs(
                &ptr(&format!(
                    "/metrics/{}/value",
                    metric_index(outcome, &m.name)
                )),
                &Value::Number(m.value.clone()),
                &expected,
                "the runner's containment record gives exit code",
            );
        }
        if runner && m.name == "output_assertion_failures" {
            if value > 0.0 {
                reasons.push(format!("{value} output assertions failed"));
            }
            if let Some(failed) = failed_assertions {
                v.differs(
                    &ptr(&format!(
                        "/metrics/{}/value",
                        metric_index(outcome, &m.name)
                    )),
                    &Value::Number(m.value.clone()),
                    &Value::from(failed.len() as u64),
                    "the retained output re-judged by the workload's assertions gives",
                );
            }
        }
        if runner && m.name == "case_pass" && (value == 1.0) != (status == ResultStatus::Passed) {
            v.push(
                ptr(&format!(
                    "/metrics/{}/value",
                    metric_index(outcome, &m.name)
                )),
                format!(
                    "is case_pass {}, but the status is {}",
                    json(&Value::Number(m.value.clone())),
                    jstr(status.as_str())
                ),
            );
        }
    }
}

fn metric_index(o: &ExecutionOutcome, name: &str) -> usize {
    o.metrics.iter().position(|m| m.name == name).unwrap_or(0)
}

pub(super) fn verify_results(v: &mut Verifier<'_>, receipt: &Value, config: &Value, w: &Workload) {
    let variant_id = get(config, "/variant_id").as_str().unwrap_or_default();
    let Some(variant) = w.variant(variant_id) else {
        return;
    };
    let infra: Vec<String> = get(config, "/infrastructure_failures")
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let records: Vec<&Value> = get(config, "/cases")
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let reps = w.determinism.repetitions.max(1);
    let mut expected: Vec<CaseResultEntry> = Vec::new();
    if get(config, "/pre_case_failure").is_null() {
        let executions = reps * variant.cases.len() as u64;
        v.differs(
            &format!("{}/run-config.json#/case_execution_count", v.run_dir_rel),
            get(config, "/case_execution_count"),
            &Value::from(executions),
            "the workload declares cases × repetitions",
        );
        for (i, case) in variant.cases.iter().enumerate() {
            let mut outcomes = Vec::new();
            for r in 1..=reps {
                let dir_rel = format!("cases/{:03}-{}-r{r:03}", i + 1, case.id);
                let record = records.iter().copied().find(|x| {
                    get(x, "/case_id").as_str() == Some(&case.id)
                        && get(x, "/repetition").as_int().and_then(|n| n.as_u64()) == Some(r)
                });
                if !v.run_dir.join(&dir_rel).is_dir() {
                    let shown = format!("{}/{dir_rel}", v.run_dir_rel);
                    v.push(
                        result_pointer(receipt, &case.id),
                        format!(
                            "repetition {r} of case {} has no case directory ({shown} is absent)",
                            jstr(&case.id)
                        ),
                    );
                    continue;
                }
                if let Some(o) = execution(v, case, &dir_rel, record) {
                    outcomes.push(o);
                }
            }
            if outcomes.is_empty() {
                continue;
            }
            expected.push(aggregate_case(
                &case.id,
                case.required,
                case.result_protocol.producer == Producer::Runner,
                &outcomes,
            ));
        }
        if records.len() as u64 != executions {
            v.push(
                format!("{}/run-config.json#/cases", v.run_dir_rel),
                format!(
                    "records {} executions, the workload declares {executions}",
                    records.len()
                ),
            );
        }
    } else {
        expected = pre_case_results(v, config, variant, &infra);
    }
    apply_skip_policy(&mut expected, variant.skip_policy == SkipPolicy::Fail);
    apply_infrastructure_failures(&mut expected, &infra);
    let downgraded = get(receipt, "/notes")
        .as_array()
        .is_some_and(|n| n.iter().any(|x| x.as_str() == Some(DOWNGRADE_NOTE)));
    let mut downgraded_id = None;
    if downgraded && verdict(&expected) == Verdict::Passed {
        if let Some(r) = expected.iter_mut().find(|r| r.required) {
            r.status = ResultStatus::Failed;
            for m in r.metrics.iter_mut().filter(|m| m.name == "case_pass") {
                *m = runner_metric("case_pass", 0).expect("runner metric");
            }
            downgraded_id = Some(r.id.clone());
        }
    }
    compare_results(v, receipt, &expected, downgraded_id.as_deref());
    let recomputed = verdict(&expected);
    v.differs(
        "/qualification/verdict",
        get(receipt, "/qualification/verdict"),
        &Value::from(recomputed.as_str()),
        "the retained case results and the workload's required cases give",
    );
}

/// The results a run stopped before its first case must carry, by the recorded reason.
fn pre_case_results(
    v: &mut Verifier<'_>,
    config: &Value,
    variant: &qual_contract::Variant,
    infra: &[String],
) -> Vec<CaseResultEntry> {
    let cases = variant.cases.iter().map(|c| (c.id.as_str(), c.required));
    let reason = get(config, "/pre_case_failure");
    match reason.as_str() {
        // The runner recorded the initial fingerprint failure first.
        Some(PRE_CASE_MODEL) => unexecuted_results(
            cases,
            crate::details::join_details(&infra[..infra.len().min(1)]),
        ),
        Some(PRE_CASE_DEVICE) => match infra
            .iter()
            .find(|f| f.starts_with("required ") && f.contains(" device was not detected"))
        {
            Some(missing) => skipped_results(cases, format!("not executed: {missing}")),
            None => {
                v.push(
                    format!("{}/run-config.json#/pre_case_failure", v.run_dir_rel),
                    "names a missing device, but no infrastructure failure says which",
                );
                Vec::new()
            }
        },
        _ => {
            v.push(
                format!("{}/run-config.json#/pre_case_failure", v.run_dir_rel),
                format!(
                    "unknown pre-case failure {}",
                    qual_json::to_canonical_string(reason)
                ),
            );
            Vec::new()
        }
    }
}

fn result_pointer(receipt: &Value, id: &str) -> String {
    get(receipt, "/results")
        .as_array()
        .and_then(|rs| rs.iter().position(|r| get(r, "/id").as_str() == Some(id)))
        .map(|i| format!("/results/{i}"))
        .unwrap_or_else(|| "/results".to_owned())
}

fn compare_results(
    v: &mut Verifier<'_>,
    receipt: &Value,
    expected: &[CaseResultEntry],
    downgraded: Option<&str>,
) {
    let got: &[Value] = get(receipt, "/results")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (k, r) in got.iter().enumerate() {
        let id = get(r, "/id").as_str().unwrap_or_default();
        if !expected.iter().any(|e| e.id == id) {
            v.push(
                format!("/results/{k}"),
                format!(
                    "is case {}, which the workload's variant does not declare or the run directory does not hold",
                    jstr(id)
                ),
            );
        }
    }
    for (e_index, e) in expected.iter().enumerate() {
        let Some(k) = got
            .iter()
            .position(|r| get(r, "/id").as_str() == Some(&e.id))
        else {
            v.push(
                "/results",
                format!(
                    "lacks case {} ({}, {}), which the workload declares and the run directory holds",
                    jstr(&e.id),
                    if e.required { "required" } else { "optional" },
                    e.status.as_str()
                ),
            );
            continue;
        };
        if k != e_index {
            v.push(
                format!("/results/{k}/id"),
                format!(
                    "is case {} at position {k}, declared at position {e_index}",
                    jstr(&e.id)
                ),
            );
        }
        let r = &got[k];
        let p = |f: &str| format!("/results/{k}/{f}");
        let source = "the retained case results give";
        v.differs(
            &p("required"),
            get(r, "/required"),
            &Value::Bool(e.required),
            "the workload declares",
        );
        v.differs(
            &p("status"),
            get(r, "/status"),
            &Value::from(e.status.as_str()),
            source,
        );
        v.differs(
            &p("duration_seconds"),
            get(r, "/duration_seconds"),
            &Value::from(e.duration_seconds),
            source,
        );
        let metrics: &[Value] = get(r, "/metrics")
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (j, m) in metrics.iter().enumerate() {
            let name = get(m, "/name").as_str().unwrap_or_default();
            match e.metrics.iter().find(|x| x.name == name) {
                None => v.push(
                    p(&format!("metrics/{j}")),
                    format!(
                        "is metric {}, which the retained case results do not report",
                        jstr(name)
                    ),
                ),
                Some(x) => v.diff(&p(&format!("metrics/{j}")), m, &x.to_value(), source),
            }
        }
        for x in &e.metrics {
            if !metrics
                .iter()
                .any(|m| get(m, "/name").as_str() == Some(&x.name))
            {
                v.push(
                    p("metrics"),
                    format!(
                        "lacks metric {} = {}",
                        jstr(&x.name),
                        json(&Value::Number(x.value.clone()))
                    ),
                );
            }
        }
        let details = get(r, "/details");
        if downgraded == Some(e.id.as_str()) {
            if !details
                .as_str()
                .is_some_and(|d| d.contains("runner validation failed: "))
            {
                v.push(
                    p("details"),
                    "lacks the runner's validation failure, although the receipt says it was downgraded",
                );
            }
        } else {
            v.differs(
                &p("details"),
                details,
                &e.details.as_deref().map(Value::from).unwrap_or(Value::Null),
                source,
            );
        }
    }
}
