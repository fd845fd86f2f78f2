//! `workload.variables[*]`: each declaration's keys, name, type, default and constraints, and
//! [`check_value`], which checks one value (a default or a resolved parameter) against its
//! declaration.

use super::*;

/// What the rest of the validator needs to know about a declared variable.
#[derive(Clone, Debug)]
pub(super) struct VarFacts {
    pub(super) ty: Option<String>,
    pub(super) required: bool,
    pub(super) constraints: Constraints,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Constraints {
    pub(super) allowed_keys: Option<Vec<String>>,
    pub(super) minimum: Option<f64>,
    pub(super) maximum: Option<f64>,
    pub(super) pattern: Option<regex::Regex>,
}

pub(super) fn validate_variables(
    r: &mut Report,
    v: Option<&Value>,
    root: &Ctx,
) -> BTreeMap<String, VarFacts> {
    let ctx = root.f("variables");
    let mut out = BTreeMap::new();
    let Some(Value::Array(items)) = v else {
        r.at(&ctx, "must be an array");
        return out;
    };
    let mut prev: Option<String> = None;
    for (i, item) in items.iter().enumerate() {
        let c = ctx.i(i);
        let o = object(r, Some(item), &c);
        closed(
            r,
            o,
            &c,
            &[
                "constraints",
                "default",
                "description",
                "name",
                "required",
                "type",
            ],
        );
        let mut name: Option<String> = None;
        if let Some(n) = nonempty_str(r, o, "name", &c) {
            if !VARIABLE_NAME.is_match(n) {
                r.at(&c.f("name"), "has invalid variable syntax");
            } else if RESERVED_PLACEHOLDERS.contains(&n) {
                r.at(
                    &c.f("name"),
                    format!("{} is runner-owned and reserved", repr(n)),
                );
            } else {
                name = Some(n.to_owned());
            }
        }
        nonempty_str(r, o, "description", &c);
        let ty = one_of(r, o, "type", &c, &VARIABLE_TYPES).map(str::to_owned);
        let required = boolean(r, o, "required", &c).unwrap_or(false);
        let default = o.get("default").unwrap_or(&Value::Null);
        if required && !default.is_null() {
            r.at(&c.f("default"), "must be null when required=true");
        }
        let constraints =
            validate_constraints(r, o.get("constraints"), &c.f("constraints"), ty.as_deref());
        if !default.is_null() {
            if let Some(t) = &ty {
                check_value(r, default, t, &constraints, &c.f("default"));
            }
        }
        if let Some(n) = o.get("name").and_then(Value::as_str) {
            if let Some(p) = &prev {
                if p.as_str() == n {
                    r.raw(
                        &c.f("name").ptr,
                        format!("workload.variables contains duplicate name {}", repr(n)),
                    );
                } else if p.as_str() > n {
                    r.raw(
                        &ctx.ptr,
                        "workload.variables must use ascending name order".into(),
                    );
                }
            }
            if !n.is_empty() {
                prev = Some(n.to_owned());
            }
        }
        if let Some(n) = name {
            out.entry(n).or_insert(VarFacts {
                ty,
                required,
                constraints,
            });
        }
    }
    out
}

pub(super) fn type_matches(v: &Value, ty: &str) -> bool {
    match ty {
        "string" => matches!(v, Value::String(_)),
        "integer" => matches!(v, Value::Number(Number::Int(_))),
        "number" => matches!(v, Value::Number(_)),
        "boolean" => matches!(v, Value::Bool(_)),
        _ => false,
    }
}

/// Python `Decimal(str(v)).normalize()` text, the sort key of `number` allowed values.
pub(super) fn decimal_normal_text(v: &Value) -> String {
    let text = match v {
        Value::Number(Number::Int(i)) => i.to_string(),
        Value::Number(Number::Float(f)) => qual_json::python_float_repr(*f),
        other => return to_canonical_string(other),
    };
    let (neg, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r.to_owned()),
        None => (false, text.clone()),
    };
    let (mant, exp) = match rest.split_once(['e', 'E']) {
        Some((m, e)) => (m.to_owned(), e.parse::<i64>().unwrap_or(0)),
        None => (rest.clone(), 0),
    };
    let (ip, fp) = mant.split_once('.').unwrap_or((&mant, ""));
    let mut digits = format!("{ip}{fp}");
    let mut e = exp - fp.len() as i64;
    let t = digits.trim_start_matches('0').to_owned();
    digits = t;
    if digits.is_empty() {
        return "0".into();
    }
    while digits.ends_with('0') {
        digits.pop();
        e += 1;
    }
    let adjusted = e + digits.len() as i64 - 1;
    let body = if e <= 0 && adjusted >= -6 {
        let point = digits.len() as i64 + e;
        if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if e == 0 {
            digits.clone()
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        }
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.clone()
        };
        format!(
            "{m}E{}{}",
            if adjusted < 0 { "-" } else { "+" },
            adjusted.abs()
        )
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

pub(super) fn allowed_key(v: &Value, ty: &str) -> String {
    if ty == "number" {
        decimal_normal_text(v)
    } else {
        format!("{}\u{0}{}", v.python_type_name(), to_canonical_string(v))
    }
}

pub(super) fn validate_constraints(
    r: &mut Report,
    v: Option<&Value>,
    c: &Ctx,
    ty: Option<&str>,
) -> Constraints {
    let o = object(r, v, c);
    closed(
        r,
        o,
        c,
        &["allowed_values", "maximum", "minimum", "pattern"],
    );
    let mut out = Constraints::default();
    match o.get("allowed_values") {
        Some(Value::Array(items)) => {
            let mut keys = Vec::new();
            let mut all_typed = true;
            for (k, item) in items.iter().enumerate() {
                if let Some(t) = ty {
                    if !type_matches(item, t) {
                        r.at(
                            &c.f("allowed_values").i(k),
                            format!("must have declared type {}", repr(t)),
                        );
                        all_typed = false;
                        continue;
                    }
                    keys.push(allowed_key(item, t));
                }
            }
            let unique: BTreeSet<&String> = keys.iter().collect();
            if unique.len() != keys.len() {
                r.at(&c.f("allowed_values"), "contains duplicates");
            }
            let mut sorted = keys.clone();
            sorted.sort();
            if sorted != keys {
                r.at(&c.f("allowed_values"), "must use canonical sorted order");
            }
            if ty.is_some() && all_typed && !keys.is_empty() {
                out.allowed_keys = Some(keys);
            }
        }
        _ => r.at(&c.f("allowed_values"), "must be an array"),
    }
    let min = o.get("minimum").unwrap_or(&Value::Null);
    let max = o.get("maximum").unwrap_or(&Value::Null);
    let pat = o.get("pattern").unwrap_or(&Value::Null);
    match ty {
        Some("integer" | "number") => {
            for (key, val) in [("minimum", min), ("maximum", max)] {
                if !val.is_null() {
                    match finite_number(val) {
                        Some(f) => {
                            if key == "minimum" {
                                out.minimum = Some(f)
                            } else {
                                out.maximum = Some(f)
                            }
                        }
                        None => r.at(&c.f(key), "must be null or finite numeric"),
                    }
                }
            }
            if let (Some(a), Some(b)) = (out.minimum, out.maximum) {
                if a > b {
                    r.at(&c.f("minimum"), "cannot exceed maximum");
                }
            }
            if !pat.is_null() {
                r.at(&c.f("pattern"), "is only valid for string variables");
            }
        }
        Some("string") => {
            if !min.is_null() || !max.is_null() {
                r.at(
                    &c.f("minimum/maximum"),
                    "are only valid for numeric variables",
                );
            }
            if !pat.is_null() {
                match pat {
                    Value::String(p) if !p.is_empty() => match pattern::compile_full(p) {
                        Ok(re) => out.pattern = Some(re),
                        Err(e) => r.at(&c.f("pattern"), format!("is invalid: {e}")),
                    },
                    _ => r.at(&c.f("pattern"), "must be a non-empty string"),
                }
            }
        }
        Some("boolean") if !min.is_null() || !max.is_null() || !pat.is_null() => {
            r.at(
                c,
                "numeric/pattern fields must be null for boolean variables",
            );
        }
        _ => {}
    }
    out
}

pub(super) fn check_value(r: &mut Report, v: &Value, ty: &str, cons: &Constraints, c: &Ctx) {
    if !type_matches(v, ty) {
        r.at(c, format!("must have declared type {}", repr(ty)));
        return;
    }
    if let Some(keys) = &cons.allowed_keys {
        if !keys.contains(&allowed_key(v, ty)) {
            r.at(c, "is not one of the declared allowed_values");
        }
    }
    if let Some(f) = finite_number(v) {
        if cons.minimum.is_some_and(|m| f < m) {
            r.at(c, "is less than the declared minimum");
        }
        if cons.maximum.is_some_and(|m| f > m) {
            r.at(c, "is greater than the declared maximum");
        }
    }
    if let (Some(re), Value::String(s)) = (&cons.pattern, v) {
        if !re.is_match(s) {
            r.at(c, "does not match the declared pattern");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_keys_match_python() {
        let k = |t: &str| decimal_normal_text(&qual_json::from_str(t).unwrap());
        assert_eq!(k("10"), "1E+1");
        assert_eq!(k("0"), "0");
        assert_eq!(k("0.5"), "0.5");
        assert_eq!(k("1.0"), "1");
        assert_eq!(k("12"), "12");
        assert_eq!(k("120"), "1.2E+2");
        assert_eq!(k("0.0000001"), "1E-7");
        assert_eq!(k("-2.5"), "-2.5");
    }
}
