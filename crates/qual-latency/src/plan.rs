//! The manual-workflow dispatch plan (`latency plan`). Read-only.
//!
//! A fixture is planned when `--include-covered` is given, when it is named with
//! `--fixture-id`, or when it needs dispatch (not `locked_threshold`, or its result artifact
//! is unnamed or absent). Each plan carries the `gh workflow run` dispatch command (only when
//! runner labels are known), the artifact download templates, and the follow-up import, lock
//! and strict-check commands. Runner availability is queried only with `--check-runners`,
//! through a [`RunnerInventory`] (the real one runs `gh api`); offline, that query fails with
//! a clear message and nothing else is attempted.

use crate::git::Repo;
use crate::manifest::validate_runner_labels;
use crate::paths::repo_relative_path;
use crate::{LegacyError, Result};
use qual_json::Value;
use serde::Serialize;
use std::path::Path;

/// The workflow file.
pub const WORKFLOW: &str = ".github/workflows/perf-regression-nightly.yml";

/// Python's `shlex.quote`.
pub fn shell_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    let safe = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b));
    if safe {
        s.into()
    } else {
        format!("'{}'", s.replace('\'', "'\"'\"'"))
    }
}

/// Python's `shlex.join`.
pub fn shell_join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Source of GitHub runner data (`gh api repos/<repo>/actions/runners --paginate --slurp`).
pub trait RunnerInventory {
    /// The raw JSON payload (a list of pages or a single page object), or a message.
    fn list_runners(&self, repo: &str) -> std::result::Result<Value, String>;
}

/// The real inventory: the `gh` CLI (`program` is `gh` unless overridden, e.g. in tests).
#[derive(Clone, Debug)]
pub struct GhCli {
    /// The program to run.
    pub program: String,
}

impl Default for GhCli {
    fn default() -> GhCli {
        GhCli {
            program: "gh".into(),
        }
    }
}

impl RunnerInventory for GhCli {
    fn list_runners(&self, repo: &str) -> std::result::Result<Value, String> {
        // The trusted `gh` (qual-trusted: resolved once, only root can change it).
        let mut cmd = match qual_trusted::command(&self.program) {
            Ok(c) => c,
            Err(e) if e.is_not_found() => {
                return Err("gh CLI is required for --check-runners".into())
            }
            Err(e) => return Err(e.to_string()),
        };
        let out = cmd
            .args([
                "api",
                &format!("repos/{repo}/actions/runners"),
                "--paginate",
                "--slurp",
            ])
            .stdin(std::process::Stdio::null())
            .env("GH_PROMPT_DISABLED", "1")
            .output();
        let out = match out {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err("gh CLI is required for --check-runners".into())
            }
            Err(e) => return Err(format!("failed to list GitHub runners for {repo}: {e}")),
        };
        if !out.status.success() {
            return Err(format!(
                "failed to list GitHub runners for {repo}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        qual_json::from_slice(&out.stdout)
            .map_err(|e| format!("gh runner response was not valid JSON: {e}"))
    }
}

/// One matching runner.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MatchingRunner {
    /// Runner name.
    pub name: serde_json::Value,
    /// `online` / `offline`.
    pub status: serde_json::Value,
    /// Busy flag as reported.
    pub busy: serde_json::Value,
    /// Labels, sorted case-insensitively.
    pub labels: Vec<String>,
}

/// The `github_runner_check` block.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunnerCheck {
    /// `owner/name`.
    pub repo: String,
    /// `labels_required`, `matching_online_idle`, `matching_online_busy`, `matching_offline`,
    /// or `no_matching_runner`.
    pub status: String,
    /// Labels a runner must carry.
    pub required_labels: Option<Vec<String>>,
    /// Runners listed.
    pub total_runners: usize,
    /// Runners carrying every label.
    pub matching_runners: Vec<MatchingRunner>,
    /// Count of matching runners.
    pub matching_runner_count: usize,
    /// Matching and online.
    pub online_matching_runner_count: usize,
    /// Matching, online and `busy == false`.
    pub idle_matching_runner_count: usize,
}

