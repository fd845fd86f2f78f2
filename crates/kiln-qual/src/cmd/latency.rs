//! `kiln-qual latency check|run|write|import|lock|plan`: the legacy backend latency fixture
//! pipeline (every rule lives in `qual-latency`; this module parses arguments and prints).
//!
//! The repository root is the git top level of the current directory (of an absolute
//! manifest's directory, when the manifest is given as an absolute path). Relative manifest,
//! output and log-directory paths resolve against that root (as the original scripts did
//! against theirs); a relative `RAW_LOG` for `write` and a relative bundle for `import`
//! resolve against the current directory. Human output goes to stdout, diagnostics to
//! stderr; `--json` prints the original scripts' JSON documents on stdout instead
//! (`{"ok": true, ...}` or `{"ok": false, "error"|"errors": ...}`). Exit codes: 0 success,
//! 1 refusal or failed check, 2 usage.

use crate::exit;
use crate::output::{errln, esc, esc_path, out, outln};
use clap::{Args, Subcommand, ValueEnum};
use qual_latency::git::Repo;
use qual_latency::manifest::{CheckOutcome, DEFAULT_MANIFEST};
use qual_latency::LegacyError;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `kiln-qual latency ...`
#[derive(Subcommand, Debug)]
pub enum LatencyCommand {
    /// Validate the fixture manifest (non-strict, or the covered gate with --require-covered).
    Check(CheckArgs),
    /// Run a fixture's command, capture its raw log, and write its result artifact.
    Run(RunArgs),
    /// Write a result artifact from an already captured raw log.
    Write(WriteArgs),
    /// Validate and import a CI artifact bundle (zip or extracted directory).
    Import(ImportArgs),
    /// Lock reviewed thresholds from validated results, with explicit headroom.
    Lock(LockArgs),
    /// Print the manual-workflow dispatch plan for fixtures that still need results.
    Plan(PlanArgs),
}

/// Result status to record.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StatusArg {
    /// The run passed.
    Passed,
    /// The run failed (recorded, but never validates).
    Failed,
}

impl StatusArg {
    fn as_str(self) -> &'static str {
        match self {
            StatusArg::Passed => "passed",
            StatusArg::Failed => "failed",
        }
    }
}

/// `latency check`
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The fixture manifest.
    #[arg(value_parser = super::args::Path, default_value = DEFAULT_MANIFEST)]
    pub manifest: PathBuf,
    /// Require every fixture locked with a tracked, validated, passing result artifact.
    #[arg(long)]
    pub require_covered: bool,
    /// Print the JSON report.
    #[arg(long)]
    pub json: bool,
}

/// `latency run`
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The fixture manifest.
    #[arg(value_parser = super::args::Path)]
    pub manifest: PathBuf,
    /// The fixture to run.
    pub fixture_id: String,
    /// Raw-log directory (must stay git-ignored).
    #[arg(long, default_value = qual_latency::paths::RAW_DIR, value_parser = super::args::path_text)]
    pub log_dir: String,
    /// Artifact path (default: the fixture's result_artifact).
    #[arg(value_parser = super::args::Path, long)]
    pub output: Option<PathBuf>,
    /// Status to record.
    #[arg(long, value_enum, default_value = "passed")]
    pub status: StatusArg,
    /// Deadline for the fixture command, in seconds (1..=604800, one week).
    #[arg(long, default_value_t = 3600, value_parser = super::args::count::<u64>(1..=604_800))]
    pub timeout: u64,
    /// Seconds between SIGTERM and SIGKILL when the deadline passes (0..=3600).
    #[arg(long, default_value_t = 5, value_parser = super::args::count::<u64>(0..=3600))]
    pub term_grace: u64,
    /// Print the JSON report.
    #[arg(long)]
    pub json: bool,
}

/// `latency write`
#[derive(Args, Debug)]
pub struct WriteArgs {
    /// The fixture manifest.
    #[arg(value_parser = super::args::Path)]
    pub manifest: PathBuf,
    /// The fixture.
    pub fixture_id: String,
    /// The captured benchmark log (relative paths resolve against the current directory).
    #[arg(value_parser = super::args::Path)]
    pub raw_log: PathBuf,
    /// Artifact path (default: the fixture's result_artifact).
    #[arg(value_parser = super::args::Path, long)]
    pub output: Option<PathBuf>,
    /// Status to record.
    #[arg(long, value_enum, default_value = "passed")]
    pub status: StatusArg,
    /// Print the JSON report.
    #[arg(long)]
    pub json: bool,
}

