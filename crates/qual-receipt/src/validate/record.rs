//! The receipt's own fields, in the original's order: schema version, id, creation time,
//! `source`, `qualification`, then (after the environment) `model`, `workload`,
//! `effective_config`, `results`, `metrics`, `artifacts`, `unsupported`/`notes`, the verdict
//! rules, the consistency rules and the strict source checks.

use super::*;

impl Checker {
    fn model(&mut self, v: &Value, ctx: &str) {
        let m = self.exact(v, &MODEL_KEYS, ctx);
        self.string(get(m, "id"), &format!("{ctx}.id"), false);
        self.string(get(m, "path"), &format!("{ctx}.path"), false);
        for key in ["config_hash", "tokenizer_hash"] {
            self.sha256(get(m, key), &format!("{ctx}.{key}"));
        }
        let template = get(m, "chat_template_hash");
        if !template.is_null() {
            self.sha256(template, &format!("{ctx}.chat_template_hash"));
        }
        let Some(weights) = get(m, "weight_files").as_array().filter(|w| !w.is_empty()) else {
            self.push(format!("{ctx}.weight_files"), "must be a non-empty array");
            return;
        };
        let mut paths: Vec<&str> = Vec::new();
        for (i, raw) in weights.iter().enumerate() {
            let wctx = format!("{ctx}.weight_files[{i}]");
            let w = self.exact(raw, &WEIGHT_KEYS, &wctx);
            let path = self.string(get(w, "path"), &format!("{wctx}.path"), false);
            if paths.contains(&path) {
                self.push(
                    format!("{ctx}.weight_files"),
                    format!("contains duplicate path {}", qual_json::show::quote(path)),
                );
            }
            paths.push(path);
            self.sha256(get(w, "sha256"), &format!("{wctx}.sha256"));
            self.positive_int(get(w, "bytes"), &format!("{wctx}.bytes"));
        }
    }

    fn workload(&mut self, v: &Value, ctx: &str) {
        let w = self.exact(v, &WORKLOAD_KEYS, ctx);
        self.string(get(w, "id"), &format!("{ctx}.id"), false);
        self.sha256(get(w, "sha256"), &format!("{ctx}.sha256"));
        let seed = get(w, "seed");
        if !seed.is_null() && !Self::nonnegative_int(seed) {
            self.push(
                format!("{ctx}.seed"),
                "must be null or a non-negative integer",
            );
        }
        if get(w, "parameters").as_object().is_none() {
            self.push(format!("{ctx}.parameters"), "must be an object");
        }
    }