/// One planned fixture.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FixturePlan {
    /// Fixture id.
    pub fixture_id: String,
    /// Backend.
    pub backend: serde_json::Value,
    /// Threshold state.
    pub threshold_state: serde_json::Value,
    /// Result artifact path.
    pub result_artifact: serde_json::Value,
    /// Whether the result artifact exists.
    pub artifact_exists: bool,
    /// Labels in force.
    pub runner_labels: Option<Vec<String>>,
    /// No labels known.
    pub needs_runner_labels: bool,
    /// Workflow file.
    pub workflow: String,
    /// Git ref.
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// Dispatch command, `None` without labels.
    pub gh_workflow_run: Option<String>,
    /// `backend-latency-<id>-RUN_ID`.
    pub artifact_name_template: String,
    /// `$TMPDIR/kiln-backend-latency/<id>-RUN_ID`.
    pub artifact_download_dir_template: String,
    /// Download command.
    pub gh_run_download: String,
    /// Import command.
    pub import_artifact: String,
    /// Lock command.
    pub lock_threshold: String,
    /// Strict gate command.
    pub covered_gate_check: String,
    /// Runner check (only with `--check-runners`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub github_runner_check: Option<RunnerCheck>,
}

/// Planner options.
#[derive(Clone, Debug, Default)]
pub struct PlanRequest<'a> {
    /// Selected fixture ids.
    pub fixture_ids: &'a [String],
    /// Plan locked fixtures too.
    pub include_covered: bool,
    /// JSON array overriding every planned fixture's labels.
    pub runner_labels_json: Option<&'a str>,
    /// Git ref (default: current branch or `HEAD`).
    pub git_ref: Option<&'a str>,
    /// Query runners.
    pub check_runners: bool,
    /// `owner/name` (default: from `remote.origin.url`).
    pub github_repo: Option<&'a str>,
}

/// Extracts `owner/name` from a GitHub remote URL.
pub fn github_repo_from_url(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("git@github.com:")
        .or_else(|| url.strip_prefix("https://github.com/"))?;
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let (owner, name) = rest.split_once('/')?;
    (!owner.is_empty() && !name.is_empty() && !name.contains('/'))
        .then(|| format!("{owner}/{name}"))
}

fn casefold(s: &str) -> String {
    s.to_lowercase()
}

