//! `kiln-qual fleet plan|dispatch|status|collect|report|workflow`: thin wiring of `qual_fleet`
//! (the plan, Slurm dispatch and state, the GitHub Actions workflow, collection, the report).
//!
//! Exit codes: `plan` 0 valid, 1 invalid; `dispatch` 0 submitted (or printed with
//! `--dry-run`), 1 refused (the commit is not pushed, a scheduler error, an earlier dispatch);
//! `status` 0 every task final, 1 a task not final after `--wait`, or Slurm unreachable;
//! `collect` and `report` 0 every planned target verified, 1 any refused or missing;
//! `workflow` 0 written, 1 not. 2 is a usage error everywhere.

use crate::exit;
use crate::output::{errln, esc, out, outln};
use clap::{Args, Subcommand};
use qual_fleet::collect::Outcome;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `kiln-qual fleet ...`
#[derive(Subcommand, Debug)]
pub enum FleetCommand {
    /// Validate a fleet plan and list its targets.
    Plan(PlanArgs),
    /// Dispatch the plan's Slurm targets as `sbatch` job arrays (`--dry-run` prints the exact
    /// commands and writes nothing).
    Dispatch(DispatchArgs),
    /// Each dispatched target's Slurm job state (pending, running, completed, failed, timed
    /// out, cancelled), from `scontrol`, else `sacct`.
    Status(StatusArgs),
    /// Bring each target's evidence into the evidence tree and verify it: receipt against its
    /// run directory, attestation against the host's planned key, host and commit as planned,
    /// the publication gate. Anything refused is listed by name.
    Collect(CollectArgs),
    /// The fleet report over a collected evidence tree (Markdown on stdout).
    Report(TreeArgs),
    /// Generate the GitHub Actions workflow (`workflow_dispatch`, a matrix over the targets'
    /// `runs_on` labels).
    Workflow(WorkflowArgs),
}

/// Arguments of `fleet plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The fleet plan (`kiln-qual.fleet-plan.v1`).
    #[arg(value_parser = super::args::Path, value_name = "PLAN")]
    pub plan: PathBuf,
    /// Print the plan check as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `fleet dispatch`.