/// `latency import`
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A downloaded artifact zip or its extracted directory.
    #[arg(value_parser = super::args::Path)]
    pub bundle: PathBuf,
    /// The fixture manifest.
    #[arg(value_parser = super::args::Path, long, default_value = DEFAULT_MANIFEST)]
    pub manifest: PathBuf,
    /// Select the result artifact of this fixture.
    #[arg(long)]
    pub fixture_id: Option<String>,
    /// Replace existing files with different bytes (only after review chose this run).
    #[arg(long)]
    pub force: bool,
    /// Print the JSON report.
    #[arg(long)]
    pub json: bool,
}

/// `latency lock`
#[derive(Args, Debug)]
pub struct LockArgs {
    /// The fixture manifest.
    #[arg(value_parser = super::args::Path, default_value = DEFAULT_MANIFEST)]
    pub manifest: PathBuf,
    /// Relative headroom in [0, 1): `<=` limits become observed × (1 + H), `>=` floors
    /// observed × (1 − H), rounded to 6 decimals.
    #[arg(long)]
    pub headroom: f64,
    /// Fixture to lock (repeatable; default: all).
    #[arg(long = "fixture-id")]
    pub fixture_ids: Vec<String>,
    /// Write the manifest here instead of in place.
    #[arg(value_parser = super::args::Path, long)]
    pub output: Option<PathBuf>,
    /// Validate only; write nothing.
    #[arg(long)]
    pub check: bool,
    /// Print the JSON report.
    #[arg(long)]
    pub json: bool,
}

/// `latency plan`
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The fixture manifest.
    #[arg(value_parser = super::args::Path, default_value = DEFAULT_MANIFEST)]
    pub manifest: PathBuf,
    /// Plan this fixture (repeatable).
    #[arg(long = "fixture-id")]
    pub fixture_ids: Vec<String>,
    /// Also plan fixtures that are already locked with an artifact.
    #[arg(long)]
    pub include_covered: bool,
    /// Site-local runner labels as a JSON array (overrides each fixture's labels).
    #[arg(long)]
    pub runner_labels_json: Option<String>,
    /// Git ref to dispatch (default: the current branch, or HEAD).
    #[arg(long = "ref")]
    pub git_ref: Option<String>,
    /// Query GitHub runner availability with `gh api` (needs network access).
    #[arg(long)]
    pub check_runners: bool,
    /// GitHub repository owner/name (default: from remote.origin.url).
    #[arg(long)]
    pub github_repo: Option<String>,
    /// Print only the dispatch commands, one per line.
    #[arg(long, conflicts_with = "json")]
    pub shell: bool,
    /// Print the full plan (every command, runner check) as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `kiln-qual latency ...`.
pub fn run(c: LatencyCommand) -> i32 {
    match c {
        LatencyCommand::Check(a) => check(a),
        LatencyCommand::Run(a) => run_fixture(a),
        LatencyCommand::Write(a) => write(a),
        LatencyCommand::Import(a) => import(a),
        LatencyCommand::Lock(a) => lock(a),
        LatencyCommand::Plan(a) => plan(a),
    }
}

fn fail(what: &str, json: bool, e: &LegacyError) -> i32 {
    if json {
        crate::output::print_json(&json!({"ok": false, "error": e.to_string()}));
    }
    errln!(
        "kiln-qual: failed to {}: {}",
        esc(what),
        esc(&e.to_string())
    );
    exit::FAILED
}

/// The repository the manifest belongs to: the git top level of an absolute manifest's
/// directory, otherwise of the current directory (relative manifests resolve against it).
fn repo_or_fail(what: &str, json: bool, manifest: &Path) -> Result<Repo, i32> {
    let found = match manifest.parent().filter(|_| manifest.is_absolute()) {
        Some(dir) => Repo::discover_from(dir),
        None => Repo::discover(),
    };
    found.map_err(|e| fail(what, json, &e))
}

fn from_cwd(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    }
}

fn check(a: CheckArgs) -> i32 {
    let what = "check the latency fixture manifest";
    let repo = match repo_or_fail(what, a.json, &a.manifest) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let manifest = repo.root().join(&a.manifest);
    match qual_latency::manifest::check_manifest_file(&repo, &manifest, a.require_covered) {
        Err(e) => fail(what, a.json, &e),
        Ok(CheckOutcome::Passed(s)) => {
            if a.json {
                crate::output::print_json(&json!({
                    "ok": true,
                    "status": s.status,
                    "fixtures": s.fixtures,
                    "missing_fixture_slots": s.missing_fixture_slots,
                }));
            } else {
                outln!(
                    "latency manifest {} is valid{}: status {}, {} fixtures, {} missing fixture slots",
                    esc_path(&a.manifest),
                    if a.require_covered { " and covered" } else { "" },
                    esc(&s.status),
                    s.fixtures,
                    s.missing_fixture_slots
                );
            }
            exit::OK
        }
        Ok(CheckOutcome::Failed(errors)) => {
            if a.json {
                crate::output::print_json(&json!({"ok": false, "errors": errors}));
            }
            errln!(
                "kiln-qual: failed to {what}: {} has {} problem{}{}:",
                esc_path(&a.manifest),
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                if a.require_covered {
                    " (--require-covered)"
                } else {
                    ""
                }
            );
            for e in &errors {
                errln!("  - {}", esc(e));
            }
            exit::FAILED
        }
    }
}

