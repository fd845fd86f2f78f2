//! The dispatch planner (the original `--self-test` cases), with a fake runner inventory:
//! tests never reach the network.

use crate::common;

use qual_json::Value;
use qual_latency::git::Repo;
use qual_latency::plan::{plan_dispatch, shell_lines, PlanRequest, RunnerInventory};
use std::cell::Cell;

struct FakeInventory {
    payload: &'static str,
    calls: Cell<usize>,
}

impl RunnerInventory for FakeInventory {
    fn list_runners(&self, repo: &str) -> Result<Value, String> {
        assert_eq!(repo, "octo/kiln");
        self.calls.set(self.calls.get() + 1);
        Ok(qual_json::from_str(self.payload).unwrap())
    }
}

struct Offline;

impl RunnerInventory for Offline {
    fn list_runners(&self, repo: &str) -> Result<Value, String> {
        Err(format!(
            "failed to list GitHub runners for {repo}: could not resolve host"
        ))
    }
}

const MANIFEST: &str = "docs/fixtures.json";

fn planner_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    common::git(root, &["init", "-q", "-b", "main"]);
    common::git(
        root,
        &["remote", "add", "origin", "git@github.com:octo/kiln.git"],
    );
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join("bench-results/backend-latency")).unwrap();
    std::fs::write(
        root.join("bench-results/backend-latency/metal.json"),
        "{}\n",
    )
    .unwrap();
    let metric = r#"[{"name":"latency_ms","unit":"ms","comparison":"<=","max":null}]"#;
    let manifest = format!(
        r#"{{"schema_version":1,"status":"fixture_required","fixtures":[
  {{"id":"cuda_fixture","backend":"cuda","hardware":"h","runner_labels":["self-hosted","linux","cuda"],"source":"s","command":"c","result_artifact":"bench-results/backend-latency/cuda.json","threshold_state":"pending_fixture_result","metrics":{metric}}},
  {{"id":"metal_fixture","backend":"metal","hardware":"h","source":"s","command":"c","result_artifact":"bench-results/backend-latency/metal.json","threshold_state":"locked_threshold","metrics":{metric}}},
  {{"id":"rocm_fixture","backend":"rocm","hardware":"h","source":"s","command":"c","result_artifact":"bench-results/backend-latency/rocm.json","threshold_state":"pending_fixture_result","metrics":{metric}}}
]}}"#
    );
    std::fs::write(root.join(MANIFEST), manifest).unwrap();
    common::git(root, &["add", "-A"]);
    common::git(root, &["commit", "-q", "-m", "manifest"]);
    dir
}

const INVENTORY: &str = r#"[{"total_count":2,"runners":[
  {"name":"gpu-1","status":"online","busy":false,"labels":[{"name":"self-hosted"},{"name":"Linux"},{"name":"cuda"}]},
  {"name":"cpu-1","status":"online","busy":true,"labels":[{"name":"self-hosted"},{"name":"linux"}]}
]}]"#;

