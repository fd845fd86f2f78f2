//! `workload.variants[*].cases[*]`: a case's keys, id, command argv, working directory,
//! environment, timeout, expected exit codes, output assertions and result protocol, and the
//! placeholders its argv and environment reference.

use super::*;

pub(super) struct CaseFacts {
    pub(super) id: Option<String>,
    pub(super) timeout: Option<u64>,
    pub(super) contract: CaseContract,
}

pub(super) fn scan_placeholder(
    r: &mut Report,
    s: &str,
    c: &Ctx,
    declared: &BTreeSet<String>,
    facts: &mut VariantFacts,
    is_argv: bool,
) {
    if let Some(name) = placeholder_name(s) {
        match name {
            "seed" => {
                if is_argv {
                    facts.seed_in_argv = true
                } else {
                    facts.seed_in_env = true
                }
            }
            "model_path" => facts.uses_model = true,
            "host_id" => {}
            other => {
                if !declared.contains(other) {
                    r.at(c, format!("references undeclared variable {}", repr(other)));
                }
                facts.references.insert(other.to_owned());
            }
        }
    } else if s.contains("${") {
        r.at(
            c,
            "placeholders must occupy the entire argv or environment value",
        );
    }
}

/// One case, its fields in the original's order: keys, id, description, required, command,
/// working directory, environment, timeout, exit codes, output assertions, result protocol.
pub(super) fn validate_case(
    r: &mut Report,
    item: &Value,
    c: &Ctx,
    declared: &BTreeSet<String>,
    facts: &mut VariantFacts,
) -> CaseFacts {
    let o = object(r, Some(item), c);
    closed(
        r,
        o,
        c,
        &[
            "command",
            "description",
            "environment",
            "expected_exit_codes",
            "id",
            "output_assertions",
            "required",
            "result_protocol",
            "timeout_seconds",
            "working_directory",
        ],
    );
    let mut out = CaseFacts {
        id: None,
        timeout: None,
        contract: CaseContract::default(),
    };
    if let Some(id) = nonempty_str(r, o, "id", c) {
        if !IDENTIFIER.is_match(id) {
            r.at(&c.f("id"), "has invalid identifier syntax");
        }
        out.id = Some(id.to_owned());
    }
    nonempty_str(r, o, "description", c);
    out.contract.required = boolean(r, o, "required", c);

    check_command(r, o, c, declared, facts);
    check_working_directory(r, o, c);
    check_environment(r, o, c, declared, facts);
    out.timeout = positive_int(r, o, "timeout_seconds", c, MAX_CASE_TIMEOUT_SECONDS);

    check_exit_codes(r, o, c);
    check_output_assertions(r, o, c);
    check_result_protocol(r, o, c, &mut out.contract);
    out
}

/// `command`: a non-empty argv of non-empty strings, no variable as the executable, Cargo only
/// through the bounded wrapper, no shell command-string evaluation; records its placeholders.
fn check_command(
    r: &mut Report,
    o: &Object,
    c: &Ctx,
    declared: &BTreeSet<String>,
    facts: &mut VariantFacts,
) {
    // command
    let cmd_ctx = c.f("command");
    match o.get("command") {
        Some(Value::Array(argv)) if !argv.is_empty() => {
            for (k, a) in argv.iter().enumerate() {
                match a {
                    Value::String(s) if !s.is_empty() => {
                        if k == 0 && placeholder_name(s).is_some() {
                            r.at(&cmd_ctx.i(0), "executable cannot be a variable");
                        } else {
                            scan_placeholder(r, s, &cmd_ctx.i(k), declared, facts, true);
                        }
                    }
                    _ => r.at(&cmd_ctx.i(k), "must be a non-empty string"),
                }
            }
            if let Some(Value::String(exe)) = argv.first() {
                let lower = exe.to_lowercase();
                let base = lower.rsplit('/').next().unwrap_or(&lower);
                if base == "cargo" {
                    r.at(
                        &cmd_ctx,
                        "must route Cargo through scripts/qualification/cargo-test-bounded.sh",
                    );
                }
                if SHELLS.contains(&base)
                    && argv[1..].iter().any(|a| {
                        a.as_str()
                            .is_some_and(|s| SHELL_EVAL_FLAGS.contains(&s.to_lowercase().as_str()))
                    })
                {
                    r.at(&cmd_ctx, "cannot use shell command-string evaluation");
                }
            }
        }
        _ => r.at(&cmd_ctx, "must be a non-empty argv array"),
    }
}

