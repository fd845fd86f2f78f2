//! The closed case environment (`closed-qualification-case-v1`).
//!
//! A case process sees only: the host variables named in [`BASE_ALLOW_LIST`] (when present),
//! then the case's own committed `environment` (placeholders resolved), then the runner-owned
//! `KILN_QUALIFICATION_CASE_RESULT`, `KILN_QUALIFICATION_VARIANT_ID` and
//! `KILN_QUALIFICATION_NETWORK_ISOLATION`. Nothing else is inherited.
//!
//! `execution_environment_sha256` is the canonical-JSON digest of
//! `{"policy": "closed-qualification-case-v1", "environment": <base env>}`. Evidence files
//! record the base environment redacted: a value whose upper-cased name contains one of
//! [`SENSITIVE_MARKERS`] is replaced by `sha256:<hex of its UTF-8>`.

use std::collections::BTreeMap;

use qual_json::Value;
use serde::Serialize;

use crate::document::to_value;

/// Policy id.
pub use qual_contract::constants::CASE_ENVIRONMENT_POLICY as POLICY;

/// Host variables a case may inherit.
pub use qual_contract::constants::CASE_ENVIRONMENT_BASE as BASE_ALLOW_LIST;

/// Name fragments that mark a value as sensitive.
pub const SENSITIVE_MARKERS: [&str; 8] = [
    "AUTH",
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "CREDENTIAL",
    "WEBHOOK",
    "COOKIE",
];

/// Runner-owned variable: absolute path of the command result file.
pub const CASE_RESULT_VAR: &str = "KILN_QUALIFICATION_CASE_RESULT";
/// Runner-owned variable: the selected variant id.
pub const VARIANT_VAR: &str = "KILN_QUALIFICATION_VARIANT_ID";
/// Runner-owned variable: the network isolation mechanism id.
pub const NETWORK_VAR: &str = "KILN_QUALIFICATION_NETWORK_ISOLATION";

/// The base environment taken from `host` (an iterator of the host's variables).
pub fn base_environment<I>(host: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (String, String)>,
{
    host.into_iter()
        .filter(|(k, _)| BASE_ALLOW_LIST.contains(&k.as_str()))
        .collect()
}

/// The base environment of this process.
pub fn host_base_environment() -> BTreeMap<String, String> {
    base_environment(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
}

fn string_object(m: &BTreeMap<String, String>) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect(),
    )
}

/// What `execution_environment_sha256` digests.
#[derive(Serialize)]
struct DigestedEnvironment<'a> {
    policy: &'a str,
    environment: &'a BTreeMap<String, String>,
}

/// `execution_environment_sha256` of a base environment.
pub fn execution_environment_sha256(base: &BTreeMap<String, String>) -> String {
    let doc = DigestedEnvironment {
        policy: POLICY,
        environment: base,
    };
    qual_json::canonical_digest(&to_value(&doc).expect("a string map is a document"))
}

/// Canonical digest of a full process environment.
pub fn process_environment_sha256(env: &[(String, String)]) -> String {
    let m: BTreeMap<String, String> = env.iter().cloned().collect();
    qual_json::canonical_digest(&string_object(&m))
}

/// Whether a variable name is sensitive.
pub fn is_sensitive(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    SENSITIVE_MARKERS.iter().any(|m| up.contains(m))
}

/// One variable as evidence records it: its value, or the digest of a sensitive one.
#[derive(Clone, Debug, Serialize)]
pub struct RedactedValue {
    /// Whether `value` is `sha256:<hex of the UTF-8 value>` rather than the value.
    pub redacted: bool,
    /// The value or its digest.
    pub value: String,
}

/// The redacted form `{NAME: {"redacted": bool, "value": v}}`.
pub fn redacted(m: &BTreeMap<String, String>) -> BTreeMap<String, RedactedValue> {
    m.iter()
        .map(|(k, v)| {
            let sensitive = is_sensitive(k);
            let value = if sensitive {
                qual_json::sha256_prefixed(v.as_bytes())
            } else {
                v.clone()
            };
            let r = RedactedValue {
                redacted: sensitive,
                value,
            };
            (k.clone(), r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cargo_wrapper_allow_list_starts_with_the_case_base() {
        let cargo = qual_exec::wrap::CARGO_ENV_ALLOW;
        assert_eq!(
            &cargo[..super::BASE_ALLOW_LIST.len()],
            &super::BASE_ALLOW_LIST[..]
        );
    }
    use super::*;

    #[test]
    fn only_allow_listed_host_variables_are_inherited() {
        let host = vec![
            ("PATH".to_string(), "/usr/bin".to_string()),
            ("ROCM_PATH".to_string(), "/opt/rocm".to_string()),
            ("CODEX_AUTH_JSON".to_string(), "secret".to_string()),
            ("HOME".to_string(), "/home/u".to_string()),
        ];
        let b = base_environment(host);
        assert_eq!(b.keys().collect::<Vec<_>>(), ["HOME", "PATH"]);
        assert!(execution_environment_sha256(&b).starts_with("sha256:"));
    }

    #[test]
    fn sensitive_values_are_hashed() {
        let mut m = BTreeMap::new();
        m.insert("CODEX_AUTH_JSON".to_string(), "secret".to_string());
        m.insert("HTTP_COOKIE".to_string(), "c".to_string());
        m.insert("QUALIFICATION_LABEL".to_string(), "visible".to_string());
        let text = qual_json::to_canonical_string(&to_value(&redacted(&m)).expect("value"));
        assert!(!text.contains("secret"));
        assert!(text.contains(&qual_json::sha256_prefixed(b"secret")));
        assert!(text.contains(r#""QUALIFICATION_LABEL":{"redacted":false,"value":"visible"}"#));
    }
}