#[derive(Args, Debug)]
pub struct DispatchArgs {
    /// The plan and the evidence tree (which every node must reach).
    #[command(flatten)]
    pub tree: TreeArgs,
    /// The kiln-qual program on the nodes.
    #[arg(long, default_value = "kiln-qual", value_name = "CMD")]
    pub kiln_qual: String,
    /// Print the exact `sbatch` commands (and, with --json, the task scripts); submit nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the dispatch as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `fleet status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The evidence directory of a dispatch.
    #[arg(long, value_parser = super::args::Path, value_name = "DIR")]
    pub evidence: PathBuf,
    /// Ask again every 2 s until every task is final, for at most this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait: u64,
    /// Print the states as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The plan and evidence tree of `fleet collect` and `fleet report`.
#[derive(Args, Debug)]
pub struct TreeArgs {
    /// The fleet plan.
    #[arg(value_parser = super::args::Path, value_name = "PLAN")]
    pub plan: PathBuf,
    /// The evidence directory: Slurm tasks hand their evidence over into `<DIR>/inbox/`,
    /// collected evidence lies in `<DIR>/targets/`.
    #[arg(long, value_parser = super::args::Path, value_name = "DIR")]
    pub evidence: PathBuf,
    /// The repository that must have the plan's commit on its upstream branch (dispatch) and
    /// that receipts are verified against (default: the git top level of the current directory).
    #[arg(long, value_parser = super::args::Path, value_name = "R")]
    pub root: Option<PathBuf>,
}

impl TreeArgs {
    /// The plan (every violation printed when it is refused) and the repository root.
    fn load(&self) -> Result<(qual_fleet::Plan, PathBuf), i32> {
        let plan = load_plan(&self.plan)?;
        Ok((plan, self.root.clone().unwrap_or_else(default_root)))
    }
}

/// Arguments of `fleet collect`.
#[derive(Args, Debug)]
pub struct CollectArgs {
    /// The plan and the evidence tree.
    #[command(flatten)]
    pub tree: TreeArgs,
    /// Where evidence arrived: a directory holding `<target>/` or artifact directories (`gh run
    /// download`), or an artifact zip; repeatable (default: `<DIR>/inbox` when it exists).
    #[arg(long = "from", value_parser = super::args::Path, value_name = "SRC")]
    pub from: Vec<PathBuf>,
    /// Print the collection as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `fleet workflow`.
#[derive(Args, Debug)]
pub struct WorkflowArgs {
    /// The fleet plan.
    #[arg(value_parser = super::args::Path, value_name = "PLAN")]
    pub plan: PathBuf,
    /// The kiln-qual program on the runners.
    #[arg(long, default_value = "kiln-qual", value_name = "CMD")]
    pub kiln_qual: String,
    /// Write the workflow here (never replaced); default: stdout.
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Runs `kiln-qual fleet ...`.
pub fn run(c: FleetCommand) -> i32 {
    match c {
        FleetCommand::Plan(a) => plan(a),
        FleetCommand::Dispatch(a) => dispatch(a),
        FleetCommand::Status(a) => status(a),
        FleetCommand::Collect(a) => collect(a),
        FleetCommand::Report(a) => report(a),
        FleetCommand::Workflow(a) => workflow(a),
    }
}

use super::receipt::default_root;

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Prints why a plan cannot be used: the error, then every violation.
fn print_plan_error(e: &qual_fleet::PlanError) {
    errln!("kiln-qual: failed to {}", esc(&e.to_string()));
    if let qual_fleet::PlanError::Invalid { violations, .. } = e {
        for v in violations {
            errln!("  {}", esc(&v.to_string()));
        }
    }
}

/// Loads the plan, printing every violation on failure.
fn load_plan(path: &Path) -> Result<qual_fleet::Plan, i32> {
    qual_fleet::plan::load(path).map_err(|e| {
        print_plan_error(&e);
        exit::FAILED
    })
}

fn plan(a: PlanArgs) -> i32 {
    let plan = match qual_fleet::plan::load(&a.plan) {
        Ok(p) => p,
        Err(e) => {
            if a.json {
                let violations = match &e {
                    qual_fleet::PlanError::Invalid { violations, .. } => violations.clone(),
                    other => vec![qual_json::Violation::new("", other.to_string())],
                };
                crate::output::print_json(
                    &serde_json::json!({"ok": false, "violations": violations}),
                );
                return exit::FAILED;
            }
            print_plan_error(&e);
            return exit::FAILED;
        }
    };
    if a.json {
        let targets: Vec<_> = plan
            .targets
            .iter()
            .map(|t| serde_json::json!({"id": t.id, "host_id": t.host_id, "workload": t.workload, "variant": t.variant, "slurm": t.slurm.is_some(), "runs_on": t.runs_on}))
            .collect();
        crate::output::print_json(
            &serde_json::json!({"ok": true, "fleet_id": plan.fleet_id, "commit": plan.commit, "targets": targets}),
        );
        return exit::OK;
    }
    outln!(
        "OK {} (fleet {}, commit {})",
        esc(&a.plan.display().to_string()),
        plan.fleet_id,
        plan.commit
    );
    for t in &plan.targets {
        let engines = [
            t.slurm
                .as_ref()
                .map(|s| format!("slurm partition {}", s.partition)),
            t.runs_on
                .as_ref()
                .map(|l| format!("runs-on [{}]", l.join(", "))),
        ];
        let engines: Vec<String> = engines.into_iter().flatten().collect();
        outln!(
            "  {}  {}  {} / {}  ({})",
            t.id,
            t.host_id,
            t.workload,
            t.variant,
            engines.join("; ")
        );
    }
    exit::OK
}

/// The plan's commit must be reachable from its upstream branch in `root` (pushed).
fn require_pushed(plan: &qual_fleet::Plan, root: &Path) -> Result<(), String> {
    match qual_probe::git::Repo::new(root).is_ancestor(&plan.commit, &plan.upstream) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "dispatch: the plan's commit {} is not reachable from {} in {} (push it, then fetch)",
            plan.commit,
            plan.upstream,
            root.display()
        )),
        Err(e) => Err(format!("dispatch: check that the commit is pushed: {e}")),
    }
}

fn dispatch(a: DispatchArgs) -> i32 {
    let (plan, root) = match a.tree.load() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let opts = qual_fleet::slurm::TaskOptions {
        kiln_qual: a.kiln_qual.clone(),
        evidence: absolute(&a.tree.evidence),
    };
    let refuse = |e: String| {
        errln!("kiln-qual: failed to {}", esc(&e));
        exit::FAILED
    };
    if let Err(e) = require_pushed(&plan, &root) {
        return refuse(e);
    }
    if a.dry_run {
        let d = match qual_fleet::slurm::plan_jobs(&plan, &opts) {
            Ok(d) => d,
            Err(e) => return refuse(e.to_string()),
        };
        if a.json {
            let jobs: Vec<_> = d
                .jobs
                .iter()
                .map(|j| serde_json::json!({"job": j, "task_script": qual_fleet::slurm::task_script(&plan, j, &opts)}))
                .collect();
            crate::output::print_json(&serde_json::json!({"dry_run": true, "jobs": jobs}));
        } else {
            for (line, job) in qual_fleet::slurm::command_lines(&d).iter().zip(&d.jobs) {
                outln!("{line}");
                errln!(
                    "  # array tasks 0-{}: {}",
                    job.targets.len() - 1,
                    job.targets.join(", ")
                );
            }
            errln!("dry run: nothing was written or submitted");
        }
        return exit::OK;
    }
    match qual_fleet::slurm::dispatch(&plan, &opts) {
        Ok(record) => {
            if a.json {
                crate::output::print_json(&record);
            } else {
                for j in &record.jobs {
                    outln!("{} {}", j.job_id, j.targets.join(" "));
                }
                errln!(
                    "dispatched {} target(s) in {} array job(s); record {}",
                    record.jobs.iter().map(|j| j.targets.len()).sum::<usize>(),
                    record.jobs.len(),
                    esc(&opts
                        .evidence
                        .join(qual_fleet::slurm::DISPATCH_RECORD)
                        .display()
                        .to_string())
                );
            }
            exit::OK
        }
        Err(e) => refuse(e.to_string()),
    }
}

