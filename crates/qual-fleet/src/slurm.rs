//! Dispatch on Slurm: one `sbatch` job array per distinct placement (partition, node list,
//! constraint, GRES, time limit), one array task per target. Each task clones the plan's
//! repository on its node, checks out the pushed commit, runs `kiln-qual run` there with the
//! node's own name as host id, signs with the host's key, and leaves the receipt, its
//! attestation and its run directory in `<evidence>/inbox/<target>/`, where `collect` finds
//! them.
//!
//! Nothing here hides the scheduler: the exact `sbatch` command lines are the dry run, an
//! `sbatch` refusal is returned with its stderr, and job state is Slurm's own (`scontrol show
//! job`, then `sacct` where accounting exists), reported as Slurm names it.

use crate::plan::{Plan, SlurmSelect, Target};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The dispatch record's `schema`.
pub const DISPATCH_SCHEMA: &str = "kiln-qual.fleet-slurm-dispatch.v1";
/// The dispatch record, relative to the evidence directory.
pub const DISPATCH_RECORD: &str = "slurm/dispatch.json";
/// Where the tasks leave their evidence, relative to the evidence directory.
pub const INBOX: &str = "inbox";
/// How long one Slurm command may take.
const TOOL_DEADLINE: Duration = Duration::from_secs(60);
/// How much of a Slurm command's output is kept.
const TOOL_KEEP: usize = 1024 * 1024;

/// One job array: the targets that share a placement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArrayJob {
    /// The array's index in the dispatch (its script is `slurm/job-<index>.sh`).
    pub index: usize,
    /// The targets, by array task id.
    pub targets: Vec<String>,
    /// The task script.
    pub script: String,
    /// The exact `sbatch` arguments (after the program name).
    pub sbatch: Vec<String>,
}

/// What a dispatch is (or would be, in a dry run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Dispatch {
    /// The arrays, in plan order of their first target.
    pub jobs: Vec<ArrayJob>,
}

/// Why a Slurm operation failed. Messages read after "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// No target of the plan runs on Slurm.
    #[error("dispatch on Slurm: no target of the plan has a `slurm` placement")]
    NoTargets,
    /// The evidence directory already holds a dispatch.
    #[error("dispatch on Slurm: {0} exists (a dispatch is never repeated into the same evidence directory)")]
    AlreadyDispatched(String),
    /// A file could not be written or read.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A Slurm program could not be started.
    #[error("start {program}: {reason}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        reason: String,
    },
    /// A Slurm program refused; its stderr is kept.
    #[error("run {command}: {detail}")]
    Refused {
        /// The command line.
        command: String,
        /// Exit status and stderr.
        detail: String,
    },
    /// The dispatch record is unreadable or not ours.
    #[error("read the dispatch record {path}: {reason}")]
    Record {
        /// The record.
        path: String,
        /// Why.
        reason: String,
    },
}

/// How the tasks run kiln-qual on the nodes.
#[derive(Clone, Debug)]
pub struct TaskOptions {
    /// The kiln-qual program on the nodes (a name on their `PATH`, or an absolute path).
    pub kiln_qual: String,
    /// The evidence directory (absolute; reachable from every node).
    pub evidence: PathBuf,
}

/// Single-quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"/._-:=@,+%".contains(&c))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Plans the arrays: targets with a `slurm` placement, grouped by placement in plan order.
pub fn plan_jobs(plan: &Plan, opts: &TaskOptions) -> Result<Dispatch, SlurmError> {
    let mut groups: Vec<(&SlurmSelect, Vec<&Target>)> = Vec::new();
    for t in &plan.targets {
        let Some(s) = &t.slurm else { continue };
        match groups.iter_mut().find(|(g, _)| *g == s) {
            Some((_, v)) => v.push(t),
            None => groups.push((s, vec![t])),
        }
    }
    if groups.is_empty() {
        return Err(SlurmError::NoTargets);
    }
    let slurm_dir = opts.evidence.join("slurm");
    let jobs = groups
        .into_iter()
        .enumerate()
        .map(|(index, (sel, targets))| {
            let script = slurm_dir.join(format!("job-{index}.sh"));
            ArrayJob {
                index,
                targets: targets.iter().map(|t| t.id.clone()).collect(),
                sbatch: sbatch_args(plan, sel, index, targets.len(), &slurm_dir, &script),
                script: script.display().to_string(),
            }
        })
        .collect();
    Ok(Dispatch { jobs })
}

