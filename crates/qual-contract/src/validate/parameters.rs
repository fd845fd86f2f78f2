//! A receipt's resolved `workload.parameters` against its workload: the variant id, exactly the
//! referenced variables, and each value against its declaration.

use super::*;

/// Validates a resolved parameter set (receipt `workload.parameters`) against a workload.
/// The workload itself should be valid; only the parameter rules are reported.
pub fn validate_workload_parameters(workload: &Value, parameters: &Value) -> Vec<Violation> {
    let mut r = Report::default();
    let pctx = Ctx::root("workload.parameters");
    let Some(params) = parameters.as_object() else {
        r.at(&pctx, "must be an object");
        return r.finish();
    };
    let vid = params.get("variant_id").and_then(Value::as_str);
    let variant = workload
        .get("variants")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("id").and_then(Value::as_str) == vid && vid.is_some())
        });
    let Some(variant) = variant else {
        r.at(&pctx.f("variant_id"), "must name a declared variant");
        return r.finish();
    };
    let refs = variant_references(variant);
    let mut expected: BTreeSet<String> = refs.clone();
    expected.insert("variant_id".into());
    let present: BTreeSet<String> = params.keys().cloned().collect();
    let missing: Vec<&str> = expected.difference(&present).map(String::as_str).collect();
    if !missing.is_empty() {
        r.at(
            &pctx,
            format!("missing resolved keys: {}", missing.join(", ")),
        );
    }
    let extra: Vec<&str> = present.difference(&expected).map(String::as_str).collect();
    if !extra.is_empty() {
        r.at(&pctx, format!("has undeclared keys: {}", extra.join(", ")));
    }
    let mut scratch = Report::default();
    let vars = validate_variables(
        &mut scratch,
        workload.get("variables"),
        &Ctx::root("workload"),
    );
    for name in &refs {
        let Some(value) = params.get(name) else {
            continue;
        };
        let c = pctx.f(name);
        let Some(var) = vars.get(name) else {
            r.at(&c, "has no variable declaration");
            continue;
        };
        let ty = var.ty.as_deref().unwrap_or("string");
        if ty == "number" && !matches!(value, Value::Number(Number::Float(_))) {
            r.at(&c, "must use canonical JSON float representation");
            continue;
        }
        check_value(&mut r, value, ty, &var.constraints, &c);
    }
    r.finish()
}

/// Non-reserved placeholder names referenced by a variant's case commands and environments.
pub fn variant_references(variant: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let cases = variant.get("cases").and_then(Value::as_array);
    for case in cases.into_iter().flatten() {
        let argv = case
            .get("command")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let env = case
            .get("environment")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|o| o.iter().map(|(_, v)| v));
        for v in argv.chain(env) {
            if let Some(name) = v.as_str().and_then(placeholder_name) {
                if !RESERVED_PLACEHOLDERS.contains(&name) {
                    out.insert(name.to_owned());
                }
            }
        }
    }
    out
}