fn status(a: StatusArgs) -> i32 {
    let record = match qual_fleet::slurm::read_record(&a.evidence) {
        Ok(r) => r,
        Err(e) => {
            errln!("kiln-qual: failed to {}", esc(&e.to_string()));
            return exit::FAILED;
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(a.wait);
    let states = loop {
        let states = qual_fleet::slurm::status(&record);
        let done = states.iter().all(|s| s.state.is_final());
        if done
            || std::time::Instant::now() >= deadline
            || qual_exec::signals::interrupted().is_some()
        {
            break states;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    };
    let done = states.iter().all(|s| s.state.is_final());
    if a.json {
        crate::output::print_json(&serde_json::json!({"final": done, "targets": states}));
    } else {
        for s in &states {
            outln!("{}  {}  {}", s.target, s.job, esc(&s.state.to_string()));
        }
    }
    if done {
        exit::OK
    } else {
        exit::FAILED
    }
}

/// What Slurm says about each target, when the evidence directory has a dispatch record.
fn scheduler_states(evidence: &Path) -> BTreeMap<String, String> {
    match qual_fleet::slurm::read_record(evidence) {
        Ok(r) => qual_fleet::slurm::status(&r)
            .into_iter()
            .map(|s| (s.target, format!("Slurm {}: {}", s.job, s.state)))
            .collect(),
        Err(_) => BTreeMap::new(),
    }
}

fn collect_and_print(
    plan: &qual_fleet::Plan,
    root: &Path,
    evidence: &Path,
    sources: &[PathBuf],
) -> Result<qual_fleet::collect::Collection, i32> {
    qual_fleet::collect::collect(plan, root, evidence, sources).map_err(|e| {
        errln!("kiln-qual: failed to {}", esc(&e.to_string()));
        exit::FAILED
    })
}

fn collect(a: CollectArgs) -> i32 {
    let (plan, root) = match a.tree.load() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let mut sources = a.from.clone();
    let inbox = a.tree.evidence.join(qual_fleet::slurm::INBOX);
    if sources.is_empty() && inbox.is_dir() {
        sources.push(inbox);
    }
    let c = match collect_and_print(&plan, &root, &a.tree.evidence, &sources) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if a.json {
        crate::output::print_json(&c);
    } else {
        for t in &c.targets {
            match &t.outcome {
                Outcome::Verified { verdict, keyid, .. } => {
                    outln!(
                        "VERIFIED {} ({} on {}): {verdict}, signed by {keyid}",
                        t.target,
                        t.variant,
                        t.host_id
                    )
                }
                Outcome::Refused { reasons } => {
                    errln!("REFUSED {} ({} on {})", t.target, t.variant, t.host_id);
                    for r in reasons {
                        errln!("  {}: {}", r.kind.as_str(), esc(&r.message));
                    }
                }
            }
        }
        errln!(
            "collected {} new file(s); {} of {} targets verified",
            c.imported_files,
            c.targets.iter().filter(|t| !t.is_refused()).count(),
            c.targets.len()
        );
    }
    verified_exit(&c)
}

/// 0 when every planned target verified, else 1.
fn verified_exit(c: &qual_fleet::collect::Collection) -> i32 {
    if c.all_verified() {
        exit::OK
    } else {
        exit::FAILED
    }
}

/// `fleet report` (also `kiln-qual report --fleet PLAN DIR`).
pub fn report(a: TreeArgs) -> i32 {
    let (plan, root) = match a.load() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let c = match collect_and_print(&plan, &root, &a.evidence, &[]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    out!(
        "{}",
        qual_fleet::report::markdown(&c, &scheduler_states(&a.evidence))
    );
    verified_exit(&c)
}

fn workflow(a: WorkflowArgs) -> i32 {
    let plan = match load_plan(&a.plan) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let Some(text) = qual_fleet::gha::workflow(&plan, &a.kiln_qual) else {
        errln!(
            "kiln-qual: failed to generate the workflow: no target of the plan has runs_on labels"
        );
        return exit::FAILED;
    };
    match &a.output {
        None => {
            out!("{text}");
            exit::OK
        }
        Some(path) => match qual_json::publish::write_new(path, text.as_bytes()) {
            Ok(()) => {
                outln!("{}", esc(&path.display().to_string()));
                exit::OK
            }
            Err(e) => {
                errln!(
                    "kiln-qual: failed to write {}: {e}",
                    esc(&path.display().to_string())
                );
                exit::FAILED
            }
        },
    }
}