fn sbatch_args(
    plan: &Plan,
    sel: &SlurmSelect,
    index: usize,
    tasks: usize,
    slurm_dir: &Path,
    script: &Path,
) -> Vec<String> {
    let mut a = vec![
        "--parsable".to_owned(),
        format!("--job-name=kq-{}-{index}", plan.fleet_id),
        format!("--array=0-{}", tasks - 1),
        format!("--partition={}", sel.partition),
        format!("--time={}", sel.time_limit_minutes),
    ];
    if let Some(n) = &sel.nodelist {
        a.push(format!("--nodelist={n}"));
    }
    if let Some(c) = &sel.constraint {
        a.push(format!("--constraint={c}"));
    }
    if let Some(g) = &sel.gres {
        a.push(format!("--gres={g}"));
    }
    a.push(format!("--output={}/task-%A_%a.out", slurm_dir.display()));
    a.push(script.display().to_string());
    a
}

/// The task script of one array: the target per `SLURM_ARRAY_TASK_ID`, then the clone, the
/// run, the signature and the hand-over to the inbox (see the module docs).
pub fn task_script(plan: &Plan, job: &ArrayJob, opts: &TaskOptions) -> String {
    let q = |s: &str| shell_quote(s);
    let mut cases = String::new();
    for (i, id) in job.targets.iter().enumerate() {
        let t = plan
            .targets
            .iter()
            .find(|t| &t.id == id)
            .expect("the job's targets come from the plan");
        let key = plan
            .host(&t.host_id)
            .map(|h| h.signing_key.as_str())
            .unwrap_or("");
        cases.push_str(&format!(
            "  {i}) target={}; host={}; workload={}; variant={}; key={} ;;\n",
            q(&t.id),
            q(&t.host_id),
            q(&t.workload),
            q(&t.variant),
            q(key)
        ));
    }
    format!(
        r#"#!/bin/bash
# kiln-qual fleet {fleet}: Slurm array {index}, one task per target. Generated by
# `kiln-qual fleet dispatch`; the plan is the source of truth.
set -u
repository={repository}
commit={commit}
kiln_qual={kiln_qual}
inbox={inbox}
case "${{SLURM_ARRAY_TASK_ID:?this script runs as a Slurm array task}}" in
{cases}  *) echo "kiln-qual fleet: no target for array task $SLURM_ARRAY_TASK_ID" >&2; exit 2 ;;
esac
node="${{SLURMD_NODENAME:-unknown}}"
echo "kiln-qual fleet: target $target (planned host $host) on node $node"
{body}"#,
        body = TASK_BODY,
        fleet = plan.fleet_id,
        index = job.index,
        repository = q(&plan.repository),
        commit = q(&plan.commit),
        kiln_qual = q(&opts.kiln_qual),
        inbox = q(&opts.evidence.join(INBOX).display().to_string()),
    )
}

/// What every task does once `repository`, `commit`, `kiln_qual`, `inbox`, `target`, `node`
/// (the host id it reports), `workload`, `variant` and `key` are set: a fresh clone of the
/// commit, the run, the signature, and the hand-over to `$inbox/$target/` (created
/// exclusively: evidence already handed over refuses the task). Shared by the Slurm task
/// script and the GitHub Actions step.
pub const TASK_BODY: &str = r#"out="$inbox/$target"
mkdir -p "$inbox" && mkdir "$out" || { echo "kiln-qual fleet: $out exists" >&2; exit 3; }
work=$(mktemp -d) || exit 3
trap 'rm -rf "$work"' EXIT
git clone -q --no-checkout "$repository" "$work/src" \
  && git -C "$work/src" -c advice.detachedHead=false checkout -q --detach "$commit" \
  || { echo "kiln-qual fleet: cannot check out $commit from $repository" >&2; exit 3; }
cd "$work/src" || exit 3
receipt=".qualification/receipts/fleet/$target.json"
"$kiln_qual" run "$workload" --variant "$variant" --host-id "$node" \
  --output "$receipt" --sign-key "$key" 2> "$out/kiln-qual.log"
rc=$?
[ -f "$receipt" ] && cp -p "$receipt" "$out/"
[ -f "$receipt.intoto.jsonl" ] && cp -p "$receipt.intoto.jsonl" "$out/"
if [ -d .qualification/runs ]; then
  mkdir "$out/runs" && cp -pR .qualification/runs/. "$out/runs/"