    /// The whole receipt, every rule family in the original's order.
    pub(super) fn receipt(&mut self, receipt: &Value, strict: &StrictChecks<'_>) {
        let top = self.exact(receipt, &TOP_LEVEL_KEYS, "receipt");
        if !py_eq(get(top, "schema_version"), &Value::from(1i64)) {
            self.push("receipt.schema_version", "must be 1");
        }
        let receipt_id = self.string(get(top, "receipt_id"), "receipt.receipt_id", false);
        if !receipt_id.is_empty() && !is_receipt_id(receipt_id) {
            self.push("receipt.receipt_id", "has invalid syntax");
        }
        let created_at = self.timestamp(get(top, "created_at_utc"), "receipt.created_at_utc");
        let (tree_hash, commit, clean) = self.source(get(top, "source"));
        let (kind, verdict) = self.qualification(get(top, "qualification"), created_at);
        self.environment(get(top, "environment"));
        self.model_and_workload(top, kind, verdict);
        self.config(get(top, "effective_config"), "receipt.effective_config");
        let required_failures = self.results(get(top, "results"));
        self.metrics(get(top, "metrics"), "receipt.metrics");
        self.artifacts(get(top, "artifacts"), strict);
        for key in ["unsupported", "notes"] {
            match get(top, key).as_array() {
                None => self.push(format!("receipt.{key}"), "must be an array"),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        self.string(item, &format!("receipt.{key}[{i}]"), false);
                    }
                }
            }
        }
        let verdict_str = verdict.as_str().unwrap_or("");
        self.verdict_rules(verdict_str, clean, required_failures);
        self.out.extend(crate::consistency::check(receipt));
        self.strict_source(tree_hash, commit, strict);
        self.publication(commit, clean, strict);
    }

    /// `receipt.source`: keys, the tree-hash format and digest, the commit syntax, the clean
    /// flag; returns the digest, the commit and the flag for the later rules.
    fn source<'a>(&mut self, v: &'a Value) -> (&'a str, &'a Value, Option<bool>) {
        let source = self.exact(v, &SOURCE_KEYS, "receipt.source");
        if get(source, "tree_hash_format").as_str() != Some(TREE_HASH_FORMAT) {
            self.push(
                "receipt.source.tree_hash_format",
                format!("must be {}", qual_json::show::quote(TREE_HASH_FORMAT)),
            );
        }
        let tree_hash = self.sha256(get(source, "tree_hash"), "receipt.source.tree_hash");
        let commit = get(source, "git_commit");
        if !commit.as_str().is_some_and(is_commit) {
            self.push(
                "receipt.source.git_commit",
                "must be a lowercase 40-character commit",
            );
        }
        let clean = self.boolean(
            get(source, "git_worktree_clean"),
            "receipt.source.git_worktree_clean",
        );
        (tree_hash, commit, clean)
    }

    /// `receipt.qualification`: keys, kind, backend, profile, verdict, the timestamps, duration
    /// and argv, and the timing rules between them and `created_at_utc`; returns the kind and
    /// the verdict.
    fn qualification<'a>(
        &mut self,
        v: &'a Value,
        created_at: Option<i128>,
    ) -> (&'a Value, &'a Value) {
        let qctx = "receipt.qualification";
        let q = self.exact(v, &QUALIFICATION_KEYS, qctx);
        let kind = get(q, "kind");
        self.one_of(kind, &KINDS, &format!("{qctx}.kind"));
        self.one_of(get(q, "backend"), &BACKENDS, &format!("{qctx}.backend"));
        self.string(get(q, "profile"), &format!("{qctx}.profile"), false);
        let verdict = get(q, "verdict");
        self.one_of(verdict, &VERDICTS, &format!("{qctx}.verdict"));
        let started = self.timestamp(get(q, "started_at_utc"), &format!("{qctx}.started_at_utc"));
        let finished = self.timestamp(
            get(q, "finished_at_utc"),
            &format!("{qctx}.finished_at_utc"),
        );
        let duration = self.nonnegative_number(
            get(q, "duration_seconds"),
            &format!("{qctx}.duration_seconds"),
        );
        match get(q, "command").as_array() {
            Some(argv) if !argv.is_empty() => {
                for (i, item) in argv.iter().enumerate() {
                    self.string(item, &format!("{qctx}.command[{i}]"), false);
                }
            }
            _ => self.push(format!("{qctx}.command"), "must be a non-empty argv array"),
        }
        if let (Some(started), Some(finished)) = (started, finished) {
            let elapsed_us = finished - started;
            if elapsed_us < 0 {
                self.push(format!("{qctx}.finished_at_utc"), "precedes started_at_utc");
            } else if let Some(duration) = duration {
                let elapsed = elapsed_us as f64 / 1_000_000.0;
                if (duration - elapsed).abs() > 1.0 {
                    self.push(
                        format!("{qctx}.duration_seconds"),
                        "differs from timestamps by more than 1 second",
                    );
                }
            }
            if created_at.is_some_and(|c| c < finished) {
                self.push(
                    "receipt.created_at_utc",
                    "precedes qualification completion",
                );
            }
        }
        (kind, verdict)
    }

    /// `receipt.model` and `receipt.workload` when present, and which qualification kinds
    /// require them.
    fn model_and_workload(&mut self, top: Option<&Object>, kind: &Value, verdict: &Value) {
        let model = get(top, "model");
        let workload = get(top, "workload");
        if !model.is_null() {
            self.model(model, "receipt.model");
        }
        if !workload.is_null() {
            self.workload(workload, "receipt.workload");
        }
        let kind_str = kind.as_str().unwrap_or("");
        let verdict_str = verdict.as_str().unwrap_or("");
        if MODEL_KINDS.contains(&kind_str) && verdict_str == "passed" && model.is_null() {
            self.push(
                "receipt.model",
                format!(
                    "is required for passed qualification kind {}",
                    qual_json::show::quote(kind_str)
                ),
            );
        }
        if KINDS.contains(&kind_str) && kind_str != "environment" && workload.is_null() {
            self.push(
                "receipt.workload",
                format!(
                    "is required for qualification kind {}",
                    qual_json::show::quote(kind_str)
                ),
            );
        }
    }

    /// `receipt.results`: a non-empty array of results (keys, id syntax and uniqueness,
    /// required, status, duration, metrics, details length); returns how many required results
    /// did not pass.
    fn results(&mut self, v: &Value) -> usize {
        let mut required_failures = 0usize;
        match v.as_array() {
            Some(results) if !results.is_empty() => {
                let mut ids: Vec<&str> = Vec::with_capacity(results.len());
                for (i, raw) in results.iter().enumerate() {
                    let rctx = format!("receipt.results[{i}]");
                    let r = self.exact(raw, &RESULT_KEYS, &rctx);
                    let id = self.string(get(r, "id"), &format!("{rctx}.id"), false);
                    if !id.is_empty() && !is_result_id(id) {
                        self.push(format!("{rctx}.id"), "has invalid syntax");
                    }
                    if ids.contains(&id) {
                        self.push(
                            "receipt.results",
                            format!("contains duplicate id {}", qual_json::show::quote(id)),
                        );
                    }
                    ids.push(id);
                    let required = self.boolean(get(r, "required"), &format!("{rctx}.required"));
                    let status = get(r, "status");
                    self.one_of(status, &RESULT_STATUSES, &format!("{rctx}.status"));
                    if required == Some(true) && status.as_str() != Some("passed") {
                        required_failures += 1;
                    }
                    self.nonnegative_number(
                        get(r, "duration_seconds"),
                        &format!("{rctx}.duration_seconds"),
                    );
                    self.metrics(get(r, "metrics"), &format!("{rctx}.metrics"));
                    let details = get(r, "details");
                    if !details.is_null() {
                        let text = self.string(details, &format!("{rctx}.details"), true);
                        if text.chars().count() > MAX_RESULT_DETAIL_CHARACTERS {
                            self.push(
                                format!("{rctx}.details"),
                                format!(
                                    "must be at most {MAX_RESULT_DETAIL_CHARACTERS} characters"
                                ),
                            );
                        }
                    }
                }
            }
            _ => self.push("receipt.results", "must be a non-empty array"),
        }
        required_failures
    }

    /// `receipt.artifacts`: each artifact's keys, kind, location, path (kind/path unique), digest
    /// and size, and the strict local re-hash of a `local_ignored` one.
    fn artifacts(&mut self, v: &Value, strict: &StrictChecks<'_>) {
        match v.as_array() {
            None => self.push("receipt.artifacts", "must be an array"),
            Some(artifacts) => {
                let mut seen: Vec<(&str, &str)> = Vec::with_capacity(artifacts.len());
                for (i, raw) in artifacts.iter().enumerate() {
                    let actx = format!("receipt.artifacts[{i}]");
                    let a = self.exact(raw, &ARTIFACT_KEYS, &actx);
                    let kind_value = self.string(get(a, "kind"), &format!("{actx}.kind"), false);
                    let location = get(a, "location");
                    self.one_of(location, &ARTIFACT_LOCATIONS, &format!("{actx}.location"));
                    let path_value = self.string(get(a, "path"), &format!("{actx}.path"), false);
                    if seen.contains(&(kind_value, path_value)) {
                        self.push(
                            "receipt.artifacts",
                            format!(
                                "contains duplicate kind/path {}/{}",
                                qual_json::show::quote(kind_value),
                                qual_json::show::quote(path_value)
                            ),
                        );
                    }
                    seen.push((kind_value, path_value));
                    let expected_hash = self.sha256(get(a, "sha256"), &format!("{actx}.sha256"));
                    let bytes = get(a, "bytes");
                    if !Self::nonnegative_int(bytes) {
                        self.push(format!("{actx}.bytes"), "must be a non-negative integer");
                    }
                    if strict.local_artifacts
                        && location.as_str() == Some("local_ignored")
                        && !path_value.is_empty()
                    {
                        self.local_artifact(&actx, path_value, expected_hash, bytes, strict);
                    }
                }
            }
        }
    }

    /// What the verdict requires: `passed` a clean worktree and no failed required result,
    /// `failed` at least one.
    fn verdict_rules(&mut self, verdict_str: &str, clean: Option<bool>, required_failures: usize) {
        match verdict_str {
            "passed" => {
                if clean != Some(true) {
                    self.push(
                        "receipt.qualification.verdict",
                        "passed requires receipt.source.git_worktree_clean=true",
                    );
                }
                if required_failures > 0 {
                    self.push(
                        "receipt.qualification.verdict",
                        "passed cannot coexist with failed or skipped required results",
                    );
                }
            }
            "failed" if required_failures == 0 => self.push(
                "receipt.qualification.verdict",
                "failed requires at least one failed or skipped required result",
            ),
            _ => {}
        }
    }
}
