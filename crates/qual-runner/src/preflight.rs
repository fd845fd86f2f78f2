//! Preflight: every check that must pass before anything is created.
//!
//! Order: repository root, host id, termination grace; committed workload (path rule, strict
//! load and validation, byte identity with `git show HEAD:<path>`); variant; variables and
//! placeholders; receipt output rule; receipt id and run directory rule; clean worktree; HEAD;
//! repository policy and source-tree digest; model flags; network isolation probe (fail
//! closed); source re-verification. A failure is a [`Refusal`] and leaves the filesystem as it
//! was (the isolation probe runs no program and writes nothing).

use std::path::{Path, PathBuf};
use std::time::Duration;

use qual_contract::variables::{resolve, ResolvedVariables};
use qual_contract::{Kind, LoadedWorkload, Variant};
use qual_exec::ExecError;
use qual_probe::git::Repo;
use qual_probe::source_tree::{self, SourceTree};
use qual_probe::RepoPolicy;
use qual_receipt::model::{is_valid_host_id, is_valid_receipt_id};

use crate::error::Refusal;
use crate::paths;
use crate::RunRequest;

/// Largest `--term-grace-seconds`.
pub const MAX_TERM_GRACE_SECONDS: f64 = 75.0;

/// Everything preflight established.
#[derive(Debug)]
pub struct Prepared {
    /// Canonical repository root.
    pub root: PathBuf,
    /// Canonical working directory of the request.
    pub cwd: PathBuf,
    /// Workload path relative to the root.
    pub workload_rel: String,
    /// The loaded workload.
    pub loaded: LoadedWorkload,
    /// The selected variant.
    pub variant: Variant,
    /// Resolved variables.
    pub variables: ResolvedVariables,
    /// Receipt output relative to the root, when `--output` was given.
    pub output_rel: Option<String>,
    /// HEAD commit.
    pub commit: String,
    /// Repository policy.
    pub policy: RepoPolicy,
    /// Source-tree digest.
    pub source: SourceTree,
    /// Absolute model directory (lexical), when given.
    pub model_path: Option<PathBuf>,
    /// Network isolation mechanism id.
    pub network_mechanism: String,
    /// Termination grace.
    pub term_grace: Duration,
}

fn git_err(e: impl std::fmt::Display) -> Refusal {
    Refusal::Git(e.to_string())
}

/// Resolves the committed workload path (spec §2.1 path rule). A relative path is taken
/// from the current directory, as `--output`, `--model` and every other path of the command
/// line are (cargo's rule); a path that exists only relative to the repository root is
/// refused with the spelling that works from here.
fn workload_path(root: &Path, cwd: &Path, given: &Path) -> Result<(PathBuf, String), Refusal> {
    let lexical = paths::lexical(cwd, given);
    let shown = given.display().to_string();
    let meta = std::fs::symlink_metadata(&lexical).map_err(|e| {
        let hint = if given.is_relative() && cwd != root && root.join(given).is_file() {
            let from_here = pathdiff(cwd, &root.join(given));
            format!(
                " (relative paths are taken from the current directory; from here the workload is {})",
                from_here.display()
            )
        } else {
            String::new()
        };
        Refusal::WorkloadPath(format!(
            "cannot read workload {shown}: {}{hint}",
            qual_json::show::io_error(&e)
        ))
    })?;
    if meta.file_type().is_symlink() || !meta.is_file() {
        return Err(Refusal::WorkloadPath(format!(
            "workload must be a regular, non-symlink file: {shown}"
        )));
    }
    let real = std::fs::canonicalize(&lexical).map_err(|e| {
        Refusal::WorkloadPath(format!(
            "cannot resolve workload {shown}: {}",
            qual_json::show::io_error(&e)
        ))
    })?;
    let dir = root.join("qualification/workloads");
    let inside = real.strip_prefix(&dir).is_ok();
    if !inside || real.extension().and_then(|e| e.to_str()) != Some("json") {
        return Err(Refusal::WorkloadPath(format!(
            "workload must be a .json file inside qualification/workloads/: {shown}"
        )));
    }
    let rel = real
        .strip_prefix(root)
        .ok()
        .and_then(|p| p.to_str())
        .ok_or_else(|| Refusal::WorkloadPath(format!("workload path is not UTF-8: {shown}")))?
        .to_string();
    Ok((real, rel))
}