fi
echo "kiln-qual fleet: target $target: kiln-qual run exited $rc"
exit "$rc"
"#;

/// The dry run: each array's exact command line.
pub fn command_lines(d: &Dispatch) -> Vec<String> {
    d.jobs
        .iter()
        .map(|j| {
            std::iter::once("sbatch".to_owned())
                .chain(j.sbatch.iter().map(|a| shell_quote(a)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// One submitted array.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submitted {
    /// Slurm's job id of the array.
    pub job_id: String,
    /// The targets by array task id.
    pub targets: Vec<String>,
    /// The task script.
    pub script: String,
}

/// The dispatch record (`slurm/dispatch.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// [`DISPATCH_SCHEMA`].
    pub schema: String,
    /// The plan's fleet id.
    pub fleet_id: String,
    /// The commit dispatched.
    pub commit: String,
    /// The arrays.
    pub jobs: Vec<Submitted>,
}

fn io<'p>(what: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> SlurmError + 'p {
    move |source| SlurmError::Io {
        what,
        path: path.display().to_string(),
        source,
    }
}

/// Writes the scripts and submits every array; the record is written exclusively after the
/// last submission, or after a refusal with the arrays submitted before it.
pub fn dispatch(plan: &Plan, opts: &TaskOptions) -> Result<Record, SlurmError> {
    let d = plan_jobs(plan, opts)?;
    let record_path = opts.evidence.join(DISPATCH_RECORD);
    if record_path.exists() {
        return Err(SlurmError::AlreadyDispatched(
            record_path.display().to_string(),
        ));
    }
    let slurm_dir = opts.evidence.join("slurm");
    std::fs::create_dir_all(&slurm_dir).map_err(io("create", &slurm_dir))?;
    let mut record = Record {
        schema: DISPATCH_SCHEMA.to_owned(),
        fleet_id: plan.fleet_id.clone(),
        commit: plan.commit.clone(),
        jobs: Vec::new(),
    };
    for job in &d.jobs {
        if let Err(e) = submit(plan, job, opts, &mut record) {
            // What was submitted before the refusal stays findable by `status`.
            if !record.jobs.is_empty() {
                write_record(&record_path, &record)?;
            }
            return Err(e);
        }
    }
    write_record(&record_path, &record)?;
    Ok(record)
}

fn write_record(path: &Path, record: &Record) -> Result<(), SlurmError> {
    let bytes = serde_json::to_vec_pretty(record).expect("a record serializes");
    qual_json::publish::write_new(path, &bytes).map_err(io("write", path))
}

/// Writes one array's script and submits it; the job joins `record`.
fn submit(
    plan: &Plan,
    job: &ArrayJob,
    opts: &TaskOptions,
    record: &mut Record,
) -> Result<(), SlurmError> {
    let script = PathBuf::from(&job.script);
    let text = task_script(plan, job, opts);
    qual_json::publish::write_new(&script, text.as_bytes()).map_err(io("write", &script))?;
    let out = run_slurm("sbatch", &job.sbatch)?;
    let job_id = out.trim().split(';').next().unwrap_or("").to_owned();
    if job_id.is_empty() || !job_id.bytes().all(|c| c.is_ascii_digit()) {
        return Err(SlurmError::Refused {
            command: "sbatch".into(),
            detail: format!("printed {out:?}, not a job id"),
        });
    }
    record.jobs.push(Submitted {
        job_id,
        targets: job.targets.clone(),
        script: job.script.clone(),
    });
    Ok(())
}

/// Runs a Slurm program (resolved by `qual_trusted`) to completion: its stdout, or the refusal
/// with its exit status and stderr.
fn run_slurm(program: &str, args: &[String]) -> Result<String, SlurmError> {
    let shown = std::iter::once(program.to_owned())
        .chain(args.iter().map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = qual_trusted::command(program).map_err(|e| SlurmError::Start {
        program: program.into(),
        reason: e.to_string(),
    })?;
    cmd.args(args);
    let run =
        qual_exec::run_tool(cmd, TOOL_DEADLINE, TOOL_KEEP).map_err(|e| SlurmError::Start {
            program: program.into(),
            reason: e.to_string(),
        })?;
    let ok = run.status.is_some_and(|s| s.success()) && !run.timed_out;
    if !ok {
        let status = if run.timed_out {
            format!("no answer within {} s", TOOL_DEADLINE.as_secs())
        } else {
            match run.status {
                Some(s) => s.to_string(),
                None => "unknown status".into(),
            }
        };
        return Err(SlurmError::Refused {
            command: shown,
            detail: format!("{status}: {}", String::from_utf8_lossy(&run.stderr).trim()),
        });
    }
    Ok(String::from_utf8_lossy(&run.stdout).into_owned())
}

/// Reads the dispatch record of an evidence directory.
pub fn read_record(evidence: &Path) -> Result<Record, SlurmError> {
    let path = evidence.join(DISPATCH_RECORD);
    let bad = |reason: String| SlurmError::Record {
        path: path.display().to_string(),
        reason,
    };
    let doc = qual_json::read_document(&path, qual_json::Limits::default())
        .map_err(|e| bad(e.to_string()))?;
    let v = doc
        .value
        .to_serde()
        .ok_or_else(|| bad("not representable".into()))?;
    let r: Record = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
    if r.schema != DISPATCH_SCHEMA {
        return Err(bad(format!(
            "schema is {:?}, not {DISPATCH_SCHEMA:?}",
            r.schema
        )));
    }
    Ok(r)
}

/// A Slurm job state, as Slurm names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for resources.
    Pending {
        /// Slurm's reason.
        reason: String,
    },
    /// Running (or completing).
    Running {
        /// The node.
        node: String,
    },
    /// Ended with exit code 0.
    Completed,
    /// Ended with a non-zero exit code.
    Failed {
        /// Slurm's `ExitCode` (`code:signal`).
        exit_code: String,
    },
    /// Ended by its time limit.
    TimedOut,
    /// Cancelled.
    Cancelled,
    /// Another final state (`OUT_OF_MEMORY`, `NODE_FAIL`, `PREEMPTED`, …).
    Other {
        /// Slurm's name for it.
        slurm: String,
    },
    /// Slurm no longer knows the job (purged from the controller, no accounting).
    Unknown {
        /// What was asked and answered.
        reason: String,
    },
}

impl JobState {
    /// Whether Slurm will not change it any more.
    pub fn is_final(&self) -> bool {
        !matches!(self, JobState::Pending { .. } | JobState::Running { .. })
    }

    fn from_slurm(state: &str, reason: &str, node: &str, exit_code: &str) -> JobState {
        match state.split_whitespace().next().unwrap_or("") {
            "PENDING" | "REQUEUED" | "CONFIGURING" => JobState::Pending {
                reason: reason.to_owned(),
            },
            "RUNNING" | "COMPLETING" | "SUSPENDED" => JobState::Running {
                node: node.to_owned(),
            },
            "COMPLETED" => JobState::Completed,
            "FAILED" => JobState::Failed {
                exit_code: exit_code.to_owned(),
            },
            "TIMEOUT" => JobState::TimedOut,
            s if s.starts_with("CANCELLED") => JobState::Cancelled,
            other => JobState::Other {
                slurm: other.to_owned(),
            },
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobState::Pending { reason } => write!(f, "pending ({reason})"),
            JobState::Running { node } => write!(f, "running on {node}"),
            JobState::Completed => f.write_str("completed"),
            JobState::Failed { exit_code } => write!(f, "failed (exit {exit_code})"),
            JobState::TimedOut => f.write_str("timed out (Slurm time limit)"),
            JobState::Cancelled => f.write_str("cancelled"),
            JobState::Other { slurm } => write!(f, "ended {slurm}"),
            JobState::Unknown { reason } => write!(f, "unknown: {reason}"),
        }
    }
}

/// One target's job state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TargetState {
    /// The target.
    pub target: String,
    /// `<array job id>_<task id>`.
    pub job: String,
    /// Its state.
    #[serde(flatten)]
    pub state: JobState,
}

/// Parses `scontrol --oneliner show job <id>`: per array task id, its state.
pub fn parse_scontrol(text: &str) -> BTreeMap<usize, JobState> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let fields: BTreeMap<&str, &str> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        let Some(tasks) = fields.get("ArrayTaskId") else {
            continue;
        };
        let state = JobState::from_slurm(
            fields.get("JobState").copied().unwrap_or(""),
            fields.get("Reason").copied().unwrap_or(""),
            fields
                .get("BatchHost")
                .or(fields.get("NodeList"))
                .copied()
                .unwrap_or(""),
            fields.get("ExitCode").copied().unwrap_or(""),
        );
        for i in task_ids(tasks) {
            out.insert(i, state.clone());
        }
    }
    out
}