/// Evaluates the runner payload for the required labels.
pub fn evaluate_runners(repo: &str, labels: Option<&[String]>, payload: &Value) -> RunnerCheck {
    let pages: Vec<&Value> = match payload {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let runners: Vec<&qual_json::Object> = pages
        .iter()
        .filter_map(|p| p.get("runners").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_object)
        .collect();
    let mut check = RunnerCheck {
        repo: repo.into(),
        status: "labels_required".into(),
        required_labels: labels.map(<[String]>::to_vec),
        total_runners: runners.len(),
        matching_runners: Vec::new(),
        matching_runner_count: 0,
        online_matching_runner_count: 0,
        idle_matching_runner_count: 0,
    };
    let Some(labels) = labels else { return check };
    let want: Vec<String> = labels.iter().map(|l| casefold(l)).collect();
    for r in runners {
        let mut names: Vec<String> = r
            .get("labels")
            .and_then(Value::as_array)
            .map(|ls| {
                ls.iter()
                    .filter_map(|l| match l {
                        Value::String(s) => Some(s.clone()),
                        Value::Object(o) => {
                            o.get("name").and_then(Value::as_str).map(str::to_owned)
                        }
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let have: Vec<String> = names.iter().map(|n| casefold(n)).collect();
        if !want.iter().all(|w| have.contains(w)) {
            continue;
        }
        names.sort_by_key(|n| casefold(n));
        let to_serde = |v: Option<&Value>| {
            v.and_then(Value::to_serde)
                .unwrap_or(serde_json::Value::Null)
        };
        let online = r.get("status").and_then(Value::as_str) == Some("online");
        let idle = online && r.get("busy") == Some(&Value::Bool(false));
        check.online_matching_runner_count += usize::from(online);
        check.idle_matching_runner_count += usize::from(idle);
        check.matching_runners.push(MatchingRunner {
            name: to_serde(r.get("name")),
            status: to_serde(r.get("status")),
            busy: to_serde(r.get("busy")),
            labels: names,
        });
    }
    check.matching_runner_count = check.matching_runners.len();
    check.status = if check.matching_runner_count == 0 {
        "no_matching_runner"
    } else if check.idle_matching_runner_count > 0 {
        "matching_online_idle"
    } else if check.online_matching_runner_count > 0 {
        "matching_online_busy"
    } else {
        "matching_offline"
    }
    .into();
    check
}

/// The whole plan.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Plan {
    /// Always true for a plan.
    pub ok: bool,
    /// Absolute manifest path.
    pub manifest: String,
    /// The ref.
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// Planned fixtures.
    pub plans: Vec<FixturePlan>,
}

/// Builds the dispatch plan.
pub fn plan_dispatch(
    repo: &Repo,
    manifest_path: &Path,
    req: &PlanRequest<'_>,
    inventory: &dyn RunnerInventory,
) -> Result<Plan> {
    let manifest = crate::manifest::load_manifest(manifest_path)?;
    let fixtures: Vec<&qual_json::Object> = manifest
        .get("fixtures")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    let fixtures: Vec<(&str, &qual_json::Object)> = fixtures
        .into_iter()
        .filter_map(|f| f.get("id").and_then(Value::as_str).map(|id| (id, f)))
        .collect();
    let mut unknown: Vec<&str> = req
        .fixture_ids
        .iter()
        .map(String::as_str)
        .filter(|id| !fixtures.iter().any(|(f, _)| f == id))
        .collect();
    unknown.sort();
    if !unknown.is_empty() {
        return Err(LegacyError::Refused(format!(
            "fixture id not found in manifest: {}",
            unknown.join(", ")
        )));
    }
    let override_labels = match req.runner_labels_json {
        None => None,
        Some(text) => {
            let v = qual_json::from_str(text).map_err(|e| {
                LegacyError::Refused(format!("--runner-labels-json must be valid JSON: {e}"))
            })?;
            Some(validate_runner_labels(&v, "--runner-labels-json").map_err(LegacyError::Refused)?)
        }
    };
    let git_ref = req
        .git_ref
        .map(str::to_owned)
        .unwrap_or_else(|| repo.abbrev_ref());
    let manifest_rel = repo_relative_path(repo.root(), manifest_path);
    let github_repo = if req.check_runners {
        Some(
            req.github_repo
                .map(str::to_owned)
                .or_else(|| repo.origin_url().and_then(|u| github_repo_from_url(&u)))
                .ok_or_else(|| {
                    LegacyError::refused(
                        "--check-runners requires --github-repo or a GitHub remote.origin.url",
                    )
                })?,
        )
    } else {
        None
    };
    let mut runner_payload: Option<Value> = None;
    let mut plans = Vec::new();
    for (id, f) in fixtures {
        let result = f
            .get("result_artifact")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let artifact_exists = !result.is_empty() && repo.join(result).is_file();
        let needs_dispatch = f.get("threshold_state").and_then(Value::as_str)
            != Some("locked_threshold")
            || !artifact_exists;
        let selected = req.fixture_ids.iter().any(|s| s == id);
        if !(req.include_covered || selected || needs_dispatch) {
            continue;
        }
        if !req.fixture_ids.is_empty() && !selected {
            continue;
        }
        let labels = match &override_labels {
            Some(l) => Some(l.clone()),
            None => match f.get("runner_labels") {
                None => None,
                Some(v) => Some(
                    validate_runner_labels(
                        v,
                        &format!("fixture {} runner_labels", crate::msg::quote(id)),
                    )
                    .map_err(LegacyError::Refused)?,
                ),
            },
        };
        let gh_workflow_run = labels.as_ref().map(|l| {
            let labels_json = serde_json::to_string(l).expect("labels serialize");
            shell_join(&[
                "gh",
                "workflow",
                "run",
                "perf-regression-nightly.yml",
                "--ref",
                &git_ref,
                "--field",
                &format!("ref={git_ref}"),
                "--field",
                &format!("latency_fixture_id={id}"),
                "--field",
                &format!("latency_runner_labels_json={labels_json}"),
            ])
        });
        let name = format!("backend-latency-{id}-RUN_ID");
        let dir = format!("$TMPDIR/kiln-backend-latency/{id}-RUN_ID");
        let github_runner_check = match &github_repo {
            None => None,
            Some(gr) => {
                if runner_payload.is_none() {
                    runner_payload =
                        Some(inventory.list_runners(gr).map_err(LegacyError::Refused)?);
                }
                Some(evaluate_runners(
                    gr,
                    labels.as_deref(),
                    runner_payload.as_ref().expect("fetched"),
                ))
            }
        };
        let to_serde = |v: Option<&Value>| {
            v.and_then(Value::to_serde)
                .unwrap_or(serde_json::Value::Null)
        };
        plans.push(FixturePlan {
            fixture_id: id.into(),
            backend: to_serde(f.get("backend")),
            threshold_state: to_serde(f.get("threshold_state")),
            result_artifact: to_serde(f.get("result_artifact")),
            artifact_exists,
            needs_runner_labels: labels.is_none(),
            runner_labels: labels,
            workflow: WORKFLOW.into(),
            git_ref: git_ref.clone(),
            gh_workflow_run,
            gh_run_download: format!("gh run download RUN_ID --name {name} --dir {dir}"),
            import_artifact: format!("kiln-qual latency import {dir} --fixture-id {id}"),
            lock_threshold: format!(
                "kiln-qual latency lock {manifest_rel} --headroom 0.10 --fixture-id {id}"
            ),
            covered_gate_check: format!("kiln-qual latency check {manifest_rel} --require-covered"),
            artifact_name_template: name,
            artifact_download_dir_template: dir,
            github_runner_check,
        });
    }
    Ok(Plan {
        ok: true,
        manifest: crate::paths::resolve(manifest_path).display().to_string(),
        git_ref: plans.first().map(|p| p.git_ref.clone()).unwrap_or(git_ref),
        plans,
    })
}

/// `--shell` output: one dispatch line per plan, refusing when any plan lacks labels.
pub fn shell_lines(plan: &Plan) -> Result<Vec<String>> {
    let missing: Vec<&str> = plan
        .plans
        .iter()
        .filter(|p| p.gh_workflow_run.is_none())
        .map(|p| p.fixture_id.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(LegacyError::Refused(format!(
            "runner labels are not declared for {}; pass --runner-labels-json with site-local labels",
            missing.join(", ")
        )));
    }
    Ok(plan
        .plans
        .iter()
        .filter_map(|p| p.gh_workflow_run.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_shlex() {
        assert_eq!(shell_quote("abc-1.2/x"), "abc-1.2/x");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
        assert_eq!(
            shell_quote(
                r#"latency_runner_labels_json=["self-hosted","linux","vulkan-strix-halo"]"#
            ),
            r#"'latency_runner_labels_json=["self-hosted","linux","vulkan-strix-halo"]'"#
        );
    }

    #[test]
    fn github_urls() {
        assert_eq!(
            github_repo_from_url("git@github.com:ericflo/kiln.git").as_deref(),
            Some("ericflo/kiln")
        );
        assert_eq!(
            github_repo_from_url("https://github.com/ericflo/kiln").as_deref(),
            Some("ericflo/kiln")
        );
        assert_eq!(github_repo_from_url("https://gitlab.com/a/b"), None);
        assert_eq!(github_repo_from_url("https://github.com/a/b/c"), None);
    }

    #[test]
    fn runner_matching_is_case_insensitive() {
        let payload = qual_json::from_str(
            r#"[{"runners":[{"name":"r1","status":"online","busy":false,"labels":[{"name":"self-hosted"},{"name":"Linux"},{"name":"cuda-rtx4090"}]},{"name":"r2","status":"offline","busy":false,"labels":["self-hosted"]}]}]"#,
        )
        .unwrap();
        let labels = vec![
            "self-hosted".to_string(),
            "linux".into(),
            "cuda-rtx4090".into(),
        ];
        let c = evaluate_runners("o/r", Some(&labels), &payload);
        assert_eq!(c.status, "matching_online_idle");
        assert_eq!(c.total_runners, 2);
        assert_eq!(c.idle_matching_runner_count, 1);
        assert_eq!(
            c.matching_runners[0].labels,
            ["cuda-rtx4090", "Linux", "self-hosted"]
        );
        let c = evaluate_runners("o/r", None, &payload);
        assert_eq!(c.status, "labels_required");
        let empty = qual_json::from_str(r#"{"runners":[]}"#).unwrap();
        assert_eq!(
            evaluate_runners("o/r", Some(&labels), &empty).status,
            "no_matching_runner"
        );
    }

    #[test]
    fn gh_missing_and_failing_are_clear_offline_errors() {
        let missing = GhCli {
            program: "/nonexistent/gh-kiln-test".into(),
        };
        assert_eq!(
            missing.list_runners("o/r").unwrap_err(),
            "gh CLI is required for --check-runners"
        );
        let failing = GhCli {
            program: "false".into(),
        };
        assert!(failing
            .list_runners("o/r")
            .unwrap_err()
            .starts_with("failed to list GitHub runners for o/r:"));
    }
}