fn sorted_metric_names(artifact: &qual_json::Value) -> Vec<String> {
    let mut v: Vec<String> = artifact
        .get("metrics")
        .and_then(qual_json::Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn run_fixture(a: RunArgs) -> i32 {
    let what = format!("run latency fixture {}", a.fixture_id);
    let repo = match repo_or_fail(&what, a.json, &a.manifest) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let manifest = repo.root().join(&a.manifest);
    let sandbox = match qual_runner::case_box::for_directory(repo.root()) {
        Ok(s) => s,
        Err(e) => return fail(&what, a.json, &LegacyError::Refused(e)),
    };
    let req = qual_latency::run::RunRequest {
        sandbox,
        manifest_path: &manifest,
        fixture_id: &a.fixture_id,
        log_dir: &a.log_dir,
        output: a.output.as_deref(),
        status: a.status.as_str(),
        limits: qual_latency::run::RunLimits {
            timeout: Duration::from_secs(a.timeout),
            term_grace: Duration::from_secs(a.term_grace),
            ..Default::default()
        },
        // The global `-q` also stops the echo of the command's output.
        echo: !crate::output::quiet(),
    };
    match qual_latency::run::run_fixture(&repo, &req) {
        Err(e) => fail(&what, a.json, &e),
        Ok(r) => {
            let metrics = sorted_metric_names(&r.artifact);
            if a.json {
                crate::output::print_json(&json!({
                    "ok": true,
                    "fixture_id": r.fixture_id,
                    "backend": r.backend,
                    "raw_log": r.raw_log.display().to_string(),
                    "output": r.output.display().to_string(),
                    "metrics": metrics,
                }));
            } else {
                outln!(
                    "wrote {} ({} metrics: {}) from raw log {} in {:.1}s{}",
                    esc_path(&r.output),
                    metrics.len(),
                    esc(&metrics.join(", ")),
                    esc_path(&r.raw_log),
                    r.execution.wall.as_secs_f64(),
                    if r.execution.group_residue {
                        "; leftover processes of the fixture were killed"
                    } else {
                        ""
                    }
                );
            }
            exit::OK
        }
    }
}

fn write(a: WriteArgs) -> i32 {
    let what = format!("write the latency artifact of {}", a.fixture_id);
    let repo = match repo_or_fail(&what, a.json, &a.manifest) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let manifest = repo.root().join(&a.manifest);
    let log = from_cwd(&a.raw_log);
    let req = qual_latency::run::WriteRequest {
        manifest_path: &manifest,
        fixture_id: &a.fixture_id,
        log_path: &log,
        output: a.output.as_deref(),
        status: a.status.as_str(),
    };
    match qual_latency::run::write_from_log(&repo, &req) {
        Err(e) => fail(&what, a.json, &e),
        Ok((output, artifact)) => {
            let metrics = sorted_metric_names(&artifact);
            if a.json {
                crate::output::print_json(&json!({
                    "ok": true,
                    "fixture_id": a.fixture_id,
                    "backend": artifact.get("backend").and_then(qual_json::Value::as_str),
                    "output": output.display().to_string(),
                    "metrics": metrics,
                }));
            } else {
                outln!(
                    "wrote {} ({} metrics: {})",
                    esc_path(&output),
                    metrics.len(),
                    esc(&metrics.join(", "))
                );
            }
            exit::OK
        }
    }
}

fn import(a: ImportArgs) -> i32 {
    let what = format!("import latency artifact bundle {}", a.bundle.display());
    let repo = match repo_or_fail(&what, a.json, &a.manifest) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let manifest = repo.root().join(&a.manifest);
    let bundle = from_cwd(&a.bundle);
    let req = qual_latency::import::ImportRequest {
        bundle: &bundle,
        manifest_path: &manifest,
        fixture_id: a.fixture_id.as_deref(),
        force: a.force,
        limits: Default::default(),
    };
    // SIGINT/SIGTERM stop the extraction at the next chunk so its directory is removed.
    if let Err(e) = qual_exec::signals::install_forwarding() {
        errln!("kiln-qual: failed to install signal handlers: {e}");
        return exit::FAILED;
    }
    match qual_latency::import::import_bundle(&repo, &req) {
        Err(e) => fail(&what, a.json, &e),
        Ok(r) => {
            if a.json {
                crate::output::print_json(&json!({
                    "ok": true,
                    "fixture_id": r.fixture_id,
                    "backend": r.backend,
                    "result_artifact": r.result_artifact,
                    "raw_log": r.raw_log,
                    "metrics": r.metrics,
                }));
            } else {
                outln!(
                    "imported {} and raw log {} for fixture {} ({} metrics)",
                    esc(&r.result_artifact),
                    esc(&r.raw_log),
                    esc(&r.fixture_id),
                    r.metrics.len()
                );
            }
            exit::OK
        }
    }
}

fn lock(a: LockArgs) -> i32 {
    let what = "lock latency thresholds";
    let repo = match repo_or_fail(what, a.json, &a.manifest) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let manifest = repo.root().join(&a.manifest);
    let output = a.output.as_ref().map(|p| repo.root().join(p));
    let req = qual_latency::lock::LockRequest {
        manifest_path: &manifest,
        output: output.as_deref(),
        headroom: a.headroom,
        fixture_ids: &a.fixture_ids,
        check_only: a.check,
    };
    match qual_latency::lock::lock_thresholds(&repo, &req) {
        Err(e) => fail(what, a.json, &e),
        Ok(s) => {
            if a.json {
                crate::output::print_json(&json!({
                    "ok": true,
                    "status": s.status,
                    "fixtures": s.fixtures,
                    "locked_fixture_ids": match &s.locked_fixture_ids {
                        Some(ids) => json!(ids),
                        None => json!("all"),
                    },
                    "headroom": s.headroom,
                    "output": s.output.as_ref().map(|p| p.display().to_string()),
                }));
            } else {
                let which = s
                    .locked_fixture_ids
                    .as_ref()
                    .map_or_else(|| "all fixtures".to_string(), |ids| ids.join(", "));
                let which = esc(&which);
                match &s.output {
                    Some(p) => outln!(
                        "locked {which} with headroom {}; manifest status {}; wrote {}",
                        s.headroom,
                        esc(&s.status),
                        esc_path(p)
                    ),
                    None => outln!(
                        "{which} would lock with headroom {}; manifest status would be {} (--check: nothing written)",
                        s.headroom,
                        esc(&s.status)
                    ),
                }
            }
            exit::OK
        }
    }
}

fn plan(a: PlanArgs) -> i32 {
    let what = "plan latency fixture dispatch";
    let repo = match repo_or_fail(what, a.json, &a.manifest) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let manifest = repo.root().join(&a.manifest);
    let req = qual_latency::plan::PlanRequest {
        fixture_ids: &a.fixture_ids,
        include_covered: a.include_covered,
        runner_labels_json: a.runner_labels_json.as_deref(),
        git_ref: a.git_ref.as_deref(),
        check_runners: a.check_runners,
        github_repo: a.github_repo.as_deref(),
    };
    let inventory = qual_latency::plan::GhCli::default();
    let plan = match qual_latency::plan::plan_dispatch(&repo, &manifest, &req, &inventory) {
        Ok(p) => p,
        Err(e) => return fail(what, a.json, &e),
    };
    if a.shell {
        match qual_latency::plan::shell_lines(&plan) {
            Ok(lines) => {
                for l in lines {
                    outln!("{}", esc(&l));
                }
                exit::OK
            }
            Err(e) => fail(what, false, &e),
        }
    } else if a.json {
        crate::output::print_json(&plan);
        exit::OK
    } else {
        print_plan(&plan);
        exit::OK
    }
}

/// The plan as a table on stdout: one row per fixture, then where the commands are.
fn print_plan(plan: &qual_latency::plan::Plan) {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".to_owned(),
        other => other.to_string(),
    };
    let rows: Vec<Vec<String>> = plan
        .plans
        .iter()
        .map(|p| {
            vec![
                p.fixture_id.clone(),
                text(&p.backend),
                text(&p.threshold_state),
                if p.artifact_exists {
                    "present"
                } else {
                    "missing"
                }
                .to_owned(),
                p.runner_labels
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |l| l.join(",")),
                match (&p.gh_workflow_run, &p.github_runner_check) {
                    (None, _) => "needs --runner-labels-json".to_owned(),
                    (Some(_), Some(c)) => format!("ready ({})", c.status),
                    (Some(_), None) => "ready".to_owned(),
                },
            ]
        })
        .collect();
    outln!(
        "dispatch plan for {} at ref {} ({} fixtures)",
        esc(&plan.manifest),
        esc(&plan.git_ref),
        plan.plans.len()
    );
    if rows.is_empty() {
        outln!("nothing to dispatch: every selected fixture is locked with an artifact");
        return;
    }
    out!(
        "{}",
        crate::output::table(
            &[
                "fixture",
                "backend",
                "threshold",
                "artifact",
                "runner labels",
                "dispatch"
            ],
            &rows
        )
    );
    outln!("--shell prints the dispatch commands; --json prints every command of the plan");
}
