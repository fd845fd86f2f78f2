//! `workload.variants[*]`: a variant's keys, id, backend and device rules, its
//! `effective_config` tree, its cases (each checked by [`super::case`]) and the limits over
//! all of them (timeout budget, case executions, required variables). [`VariantFacts`] is what
//! the later whole-workload and policy checks need to know about a variant.

use super::*;

#[derive(Clone, Debug, Default)]
pub(super) struct CaseContract {
    pub(super) required: Option<bool>,
    pub(super) metrics: BTreeSet<String>,
    pub(super) producer: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct VariantFacts {
    pub(super) id: Option<String>,
    pub(super) backend: Option<String>,
    pub(super) config: Option<Value>,
    pub(super) references: BTreeSet<String>,
    pub(super) seed_in_argv: bool,
    pub(super) seed_in_env: bool,
    pub(super) uses_model: bool,
    /// Case id -> contract (first occurrence wins).
    pub(super) contracts: BTreeMap<String, CaseContract>,
}

/// One variant, in the original's order: keys, id, description, backend and device rules,
/// `effective_config`, its cases, then the limits over all of them (timeout budget, case
/// executions, command-produced cases for a config, required variables consumed).
pub(super) fn validate_variant(
    r: &mut Report,
    item: &Value,
    c: &Ctx,
    declared: &BTreeSet<String>,
    vars: &BTreeMap<String, VarFacts>,
    repetitions: Option<u64>,
) -> VariantFacts {
    let mut facts = VariantFacts::default();
    let o = object(r, Some(item), c);
    closed(
        r,
        o,
        c,
        &[
            "backend",
            "cases",
            "description",
            "device_requirement",
            "effective_config",
            "id",
            "skip_policy",
        ],
    );
    if let Some(id) = nonempty_str(r, o, "id", c) {
        if !IDENTIFIER.is_match(id) {
            r.at(&c.f("id"), "has invalid identifier syntax");
        }
        facts.id = Some(id.to_owned());
    }
    nonempty_str(r, o, "description", c);
    let backend = one_of(r, o, "backend", c, &BACKENDS);
    facts.backend = backend.map(str::to_owned);
    let device = one_of(r, o, "device_requirement", c, &DEVICE_REQUIREMENTS);
    let skip = one_of(r, o, "skip_policy", c, &SKIP_POLICIES);
    if backend.is_some_and(|b| ACCELERATOR_BACKENDS.contains(&b)) && device != Some("required") {
        r.at(
            c,
            "accelerator backend requires device_requirement='required'",
        );
    }
    if device == Some("required") && skip == Some("allow") {
        r.at(c, "required device cannot allow skipped cases");
    }
    let config_ok = validate_config(r, o.get("effective_config"), &c.f("effective_config"));
    if config_ok {
        facts.config = o.get("effective_config").cloned();
    }
    let config_nonempty =
        matches!(o.get("effective_config"), Some(Value::Object(m)) if !m.is_empty());

    let cctx = c.f("cases");
    let CasesSummary {
        all_timeouts_valid,
        timeout_sum,
        n_cases,
        any_required,
        all_command,
    } = check_cases(r, o, &cctx, declared, &mut facts);
    if !any_required {
        r.at(&cctx, "must contain at least one required case");
    }
    if let Some(reps) = repetitions {
        if all_timeouts_valid && reps.saturating_mul(timeout_sum) > MAX_DECLARED_WALL_SECONDS {
            r.at(
                c,
                format!("declared timeout budget exceeds {MAX_DECLARED_WALL_SECONDS} seconds"),
            );
        }
        if reps.saturating_mul(n_cases) > MAX_CASE_EXECUTIONS {
            r.at(
                c,
                format!("declares more than {MAX_CASE_EXECUTIONS} case executions"),
            );
        }
    }
    if config_nonempty && !all_command {
        r.at(
            c,
            "non-empty effective_config requires command-produced cases",
        );
    }
    let missing: Vec<&str> = vars
        .iter()
        .filter(|(n, v)| v.required && !facts.references.contains(*n))
        .map(|(n, _)| n.as_str())
        .collect();
    if !missing.is_empty() {
        r.at(
            c,
            format!(
                "does not consume required variables: {}",
                missing.join(", ")
            ),
        );
    }
    facts
}

/// What the variant-level limits need to know about its cases.
struct CasesSummary {
    all_timeouts_valid: bool,
    timeout_sum: u64,
    n_cases: u64,
    any_required: bool,
    all_command: bool,
}

/// `cases`: a non-empty array, each case checked by [`validate_case`], ids unique (the first
/// occurrence's contract kept).
fn check_cases(
    r: &mut Report,
    o: &Object,
    cctx: &Ctx,
    declared: &BTreeSet<String>,
    facts: &mut VariantFacts,
) -> CasesSummary {
    let mut all_timeouts_valid = true;
    let mut timeout_sum: u64 = 0;
    let mut n_cases: u64 = 0;
    let mut any_required = false;
    let mut all_command = true;
    match o.get("cases") {
        Some(Value::Array(cases)) if !cases.is_empty() => {
            let mut seen = BTreeSet::new();
            for (j, case) in cases.iter().enumerate() {
                n_cases += 1;
                let cf = validate_case(r, case, &cctx.i(j), declared, facts);
                match cf.timeout {
                    Some(t) => timeout_sum += t,
                    None => all_timeouts_valid = false,
                }
                if cf.contract.required == Some(true) {
                    any_required = true;
                }
                if cf.contract.producer.as_deref() != Some("command") {
                    all_command = false;
                }
                if let Some(id) = cf.id {
                    if !seen.insert(id.clone()) {
                        r.at(cctx, format!("contains duplicate id {}", repr(&id)));
                    } else {
                        facts.contracts.insert(id, cf.contract);
                    }
                }
            }
        }
        _ => {
            r.at(cctx, "must be a non-empty array");
            all_timeouts_valid = false;
        }
    }
    CasesSummary {
        all_timeouts_valid,
        timeout_sum,
        n_cases,
        any_required,
        all_command,
    }
}

/// Validates an effective_config tree; returns whether it is valid.
pub(super) fn validate_config(r: &mut Report, v: Option<&Value>, c: &Ctx) -> bool {
    let Some(Value::Object(o)) = v else {
        r.at(c, "must be an object");
        return false;
    };
    let mut ok = true;
    for (k, val) in o.iter() {
        if !CONFIG_KEY.is_match(k) {
            r.at(
                c,
                format!("key {} must be a dot-path-compatible segment", repr(k)),
            );
            ok = false;
            continue;
        }
        match val {
            Value::Object(_) => ok &= validate_config(r, Some(val), &c.f(k)),
            Value::Null | Value::String(_) | Value::Bool(_) => {}
            Value::Number(n) if n.as_f64().is_some() => {}
            _ => {
                r.at(&c.f(k), "must be a finite JSON scalar or nested object");
                ok = false;
            }
        }
    }
    ok
}