/// Parses `sacct -n -P -X -j <id> --format=JobID,State,ExitCode,NodeList`.
pub fn parse_sacct(text: &str, job_id: &str) -> BTreeMap<usize, JobState> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [id, state, exit_code, node, ..] = f.as_slice() else {
            continue;
        };
        let Some(tasks) = id.strip_prefix(job_id).and_then(|r| r.strip_prefix('_')) else {
            continue;
        };
        let tasks = tasks.trim_start_matches('[').trim_end_matches(']');
        let state = JobState::from_slurm(state, "", node, exit_code);
        for i in task_ids(tasks) {
            out.insert(i, state.clone());
        }
    }
    out
}

/// `3`, `0-3`, `0-3%2`, `1,3-4` → the task ids.
fn task_ids(spec: &str) -> Vec<usize> {
    let spec = spec.split('%').next().unwrap_or("");
    let mut ids = Vec::new();
    for part in spec.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    ids.extend(a..=b.min(a + 100_000));
                }
            }
            None => ids.extend(part.parse::<usize>().ok()),
        }
    }
    ids
}

/// Every dispatched target's state, asked of Slurm: `scontrol` first, `sacct` for jobs the
/// controller has purged; a job neither knows is `unknown`, saying what each answered.
pub fn status(record: &Record) -> Vec<TargetState> {
    let mut out = Vec::new();
    for job in &record.jobs {
        let asked = run_slurm(
            "scontrol",
            &[
                "--oneliner".into(),
                "show".into(),
                "job".into(),
                job.job_id.clone(),
            ],
        );
        let mut states = match &asked {
            Ok(text) => parse_scontrol(text),
            Err(_) => BTreeMap::new(),
        };
        let mut why = match asked {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        };
        if states.len() < job.targets.len() {
            let sacct = run_slurm(
                "sacct",
                &[
                    "-n".into(),
                    "-P".into(),
                    "-X".into(),
                    "-j".into(),
                    job.job_id.clone(),
                    "--format=JobID,State,ExitCode,NodeList".into(),
                ],
            );
            match sacct {
                Ok(text) => {
                    for (k, v) in parse_sacct(&text, &job.job_id) {
                        states.entry(k).or_insert(v);
                    }
                }
                Err(e) => why = format!("{why}; {e}"),
            }
        }
        for (i, target) in job.targets.iter().enumerate() {
            let state = states.remove(&i).unwrap_or_else(|| JobState::Unknown {
                reason: format!(
                    "Slurm does not know job {}_{i}: {}",
                    job.job_id,
                    why.trim_start_matches("; ")
                ),
            });
            out.push(TargetState {
                target: target.clone(),
                job: format!("{}_{i}", job.job_id),
                state,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scontrol_lines_give_each_task_its_state() {
        let text = "JobId=13 ArrayJobId=12 ArrayTaskId=1 JobName=x JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 BatchHost=node2\n\
                    JobId=12 ArrayJobId=12 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=0:0 BatchHost=node1\n\
                    JobId=14 ArrayJobId=12 ArrayTaskId=2-3 JobState=PENDING Reason=Resources ExitCode=0:0\n\
                    JobId=16 ArrayJobId=12 ArrayTaskId=4 JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0\n";
        let s = parse_scontrol(text);
        assert_eq!(s[&0], JobState::Completed);
        assert_eq!(s[&1], JobState::TimedOut);
        assert_eq!(
            s[&3],
            JobState::Pending {
                reason: "Resources".into()
            }
        );
        assert_eq!(
            s[&4],
            JobState::Failed {
                exit_code: "1:0".into()
            }
        );
    }

    #[test]
    fn sacct_lines_and_cancelled_by_user() {
        let s = parse_sacct("12_0|COMPLETED|0:0|node1\n12_1|CANCELLED by 0|0:15|node2\n12_[2-3]|PENDING|0:0|None\n7_0|FAILED|1:0|x\n", "12");
        assert_eq!(s[&1], JobState::Cancelled);
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn quoting_is_posix() {
        assert_eq!(shell_quote("a b'c"), r"'a b'\''c'");
        assert_eq!(shell_quote("--time=5"), "--time=5");
        assert_eq!(shell_quote(""), "''");
    }
}
