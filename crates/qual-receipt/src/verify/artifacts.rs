//! The artifact list: exactly the evidence files of the run directory, in the runner's order,
//! each with its kind, digest and size.

use super::*;

/// What kind of evidence a file of the run directory is (`None`: not evidence).
fn evidence_kind(rel: &str) -> Option<&'static str> {
    match rel {
        "environment.json" => return Some("environment_probes"),
        "run-config.json" => return Some("effective_run_config"),
        "model-fingerprint-initial.json" => return Some("model_fingerprint_initial"),
        "model-fingerprint-final.json" => return Some("model_fingerprint_final"),
        _ => {}
    }
    let (dir, file) = rel.rsplit_once('/')?;
    let case_dir = dir.strip_prefix("cases/")?;
    if case_dir.contains('/') {
        return None;
    }
    match file {
        "stdout.log" => Some("case_stdout"),
        "stderr.log" => Some("case_stderr"),
        "case-result.json" => Some("case_result"),
        "command-result.json" => Some("command_case_result"),
        _ => None,
    }
}

fn walk(
    dir: &Path,
    base: &Path,
    out: &mut Vec<(String, std::fs::Metadata)>,
) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = std::fs::symlink_metadata(e.path())?;
        if meta.is_dir() {
            walk(&e.path(), base, out)?;
        } else {
            out.push((rel(base, &e.path()), meta));
        }
    }
    Ok(())
}

/// The artifact list: exactly the run directory's evidence files, in the runner's order, each
/// with its kind, location, digest and size.
pub(super) fn verify_artifacts(v: &mut Verifier<'_>, receipt: &Value, config: &Value) {
    let mut files = Vec::new();
    if let Err(e) = walk(&v.run_dir.clone(), &v.run_dir.clone(), &mut files) {
        v.push(
            "/artifacts",
            format!("cannot be checked: failed to list the run directory: {e}"),
        );
        return;
    }
    let expected = expected_evidence(v, config, files);
    let listed: &[Value] = get(receipt, "/artifacts")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let prefix = format!("{}/", v.recorded);
    let mut order = Vec::new();
    for (k, a) in listed.iter().enumerate() {
        let path = get(a, "/path").as_str().unwrap_or_default();
        let inner = path.strip_prefix(&prefix);
        let found = inner.and_then(|inner| expected.iter().position(|e| e.0 == inner));
        let Some(e) = found else {
            v.push(
                format!("/artifacts/{k}/path"),
                format!(
                    "is {}, which is not evidence in the run directory",
                    jstr(path)
                ),
            );
            continue;
        };
        order.push(e);
        let (inner, kind, meta) = &expected[e];
        v.differs(
            &format!("/artifacts/{k}/kind"),
            get(a, "/kind"),
            &Value::from(*kind),
            "the runner names this file",
        );
        v.differs(
            &format!("/artifacts/{k}/location"),
            get(a, "/location"),
            &Value::from("local_ignored"),
            "the runner records",
        );
        if !meta.is_file() {
            v.push(
                format!("/artifacts/{k}/path"),
                "is not a regular file in the run directory",
            );
            continue;
        }
        match hash_file(&v.run_dir.join(inner)) {
            Ok((digest, len)) => {
                v.differs(
                    &format!("/artifacts/{k}/sha256"),
                    get(a, "/sha256"),
                    &Value::from(digest.as_str()),
                    "the file hashes to",
                );
                v.differs(
                    &format!("/artifacts/{k}/bytes"),
                    get(a, "/bytes"),
                    &Value::from(len),
                    "the file holds",
                );
            }
            Err(e) => v.push(
                format!("/artifacts/{k}/path"),
                format!("cannot be read: {e}"),
            ),
        }
    }
    for (e, (inner, kind, _)) in expected.iter().enumerate() {
        if !order.contains(&e) {
            v.push(
                "/artifacts",
                format!(
                    "does not list {} ({kind}), which the run directory holds",
                    jstr(&format!("{prefix}{inner}"))
                ),
            );
        }
    }
    if order.windows(2).any(|w| w[0] >= w[1]) {
        v.push(
            "/artifacts",
            "is not in the order the runner writes its evidence",
        );
    }
}

/// The evidence files of the run directory in the runner's order, with their kinds (a file the
/// runner never writes is reported; a case's scratch and an oversized case result are
/// not evidence).
fn expected_evidence(
    v: &mut Verifier<'_>,
    config: &Value,
    files: Vec<(String, std::fs::Metadata)>,
) -> Vec<(String, &'static str, std::fs::Metadata)> {
    let result_limit = get(config, "/per_case_result_limit_bytes")
        .as_int()
        .and_then(|n| n.as_u64())
        .unwrap_or(u64::MAX);
    // The runner's order: initial fingerprint, environment, executions (stdout, stderr, case
    // result, command result), final fingerprint, run config.
    let rank = |rel: &str| -> (u8, String, u8) {
        match rel {
            "model-fingerprint-initial.json" => (0, String::new(), 0),
            "environment.json" => (1, String::new(), 0),
            "model-fingerprint-final.json" => (3, String::new(), 0),
            "run-config.json" => (4, String::new(), 0),
            _ => {
                let (dir, file) = rel.rsplit_once('/').unwrap_or_default();
                let f = match file {
                    "stdout.log" => 0,
                    "stderr.log" => 1,
                    "case-result.json" => 2,
                    _ => 3,
                };
                (2, dir.to_owned(), f)
            }
        }
    };
    let mut expected: Vec<(String, &'static str, std::fs::Metadata)> = Vec::new();
    for (rel, meta) in files {
        match evidence_kind(&rel) {
            Some("command_case_result") if !meta.is_file() || meta.len() > result_limit => {}
            Some(kind) => expected.push((rel, kind, meta)),
            None if rel.starts_with("cases/") && rel.matches('/').count() >= 2 => {}
            None => {
                let shown = format!("{}/{rel}", v.run_dir_rel);
                v.push(
                    "/artifacts",
                    format!("cannot account for {shown}: the runner writes no such file"),
                );
            }
        }
    }
    expected.sort_by_key(|a| rank(&a.0));
    expected
}