#[test]
fn default_plan_runner_check_and_refusals() {
    let dir = planner_repo();
    let repo = Repo::new(dir.path());
    let manifest = repo.join(MANIFEST);
    let inv = FakeInventory {
        payload: INVENTORY,
        calls: Cell::new(0),
    };
    let plan = plan_dispatch(
        &repo,
        &manifest,
        &PlanRequest {
            check_runners: true,
            ..Default::default()
        },
        &inv,
    )
    .unwrap();
    assert_eq!(inv.calls.get(), 1, "one query for all fixtures");
    let ids: Vec<&str> = plan.plans.iter().map(|p| p.fixture_id.as_str()).collect();
    assert_eq!(ids, ["cuda_fixture", "rocm_fixture"]);
    assert_eq!(plan.git_ref, "main");
    let cuda = &plan.plans[0];
    assert_eq!(
        cuda.gh_workflow_run.as_deref(),
        Some("gh workflow run perf-regression-nightly.yml --ref main --field ref=main --field latency_fixture_id=cuda_fixture --field 'latency_runner_labels_json=[\"self-hosted\",\"linux\",\"cuda\"]'")
    );
    assert_eq!(
        cuda.artifact_name_template,
        "backend-latency-cuda_fixture-RUN_ID"
    );
    assert_eq!(
        cuda.artifact_download_dir_template,
        "$TMPDIR/kiln-backend-latency/cuda_fixture-RUN_ID"
    );
    assert_eq!(
        cuda.gh_run_download,
        "gh run download RUN_ID --name backend-latency-cuda_fixture-RUN_ID --dir $TMPDIR/kiln-backend-latency/cuda_fixture-RUN_ID"
    );
    assert_eq!(
        cuda.lock_threshold,
        "kiln-qual latency lock docs/fixtures.json --headroom 0.10 --fixture-id cuda_fixture"
    );
    assert_eq!(
        cuda.covered_gate_check,
        "kiln-qual latency check docs/fixtures.json --require-covered"
    );
    let check = cuda.github_runner_check.as_ref().unwrap();
    assert_eq!(check.repo, "octo/kiln");
    assert_eq!(check.status, "matching_online_idle");
    assert_eq!(check.total_runners, 2);
    assert_eq!(check.idle_matching_runner_count, 1);
    let rocm = &plan.plans[1];
    assert!(rocm.needs_runner_labels);
    assert_eq!(rocm.gh_workflow_run, None);
    assert_eq!(
        rocm.github_runner_check.as_ref().unwrap().status,
        "labels_required"
    );
    // JSON shape: key order and the optional runner check.
    let text = serde_json::to_string(&plan.plans[1]).unwrap();
    assert!(text.starts_with(r#"{"fixture_id":"rocm_fixture","backend":"rocm","threshold_state":"pending_fixture_result","result_artifact":"bench-results/backend-latency/rocm.json","artifact_exists":false,"runner_labels":null,"needs_runner_labels":true,"workflow":".github/workflows/perf-regression-nightly.yml","ref":"main","gh_workflow_run":null"#), "{text}");

    // --shell refuses while a planned fixture has no labels.
    assert_eq!(
        shell_lines(&plan).unwrap_err().to_string(),
        "runner labels are not declared for rocm_fixture; pass --runner-labels-json with site-local labels"
    );

    // Override labels, empty inventory: no matching runner.
    let empty = FakeInventory {
        payload: r#"{"runners":[]}"#,
        calls: Cell::new(0),
    };
    let plan = plan_dispatch(
        &repo,
        &manifest,
        &PlanRequest {
            check_runners: true,
            runner_labels_json: Some(r#"["self-hosted","rocm-gfx1151"]"#),
            ..Default::default()
        },
        &empty,
    )
    .unwrap();
    assert!(plan
        .plans
        .iter()
        .all(|p| p.github_runner_check.as_ref().unwrap().status == "no_matching_runner"));
    assert_eq!(shell_lines(&plan).unwrap().len(), 2);

    // Bad override labels and unknown ids are refused.
    let e = plan_dispatch(
        &repo,
        &manifest,
        &PlanRequest {
            runner_labels_json: Some(r#"["self-hosted",""]"#),
            ..Default::default()
        },
        &empty,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "--runner-labels-json[1] must be a non-empty string"
    );
    let e = plan_dispatch(
        &repo,
        &manifest,
        &PlanRequest {
            runner_labels_json: Some("[oops"),
            ..Default::default()
        },
        &empty,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("--runner-labels-json must be valid JSON:"),
        "{e}"
    );
    let ids = ["zz".to_string(), "aa".to_string()];
    let e = plan_dispatch(
        &repo,
        &manifest,
        &PlanRequest {
            fixture_ids: &ids,
            ..Default::default()
        },
        &empty,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "fixture id not found in manifest: aa, zz");

    // Selection: a named locked fixture is planned; --include-covered plans everything.
    let ids = ["metal_fixture".to_string()];
    let plan = plan_dispatch(
        &repo,
        &manifest,
        &PlanRequest {
            fixture_ids: &ids,
            ..Default::default()
        },
        &empty,
    )
    .unwrap();
    assert_eq!(plan.plans.len(), 1);
    assert!(plan.plans[0].artifact_exists);
    let plan = plan_dispatch(
        &repo,
        &manifest,
        &PlanRequest {
            include_covered: true,
            ..Default::default()
        },
        &empty,
    )
    .unwrap();
    assert_eq!(plan.plans.len(), 3);
    assert_eq!(empty.calls.get(), 1, "no query without --check-runners");

    // Offline: the runner query fails clearly, and only when asked.
    let e = plan_dispatch(
        &repo,
        &manifest,
        &PlanRequest {
            check_runners: true,
            ..Default::default()
        },
        &Offline,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to list GitHub runners for octo/kiln: could not resolve host"
    );
    plan_dispatch(&repo, &manifest, &PlanRequest::default(), &Offline).unwrap();
}

#[test]
fn check_runners_needs_a_github_repository() {
    let dir = planner_repo();
    let root = dir.path();
    common::git(
        root,
        &[
            "remote",
            "set-url",
            "origin",
            "https://gitlab.example/octo/kiln.git",
        ],
    );
    let repo = Repo::new(root);
    let e = plan_dispatch(
        &repo,
        &repo.join(MANIFEST),
        &PlanRequest {
            check_runners: true,
            ..Default::default()
        },
        &Offline,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "--check-runners requires --github-repo or a GitHub remote.origin.url"
    );
    let plan = plan_dispatch(
        &repo,
        &repo.join(MANIFEST),
        &PlanRequest {
            check_runners: true,
            github_repo: Some("octo/kiln"),
            git_ref: Some("v1"),
            ..Default::default()
        },
        &FakeInventory {
            payload: INVENTORY,
            calls: Cell::new(0),
        },
    )
    .unwrap();
    assert_eq!(plan.git_ref, "v1");
}