/// `working_directory`: a repository-relative POSIX path that stays in the repository, not at
/// or below a top-level directory that is read-only to cases.
fn check_working_directory(r: &mut Report, o: &Object, c: &Ctx) {
    // working directory
    if let Some(wd) = nonempty_str(r, o, "working_directory", c) {
        if wd.contains('\\') {
            r.at(
                &c.f("working_directory"),
                "must use repository-relative POSIX syntax",
            );
        } else if wd.starts_with('/') || wd.split('/').any(|p| p == "..") {
            r.at(&c.f("working_directory"), "must stay within the repository");
        } else if let Some(top) = wd
            .split('/')
            .find(|p| !p.is_empty() && *p != ".")
            .filter(|p| PROTECTED_TOP_LEVEL.contains(p))
        {
            r.at(
                &c.f("working_directory"),
                format!("must not be at or below {top}, which is read-only to cases"),
            );
        }
    }
}

/// `environment`: key syntax, non-empty string values (their placeholders recorded), no
/// override of a runner-owned variable.
fn check_environment(
    r: &mut Report,
    o: &Object,
    c: &Ctx,
    declared: &BTreeSet<String>,
    facts: &mut VariantFacts,
) {
    // environment
    let ectx = c.f("environment");
    match o.get("environment") {
        Some(Value::Object(env)) => {
            for (k, v) in env.iter() {
                if !ENV_KEY.is_match(k) {
                    r.at(&ectx, format!("key {} has invalid syntax", repr(k)));
                }
                match v {
                    Value::String(s) if !s.is_empty() => {
                        scan_placeholder(r, s, &ectx.f(k), declared, facts, false)
                    }
                    _ => r.at(&ectx.f(k), "must be a non-empty string"),
                }
            }
            for owned in RUNNER_OWNED_ENVIRONMENT {
                if env.contains_key(owned) {
                    r.at(&ectx, format!("cannot override runner-owned {owned}"));
                }
            }
        }
        _ => r.at(&ectx, "must be an object"),
    }
}

/// `expected_exit_codes`: a non-empty, unique, ascending list of integers 0..=255.
fn check_exit_codes(r: &mut Report, o: &Object, c: &Ctx) {
    // exit codes
    let xctx = c.f("expected_exit_codes");
    match o.get("expected_exit_codes") {
        Some(Value::Array(codes)) if !codes.is_empty() => {
            let mut order = Ascending::new();
            let mut seen = BTreeSet::new();
            for (k, code) in codes.iter().enumerate() {
                match code.as_int().and_then(|i| i.as_u64()).filter(|v| *v <= 255) {
                    Some(v) => {
                        // Non-adjacent repeats count as duplicates too.
                        order.duplicate |= !seen.insert(v);
                        order.push(v);
                    }
                    None => r.at(&xctx.i(k), "must be an integer from 0 through 255"),
                }
            }
            order.report(r, &xctx);
        }
        _ => r.at(&xctx, "must be a non-empty array"),
    }
}

