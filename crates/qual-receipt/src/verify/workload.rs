//! The workload: its bytes at the receipt's commit and recorded path (through the hardened git
//! binding), their digest, id, kind and seed, the selected variant's backend and effective
//! config, and the resolved parameters.

use super::*;

/// The workload at the receipt's commit: its bytes, digest and identity.
pub(super) fn verify_workload(
    v: &mut Verifier<'_>,
    receipt: &Value,
    config: &Value,
) -> Option<Workload> {
    let w = typed_workload_at_commit(v, receipt, config)?;
    let source = "the workload declares";
    v.differs(
        "/workload/id",
        get(receipt, "/workload/id"),
        &Value::from(w.workload_id.as_str()),
        source,
    );
    v.differs(
        "/qualification/kind",
        get(receipt, "/qualification/kind"),
        &Value::from(w.kind.as_str()),
        source,
    );
    let profile: String = w.workload_id.chars().take(128).collect();
    v.differs(
        "/qualification/profile",
        get(receipt, "/qualification/profile"),
        &Value::from(profile.as_str()),
        source,
    );
    v.differs(
        "/workload/seed",
        get(receipt, "/workload/seed"),
        &w.determinism.seed.map(Value::from).unwrap_or(Value::Null),
        source,
    );
    let variant_id = get(config, "/variant_id").as_str().unwrap_or_default();
    let Some(variant) = w.variant(variant_id) else {
        v.push(
            "/workload/parameters/variant_id",
            format!(
                "names variant {}, which the workload does not declare",
                jstr(variant_id)
            ),
        );
        return None;
    };
    v.differs(
        "/qualification/backend",
        get(receipt, "/qualification/backend"),
        &Value::from(variant.backend.as_str()),
        "the workload's variant declares",
    );
    let mut parameters = Object::new();
    parameters.insert("variant_id", Value::from(variant_id));
    if let Some(vars) = get(config, "/variables").as_object() {
        for (k, x) in vars.iter() {
            parameters.insert(k.clone(), x.clone());
        }
    }
    v.diff(
        "/workload/parameters",
        get(receipt, "/workload/parameters"),
        &Value::Object(parameters),
        "run-config.json records",
    );
    let config_value =
        Value::from_serde(&serde_json::Value::Object(variant.effective_config.clone()));
    let got = get(receipt, "/effective_config");
    if json(got) != "{}" && json(got) != json(&config_value) {
        v.push(
            "/effective_config",
            format!(
                "is {}, neither {{}} (unverified) nor the variant's {}",
                json(got),
                json(&config_value)
            ),
        );
    }
    Some(w)
}

/// The workload at the receipt's commit and the recorded path, read through the hardened git
/// binding: its digest against the receipt's, then valid and typed.
fn typed_workload_at_commit(
    v: &mut Verifier<'_>,
    receipt: &Value,
    config: &Value,
) -> Option<Workload> {
    let commit = get(receipt, "/source/git_commit")
        .as_str()
        .unwrap_or_default();
    let Some(path) = get(config, "/workload_path").as_str() else {
        v.push(
            format!("{}/run-config.json#/workload_path", v.run_dir_rel),
            "is absent: the workload cannot be located",
        );
        return None;
    };
    let bytes = match qual_git::Repo::new(v.root).blob_at(commit, path) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.push(
                "/source/git_commit",
                format!("holds no workload at {} in this repository", jstr(path)),
            );
            return None;
        }
        Err(e) => {
            v.push(
                "/source/git_commit",
                format!("cannot be read for the workload {}: {e}", jstr(path)),
            );
            return None;
        }
    };
    let digest = qual_json::sha256_prefixed(&bytes);
    v.differs(
        "/workload/sha256",
        get(receipt, "/workload/sha256"),
        &Value::from(digest.as_str()),
        &format!("the workload at the recorded commit ({path}) hashes to"),
    );
    let value = match qual_contract::check_bytes(&bytes) {
        Ok(value) => value,
        Err(violations) => {
            v.push(
                "/workload",
                format!(
                    "names a workload that is invalid at the recorded commit ({} violations)",
                    violations.len()
                ),
            );
            return None;
        }
    };
    let w = match qual_contract::typed(&value) {
        Ok(w) => w,
        Err(e) => {
            v.push("/workload", format!("cannot be typed: {e}"));
            return None;
        }
    };
    Some(w)
}