/// `target` relative to `base` (both absolute and lexically normal): `../` for each
/// component of `base` past their common prefix, then the rest of `target`.
fn pathdiff(base: &Path, target: &Path) -> PathBuf {
    let b: Vec<_> = base.components().collect();
    let t: Vec<_> = target.components().collect();
    let common = b.iter().zip(&t).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

/// Parses `--var NAME=VALUE` texts.
fn parse_assignments(raw: &[String]) -> Result<Vec<(String, String)>, Refusal> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for r in raw {
        match r.split_once('=') {
            Some((n, v)) if !n.is_empty() => out.push((n.to_string(), v.to_string())),
            _ => errors.push(format!("invalid --var {r}: expected NAME=VALUE")),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(Refusal::Variables(errors))
    }
}

/// Probes the case box of a run at `root` (`qual_exec::probe_containment`: a forked child
/// sets up the whole box — a private network namespace with only `lo` and a loopback round
/// trip, the read-only host with the worktree writable and `.git` read-only — and checks that
/// the host is not writable; nothing runs and nothing is written). Returns the mechanism id
/// exported to cases.
pub fn probe_network_isolation(root: &Path) -> Result<String, Refusal> {
    let protected = crate::case_box::protected_paths(root, None);
    let sandbox = crate::case_box::sandbox(root, &protected, None);
    match qual_exec::probe_containment(qual_exec::NetworkPolicy::LoopbackOnly, &sandbox) {
        // The whole box is probed: namespaces, init, mounts, capabilities, seccomp, cgroup.
        Ok(n) => Ok(n.mechanism_id().to_string()),
        Err(e @ ExecError::IsolationUnavailable { .. }) => Err(Refusal::Isolation(e.to_string())),
        Err(e) => Err(Refusal::Isolation(format!(
            "the isolation probe failed: {e}"
        ))),
    }
}

/// Runs every preflight check, in the order of the module docs: repository and request
/// flags, committed workload and variant, variables, evidence paths, source binding, model
/// flags, network isolation, source re-verification. Creates nothing.
pub fn preflight(req: &RunRequest) -> Result<Prepared, Refusal> {
    let (cwd, root) = repository(req)?;
    let repo = Repo::new(&root);
    check_flags(req)?;
    let (workload_rel, loaded) = committed_workload(&repo, &root, &cwd, req)?;
    let w = &loaded.workload;
    let variant = select_variant(w, &req.variant)?;
    let assignments = parse_assignments(&req.vars)?;
    let variables = resolve(w, &req.variant, &assignments).map_err(Refusal::Variables)?;
    let uses = PlaceholderUse::of(&variant);
    if uses.seed && w.determinism.seed.is_none() {
        return Err(Refusal::Placeholder(
            "workload references ${seed} but seed is null".into(),
        ));
    }
    let output_rel = evidence_paths(&root, &cwd, req)?;
    let (commit, policy, source) = bind_source(&repo, &root)?;
    let model_path = model_path(req, w.kind, uses.model, &cwd)?;
    let network_mechanism = probe_network_isolation(&root)?;
    // Re-verify the source binding.
    let again = source_tree::compute(&root, policy.source_tree_profile)
        .map_err(|e| Refusal::SourceTree(e.to_string()))?;
    if again.digest != source.digest
        || !repo.is_clean().map_err(git_err)?
        || repo.head_commit().map_err(git_err)? != commit
    {
        return Err(Refusal::SourceChangedDuringPreflight);
    }
    Ok(Prepared {
        root,
        cwd,
        workload_rel,
        loaded,
        variant,
        variables,
        output_rel,
        commit,
        policy,
        source,
        model_path,
        network_mechanism,
        term_grace: Duration::from_secs_f64(req.term_grace_seconds),
    })
}

/// The canonical working directory of the request and the canonical root of the git
/// worktree containing it.
fn repository(req: &RunRequest) -> Result<(PathBuf, PathBuf), Refusal> {
    let cwd = std::fs::canonicalize(&req.cwd)
        .map_err(|e| Refusal::NotARepository(format!("{}: {e}", req.cwd.display())))?;
    let repo = Repo::discover(&cwd).map_err(|e| Refusal::NotARepository(e.to_string()))?;
    let root =
        std::fs::canonicalize(repo.root()).map_err(|e| Refusal::NotARepository(e.to_string()))?;
    Ok((cwd, root))
}

/// The host id and the termination grace.
fn check_flags(req: &RunRequest) -> Result<(), Refusal> {
    if !is_valid_host_id(&req.host_id) {
        return Err(Refusal::BadHostId);
    }
    if !req.term_grace_seconds.is_finite() || req.term_grace_seconds < 0.0 {
        return Err(Refusal::GraceNotFinite);
    }
    if req.term_grace_seconds > MAX_TERM_GRACE_SECONDS {
        return Err(Refusal::GraceTooLong);
    }
    Ok(())
}

/// The workload: path rule, strict load and validation, and byte identity with
/// `git show HEAD:<path>`. Returns its path relative to the root and the loaded workload.
fn committed_workload(
    repo: &Repo,
    root: &Path,
    cwd: &Path,
    req: &RunRequest,
) -> Result<(String, LoadedWorkload), Refusal> {
    let (real, workload_rel) = workload_path(root, cwd, &req.workload)?;
    let loaded = qual_contract::load_workload(&real).map_err(|e| {
        Refusal::InvalidWorkload(match e {
            qual_contract::LoadError::Invalid { violations } => {
                let all: Vec<String> = violations.iter().map(|v| v.message.clone()).collect();
                format!("invalid workload: {}", all.join("; "))
            }
            other => format!("invalid workload: {other}"),
        })
    })?;
    match repo.show_head(&workload_rel).map_err(git_err)? {
        None => Err(Refusal::WorkloadNotCommitted(workload_rel)),
        Some(b) if b != loaded.bytes => Err(Refusal::WorkloadModified(workload_rel)),
        Some(_) => Ok((workload_rel, loaded)),
    }
}

/// The requested variant, or a refusal naming the declared ones.
fn select_variant(w: &qual_contract::Workload, id: &str) -> Result<Variant, Refusal> {
    match w.variant(id) {
        Some(v) => Ok(v.clone()),
        None => {
            let mut ids: Vec<String> = w.variants.iter().map(|v| v.id.clone()).collect();
            ids.sort();
            Err(Refusal::UnknownVariant {
                variant: id.to_string(),
                declared: qual_json::show::list(&ids),
            })
        }
    }
}

/// Which runner placeholders the variant's cases use.
struct PlaceholderUse {
    seed: bool,
    model: bool,
}

impl PlaceholderUse {
    fn of(variant: &Variant) -> PlaceholderUse {
        let mut uses = PlaceholderUse {
            seed: false,
            model: false,
        };
        for c in &variant.cases {
            for s in c.command.iter().chain(c.environment.values()) {
                match qual_contract::placeholder_name(s) {
                    Some("seed") => uses.seed = true,
                    Some("model_path") => uses.model = true,
                    _ => {}
                }
            }
        }
        uses
    }
}

/// The receipt output rule (`--output`, which must not exist) and the receipt id and run
/// directory rule. Returns the output relative to the root, when given.
fn evidence_paths(root: &Path, cwd: &Path, req: &RunRequest) -> Result<Option<String>, Refusal> {
    let output_rel = match &req.output {
        None => None,
        Some(p) => {
            let rel = paths::check_receipt_output(root, cwd, p).map_err(Refusal::ReceiptPath)?;
            if std::fs::symlink_metadata(root.join(&rel)).is_ok() {
                return Err(Refusal::ReceiptExists(rel));
            }
            Some(rel)
        }
    };
    match &req.receipt_id {
        Some(id) => {
            if !is_valid_receipt_id(id) {
                return Err(Refusal::BadReceiptId);
            }
            let rel = paths::check_run_dir(root, id).map_err(Refusal::RunDirPath)?;
            if std::fs::symlink_metadata(root.join(&rel)).is_ok() {
                return Err(Refusal::RunDirExists(rel));
            }
        }
        None => {
            paths::check_run_dir(root, "preflight-generated-receipt-v1")
                .map_err(Refusal::RunDirPath)?;
        }
    }
    Ok(output_rel)
}

/// The source binding: a clean worktree, HEAD, the repository policy and the source-tree
/// digest.
fn bind_source(repo: &Repo, root: &Path) -> Result<(String, RepoPolicy, SourceTree), Refusal> {
    let dirty = repo.status_lines().map_err(git_err)?;
    if !dirty.is_empty() {
        let shown: Vec<&str> = dirty.iter().take(3).map(|l| l.trim()).collect();
        let more = if dirty.len() > 3 {
            format!(" and {} more", dirty.len() - 3)
        } else {
            String::new()
        };
        return Err(Refusal::DirtyWorktree(format!(
            "{}{more}",
            shown.join(", ")
        )));
    }
    let commit = repo.head_commit().map_err(git_err)?;
    let policy = qual_probe::load_policy(root).map_err(|e| Refusal::Policy(e.to_string()))?;
    let source = source_tree::compute(root, policy.source_tree_profile)
        .map_err(|e| Refusal::SourceTree(e.to_string()))?;
    Ok((commit, policy, source))
}

/// The model flags against the workload kind; returns the absolute (lexical) model directory.
fn model_path(
    req: &RunRequest,
    kind: Kind,
    uses_model: bool,
    cwd: &Path,
) -> Result<Option<PathBuf>, Refusal> {
    if req.model_id.is_some() && req.model.is_none() {
        return Err(Refusal::ModelFlags("--model-id requires --model".into()));
    }
    if kind == Kind::Environment && req.model.is_some() {
        return Err(Refusal::ModelFlags(
            "environment workloads do not accept --model".into(),
        ));
    }
    if (kind.requires_model() || uses_model) && req.model.is_none() {
        return Err(Refusal::ModelFlags(format!(
            "--model is required for {} workloads",
            qual_json::show::quote(kind.as_str())
        )));
    }
    let Some(p) = &req.model else {
        return Ok(None);
    };
    let absolute = if p.is_absolute() {
        p.clone()
    } else {
        cwd.join(p)
    };
    qual_probe::model::lexical_absolute(&absolute)
        .map(Some)
        .map_err(|e| Refusal::ModelFlags(format!("cannot resolve --model: {e}")))
}
