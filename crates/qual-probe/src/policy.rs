//! The repository policy file `qualification/policy.json`: which source-tree profile the
//! runner binds.
//!
//! The file is optional. When it is absent the `generic` profile applies. When present it is
//! read with the strict JSON reader and must be exactly
//! `{"schema_version": 1, "source_tree_profile": "kiln" | "generic"}` (a closed object: every
//! missing, unknown or mistyped key is reported, all at once, with its JSON pointer).

use std::path::Path;

use qual_json::{Limits, Value};

/// Repository-relative location of the policy file.
pub const POLICY_PATH: &str = "qualification/policy.json";

/// Which tracked paths feed the source-tree digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceTreeProfile {
    /// Kiln's own path selection: reproduces `kiln-source-tree-v1` byte for byte.
    Kiln,
    /// Every tracked path except `qualification/receipts/**` (the default).
    Generic,
}

impl SourceTreeProfile {
    /// The profile's name as written in the policy file.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceTreeProfile::Kiln => "kiln",
            SourceTreeProfile::Generic => "generic",
        }
    }
}

/// The parsed repository policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoPolicy {
    /// The selected source-tree profile.
    pub source_tree_profile: SourceTreeProfile,
    /// Whether the policy came from a file (false: built-in default).
    pub from_file: bool,
}

impl Default for RepoPolicy {
    fn default() -> Self {
        RepoPolicy {
            source_tree_profile: SourceTreeProfile::Generic,
            from_file: false,
        }
    }
}

/// Why the policy file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// Unreadable or not strict JSON.
    #[error("cannot load {path}: {reason}")]
    Load {
        /// The policy path.
        path: String,
        /// Why.
        reason: String,
    },
    /// Strict JSON but not a valid policy; every violation is listed.
    #[error("invalid {path}: {}", .errors.join("; "))]
    Invalid {
        /// The policy path.
        path: String,
        /// Every violation, each with its JSON pointer.
        errors: Vec<String>,
    },
}

/// Loads `qualification/policy.json` under `root`, or the default when it does not exist.
pub fn load_policy(root: &Path) -> Result<RepoPolicy, PolicyError> {
    let path = root.join(POLICY_PATH);
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RepoPolicy::default()),
        Err(e) => {
            return Err(PolicyError::Load {
                path: POLICY_PATH.into(),
                reason: e.to_string(),
            })
        }
        Ok(m) if !m.file_type().is_file() => {
            return Err(PolicyError::Load {
                path: POLICY_PATH.into(),
                reason: "policy must be a regular, non-symlink file".into(),
            })
        }
        Ok(_) => {}
    }
    let limits = Limits {
        max_bytes: 64 * 1024,
        ..Limits::default()
    };
    let (value, _) = qual_json::load_file(&path, limits).map_err(|e| PolicyError::Load {
        path: POLICY_PATH.into(),
        reason: e.to_string(),
    })?;
    parse_policy(&value).map_err(|errors| PolicyError::Invalid {
        path: POLICY_PATH.into(),
        errors,
    })
}

/// Validates a parsed policy document, reporting every violation.
pub fn parse_policy(value: &Value) -> Result<RepoPolicy, Vec<String>> {
    let Some(obj) = value.as_object() else {
        return Err(vec!["/: policy must be a JSON object".into()]);
    };
    let mut errors = Vec::new();
    let unknown =
        qual_json::ClosedKeys::with_optional(&[], &["schema_version", "source_tree_profile"])
            .unknown_order(qual_json::Order::Declared)
            .unknown(obj);
    errors.extend(
        unknown
            .into_iter()
            .map(|key| format!("/{key}: unknown key")),
    );
    match obj.get("schema_version") {
        None => errors.push("/schema_version: missing required key".into()),
        Some(Value::Number(qual_json::Number::Int(i))) if i.as_i64() == Some(1) => {}
        Some(_) => errors.push("/schema_version: must be the integer 1".into()),
    }
    let mut profile = None;
    match obj.get("source_tree_profile") {
        None => errors.push("/source_tree_profile: missing required key".into()),
        Some(Value::String(s)) if s == "kiln" => profile = Some(SourceTreeProfile::Kiln),
        Some(Value::String(s)) if s == "generic" => profile = Some(SourceTreeProfile::Generic),
        Some(_) => errors.push("/source_tree_profile: must be \"kiln\" or \"generic\"".into()),
    }
    match (errors.is_empty(), profile) {
        (true, Some(p)) => Ok(RepoPolicy {
            source_tree_profile: p,
            from_file: true,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_both_profiles_and_reports_every_violation() {
        let v =
            qual_json::from_str(r#"{"schema_version":1,"source_tree_profile":"kiln"}"#).unwrap();
        assert_eq!(
            parse_policy(&v).unwrap().source_tree_profile,
            SourceTreeProfile::Kiln
        );
        let v =
            qual_json::from_str(r#"{"schema_version":1,"source_tree_profile":"generic"}"#).unwrap();
        assert_eq!(
            parse_policy(&v).unwrap().source_tree_profile,
            SourceTreeProfile::Generic
        );
        let v =
            qual_json::from_str(r#"{"schema_version":1.0,"source_tree_profile":"x","extra":1}"#)
                .unwrap();
        let errs = parse_policy(&v).unwrap_err();
        assert_eq!(errs.len(), 3, "{errs:?}");
        let v = qual_json::from_str(r#"{}"#).unwrap();
        assert_eq!(parse_policy(&v).unwrap_err().len(), 2);
    }

    #[test]
    fn missing_file_is_the_generic_default_and_duplicates_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load_policy(dir.path()).unwrap(), RepoPolicy::default());
        std::fs::create_dir_all(dir.path().join("qualification")).unwrap();
        std::fs::write(
            dir.path().join(POLICY_PATH),
            r#"{"schema_version":1,"source_tree_profile":"kiln","source_tree_profile":"kiln"}"#,
        )
        .unwrap();
        assert!(matches!(
            load_policy(dir.path()),
            Err(PolicyError::Load { .. })
        ));
    }
}
