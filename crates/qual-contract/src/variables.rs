//! Resolution of operator variables (`--var NAME=VALUE`) for one variant, and placeholder
//! substitution.
//!
//! Invariants: the resolved set has exactly the variant's non-reserved references as keys;
//! every value has the declared type (`number` always a float, `-0.0` folded to `0.0`) and
//! satisfies the declared constraints; a refusal lists every problem, not the first.

use crate::model::{VariableType, Workload};
use crate::{pattern, placeholder_name};
use qual_json::{python_float_repr, to_canonical_string, Int, Number, Value};
use std::collections::BTreeMap;

/// Resolved variables of one variant: name → typed value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResolvedVariables {
    /// Values by name (sorted).
    pub values: BTreeMap<String, Value>,
}

/// Runner-owned placeholder values.
#[derive(Clone, Debug, Default)]
pub struct RunnerValues {
    /// `${seed}` (None when the workload's seed is null).
    pub seed: Option<String>,
    /// `${model_path}`.
    pub model_path: Option<String>,
    /// `${host_id}`.
    pub host_id: Option<String>,
}

/// The non-reserved placeholder names referenced by a variant's cases.
pub fn selected_references(w: &Workload, variant_id: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(v) = w.variant(variant_id) {
        for c in &v.cases {
            for s in c.command.iter().chain(c.environment.values()) {
                if let Some(n) = placeholder_name(s) {
                    if !crate::constants::RESERVED_PLACEHOLDERS.contains(&n)
                        && !out.iter().any(|x| x == n)
                    {
                        out.push(n.to_owned());
                    }
                }
            }
        }
    }
    out.sort();
    out
}

/// Resolves `--var` assignments (`(name, raw value)`, in command-line order) for a variant.
pub fn resolve(
    w: &Workload,
    variant_id: &str,
    assignments: &[(String, String)],
) -> Result<ResolvedVariables, Vec<String>> {
    let refs = selected_references(w, variant_id);
    let mut errors = Vec::new();
    let mut supplied: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, raw) in assignments {
        if !w.variables.iter().any(|v| &v.name == name) {
            errors.push(format!(
                "unknown workload variable {}",
                qual_json::show::quote(name)
            ));
        } else if !refs.contains(name) {
            errors.push(format!(
                "workload variable {} is not used by the selected variant",
                qual_json::show::quote(name)
            ));
        } else if supplied.insert(name, raw).is_some() {
            errors.push(format!(
                "workload variable {} was supplied more than once",
                qual_json::show::quote(name)
            ));
        }
    }
    let mut values = BTreeMap::new();
    for name in &refs {
        let Some(var) = w.variables.iter().find(|v| &v.name == name) else {
            errors.push(format!(
                "selected variant references undeclared variable {name}"
            ));
            continue;
        };
        let value = match supplied.get(name.as_str()) {
            Some(raw) => match parse_typed(var.ty, raw) {
                Ok(v) => v,
                Err(reason) => {
                    errors.push(format!("invalid --var {name}: {reason}"));
                    continue;
                }
            },
            None => match &var.default {
                Some(d) => {
                    let v = Value::from_serde(d);
                    match (var.ty, &v) {
                        (VariableType::Number, Value::Number(n)) => {
                            Value::from(n.as_f64().unwrap_or(0.0))
                        }
                        _ => v,
                    }
                }
                None => {
                    errors.push(format!(
                        "selected variant references variable {}, but no value or default was provided",
                        qual_json::show::quote(name)
                    ));
                    continue;
                }
            },
        };
        let c = &var.constraints;
        if !c.allowed_values.is_empty() {
            let ok = c.allowed_values.iter().any(|a| {
                let a = Value::from_serde(a);
                match var.ty {
                    VariableType::Number => a.as_f64() == value.as_f64(),
                    _ => {
                        a.python_type_name() == value.python_type_name()
                            && to_canonical_string(&a) == to_canonical_string(&value)
                    }
                }
            });
            if !ok {
                errors.push(format!("--var {name} is not one of its allowed values"));
            }
        }
        if let Some(f) = value.as_f64() {
            if let Some(m) = c.minimum.filter(|m| f < *m) {
                errors.push(format!("--var {name} is below its minimum {m}"));
            }
            if let Some(m) = c.maximum.filter(|m| f > *m) {
                errors.push(format!("--var {name} is above its maximum {m}"));
            }
        }
        if let (Some(p), Value::String(s)) = (&c.pattern, &value) {
            match pattern::compile_full(p) {
                Ok(re) if re.is_match(s) => {}
                _ => errors.push(format!("--var {name} does not match its declared pattern")),
            }
        }
        values.insert(name.clone(), value);
    }
    if errors.is_empty() {
        Ok(ResolvedVariables { values })
    } else {
        Err(errors)
    }
}

/// Parses a `--var` value by declared type.
pub fn parse_typed(ty: VariableType, raw: &str) -> Result<Value, String> {
    match ty {
        VariableType::String => Ok(Value::String(raw.to_owned())),
        VariableType::Integer => {
            let digits = raw.strip_prefix('-').unwrap_or(raw);
            let ok = !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0'));
            if !ok {
                return Err("expected a base-10 integer".into());
            }
            if digits.len() > 4096 {
                return Err("integer exceeds 4096 digits".into());
            }
            Ok(Value::Number(Number::Int(Int::from_parts(
                raw.starts_with('-'),
                digits,
            ))))
        }
        VariableType::Number => {
            let v = qual_json::from_str(raw).map_err(|e| e.message)?;
            match v.as_f64() {
                Some(f) if matches!(v, Value::Number(_)) && f.is_finite() => Ok(Value::from(f)),
                _ => Err("expected a finite JSON number".into()),
            }
        }
        VariableType::Boolean => match raw {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err("expected true or false".into()),
        },
    }
}

/// The text a resolved value is substituted as.
pub fn substitution_text(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Number(Number::Float(f)) => python_float_repr(*f),
        Value::String(s) => s.clone(),
        other => to_canonical_string(other),
    }
}

/// Substitutes a whole-value placeholder; other text is returned unchanged.
/// `Err(name)` when a placeholder has no value.
pub fn substitute(
    text: &str,
    vars: &ResolvedVariables,
    runner: &RunnerValues,
) -> Result<String, String> {
    let Some(name) = placeholder_name(text) else {
        return Ok(text.to_owned());
    };
    let found = match name {
        "seed" => runner.seed.clone(),
        "model_path" => runner.model_path.clone(),
        "host_id" => runner.host_id.clone(),
        other => vars.values.get(other).map(substitution_text),
    };
    found.ok_or_else(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_parsing() {
        assert_eq!(
            parse_typed(VariableType::Integer, "-12")
                .unwrap()
                .to_serde()
                .unwrap(),
            serde_json::json!(-12)
        );
        assert!(parse_typed(VariableType::Integer, "1.0")
            .unwrap_err()
            .contains("base-10 integer"));
        assert!(parse_typed(VariableType::Integer, "01").is_err());
        assert_eq!(
            substitution_text(&parse_typed(VariableType::Number, "1").unwrap()),
            "1.0"
        );
        assert_eq!(
            substitution_text(&parse_typed(VariableType::Number, "-0.0").unwrap()),
            "0.0"
        );
        assert_eq!(
            substitution_text(&parse_typed(VariableType::Number, "0.00001").unwrap()),
            "1e-05"
        );
        assert!(parse_typed(VariableType::Number, "NaN").is_err());
        assert!(parse_typed(VariableType::Boolean, "True").is_err());
    }
}