/// `output_assertions[*]`: keys, stream, match, a valid pattern, no duplicate assertion.
fn check_output_assertions(r: &mut Report, o: &Object, c: &Ctx) {
    // output assertions
    let actx = c.f("output_assertions");
    match o.get("output_assertions") {
        Some(Value::Array(items)) => {
            let mut seen = BTreeSet::new();
            for (k, item) in items.iter().enumerate() {
                let ac = actx.i(k);
                let a = object(r, Some(item), &ac);
                closed(r, a, &ac, &["match", "pattern", "stream"]);
                let stream = one_of(r, a, "stream", &ac, &STREAMS);
                let m = one_of(r, a, "match", &ac, &MATCHES);
                let p = nonempty_str(r, a, "pattern", &ac);
                if let Some(p) = p {
                    if let Err(e) = pattern::validate_assertion(p) {
                        r.at(&ac.f("pattern"), format!("is invalid: {e}"));
                    }
                }
                if let (Some(s), Some(m), Some(p)) = (stream, m, p) {
                    if !seen.insert((s.to_owned(), m.to_owned(), p.to_owned())) {
                        r.at(&actx, "contains a duplicate assertion");
                    }
                }
            }
        }
        _ => r.at(&actx, "must be an array"),
    }
}

/// `result_protocol`: keys, format, producer, path variable, declared metrics (syntax, unique,
/// ascending) and which metrics the producer may declare; fills the case's contract.
fn check_result_protocol(r: &mut Report, o: &Object, c: &Ctx, contract: &mut CaseContract) {
    // result protocol
    let pctx = c.f("result_protocol");
    let p = object(r, o.get("result_protocol"), &pctx);
    closed(
        r,
        p,
        &pctx,
        &[
            "declared_metrics",
            "format",
            "path_environment_variable",
            "producer",
        ],
    );
    if p.get("format").and_then(Value::as_str) != Some(RESULT_FORMAT) {
        r.at(&pctx.f("format"), format!("must be '{RESULT_FORMAT}'"));
    }
    let producer = one_of(r, p, "producer", &pctx, &PRODUCERS);
    contract.producer = producer.map(str::to_owned);
    if p.get("path_environment_variable").and_then(Value::as_str) != Some(RESULT_PATH_VARIABLE) {
        r.at(
            &pctx.f("path_environment_variable"),
            format!("must be '{RESULT_PATH_VARIABLE}'"),
        );
    }
    let mctx = pctx.f("declared_metrics");
    let mut metrics: Vec<String> = Vec::new();
    match p.get("declared_metrics") {
        Some(Value::Array(items)) => {
            let mut order = Ascending::new();
            for (k, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) if !s.is_empty() => {
                        if !METRIC_NAME.is_match(s) {
                            r.at(&mctx.i(k), "has invalid metric syntax");
                        }
                        order.push(s.as_str());
                        metrics.push(s.clone());
                    }
                    _ => r.at(&mctx.i(k), "must be a non-empty string"),
                }
            }
            order.report(r, &mctx);
        }
        _ => r.at(&mctx, "must be an array"),
    }
    match producer {
        Some("runner") => {
            let bad = metric_names_where(&metrics, |m| runner_metric(m).is_none());
            if !bad.is_empty() {
                r.at(&pctx, format!("runner cannot produce metrics: {bad}"));
            }
            if !metrics.iter().any(|m| m == "case_pass") {
                r.at(&pctx, "runner must declare the case_pass metric");
            }
        }
        Some("command") => {
            let bad = metric_names_where(&metrics, |m| runner_metric(m).is_some());
            if !bad.is_empty() {
                r.at(
                    &pctx,
                    format!("command cannot declare runner-owned metrics: {bad}"),
                );
            }
        }
        _ => {}
    }
    contract.metrics = metrics.into_iter().collect();
}

/// The sorted, unique names matching `pred`, joined by `, ` (empty when none).
pub(super) fn metric_names_where(metrics: &[String], pred: impl Fn(&str) -> bool) -> String {
    let names: BTreeSet<&str> = metrics
        .iter()
        .map(String::as_str)
        .filter(|m| pred(m))
        .collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}
