//! `kiln-qual receipt check|show|verify|sign` and `kiln-qual compare`.
//!
//! Thin wiring only: argument types, the choice of strict checks, and printing. Every rule
//! lives in `qual_receipt` (validator, comparator, rendering).
//!
//! Exit codes: `receipt check` 0 all valid, 1 any invalid or unreadable, 2 usage;
//! `receipt show` 0 shown (whatever the verdict), 1 unreadable or invalid receipt, 2 usage;
//! `receipt verify` 0 everything recomputed agrees (and the attestation verifies), 1 any
//! finding, 2 usage; `receipt sign` 0 envelope written, 1 not written;
//! `compare` 0 the comparison is ok, 1 refused, incompatible or a required rule failed (also
//! load and binding errors), 2 usage.

use crate::exit;
use crate::output::{errln, esc, esc_path, out, outln};
use clap::{Args, Subcommand};
use qual_receipt::validate::{self, FileOutcome, StrictChecks};
use serde::Serialize;
use std::cell::OnceCell;
use std::path::{Path, PathBuf};

/// `kiln-qual receipt ...`
#[derive(Subcommand, Debug)]
pub enum ReceiptCommand {
    /// Validate receipts: closed record, cross-field rules, finite values, timestamps, verdict
    /// consistency and platform evidence; optionally against the local repository.
    Check(CheckArgs),
    /// Print a human summary of one receipt: what was qualified, the verdict, each case, and
    /// what the receipt does not establish.
    Show(ShowArgs),
    /// Recompute a receipt from its retained run directory (verdict, results, metrics,
    /// artifacts, identity, time) and, with --trusted-keys, check its signed attestation.
    Verify(VerifyArgs),
    /// Sign a receipt: write a DSSE envelope holding an in-toto Statement about it next to it
    /// (`<receipt>.intoto.jsonl`, never replaced). A campaign summary is signed together with
    /// every receipt it lists, an oracle result with its input digests.
    Sign(SignArgs),
}

/// Arguments of `kiln-qual receipt verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The receipt file.
    #[arg(value_parser = super::args::Path, value_name = "RECEIPT")]
    pub receipt: PathBuf,
    /// The run directory the runner retained (default:
    /// `<root>/.qualification/runs/<receipt_id>`).
    #[arg(long, value_parser = super::args::Path, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Repository root the receipt's commit and workload are read from (default: the git top
    /// level of the current directory).
    #[arg(long, value_parser = super::args::Path, value_name = "R")]
    pub root: Option<PathBuf>,
    /// Also require the attestation `<receipt>.intoto.jsonl` to be signed by one of these
    /// keys (OpenSSH public key lines, `ssh-ed25519 AAAA… comment`).
    #[arg(long, value_parser = super::args::Path, value_name = "FILE")]
    pub trusted_keys: Option<PathBuf>,
    /// Only check the attestation (with --trusted-keys), not the run directory.
    #[arg(long, requires = "trusted_keys")]
    pub no_run_dir: bool,
    /// Print a machine report on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `kiln-qual receipt sign`.
#[derive(Args, Debug)]
pub struct SignArgs {
    /// The receipt file (or a campaign summary, or an oracle result).
    #[arg(value_parser = super::args::Path, value_name = "RECEIPT")]
    pub receipt: PathBuf,
    /// OpenSSH Ed25519 private key without a passphrase (`ssh-keygen -t ed25519 -N ''`).
    #[arg(long, value_parser = super::args::Path, value_name = "KEY")]
    pub key: PathBuf,
}

/// Arguments of `kiln-qual receipt check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Receipt files to validate.
    #[arg(value_parser = super::args::Path, required = true, value_name = "RECEIPT")]
    pub receipts: Vec<PathBuf>,
    /// Repository root for the strict checks (default: the git top level of the current
    /// directory, else the current directory).
    #[arg(value_parser = super::args::Path, long, value_name = "R")]
    pub root: Option<PathBuf>,
    /// Require the current source tree of the root to hash to the receipt's digest.
    #[arg(long)]
    pub require_current_source: bool,
    /// Require every `local_ignored` artifact to exist under `<root>/.qualification` and
    /// re-hash to its recorded sha256 and size (`external` artifacts are not checked).
    #[arg(long)]
    pub require_local_artifacts: bool,
    /// Require the receipt's commit to exist in the root's git repository.
    #[arg(long)]
    pub require_known_commit: bool,
    /// The publication gate: refuse, with the reason, a receipt whose commit is not reachable
    /// from the upstream branch (pushed) or whose run was not made from a clean worktree.
    #[arg(long)]
    pub publication: bool,
    /// The upstream branch for --publication (default: the upstream of the root's current
    /// branch, e.g. `origin/main`; fetch first, nothing is fetched).
    #[arg(long, requires = "publication", value_name = "REF")]
    pub upstream: Option<String>,
    /// Print a machine report on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `kiln-qual receipt show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The receipt file.
    #[arg(value_parser = super::args::Path, value_name = "RECEIPT")]
    pub receipt: PathBuf,
}

/// Arguments of `kiln-qual compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline receipt.
    #[arg(value_parser = super::args::Path, value_name = "BASELINE")]
    pub baseline: PathBuf,
    /// The candidate receipt.
    #[arg(value_parser = super::args::Path, value_name = "CANDIDATE")]
    pub candidate: PathBuf,
    /// The committed workload manifest both receipts name (required unless both are
    /// environment receipts without a workload).
    #[arg(value_parser = super::args::Path, long, value_name = "M")]
    pub workload_manifest: Option<PathBuf>,
    /// Repository root the manifest must be committed in (default: the git top level of the
    /// current directory).
    #[arg(value_parser = super::args::Path, long, value_name = "R")]
    pub root: Option<PathBuf>,
    /// Print the machine report on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `kiln-qual receipt ...`.
pub fn run(c: ReceiptCommand) -> i32 {
    match c {
        ReceiptCommand::Check(a) => check(a),
        ReceiptCommand::Show(a) => show(a),
        ReceiptCommand::Verify(a) => verify(a),
        ReceiptCommand::Sign(a) => sign(a),
    }
}

/// The git top level of the current directory, else the current directory.
pub(crate) fn default_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    qual_probe::git::Repo::discover(&cwd)
        .map(|repo| repo.root().to_path_buf())
        .unwrap_or(cwd)
}

/// The current source-tree digest, as the runner computes it (repository policy profile).
fn current_source_digest(root: &Path) -> Result<String, String> {
    let policy = qual_probe::policy::load_policy(root).map_err(|e| e.to_string())?;
    qual_probe::source_tree::compute(root, policy.source_tree_profile)
        .map(|tree| tree.digest)
        .map_err(|e| e.to_string())
}

#[derive(Serialize)]
struct CheckReport {
    ok: bool,
    receipts: Vec<CheckEntry>,
}

#[derive(Serialize)]
struct CheckEntry {
    errors: Vec<String>,
    ok: bool,
    outcome: FileOutcome,
    path: String,
    /// The path for the terminal (exact bytes, escaped).
    #[serde(skip)]
    shown: String,
}

/// The upstream branch the publication gate checks against: `--upstream`, else the upstream
/// of the root's current branch.
fn publication_upstream(a: &CheckArgs, root: &Path) -> Result<Option<String>, String> {
    if !a.publication {
        return Ok(None);
    }
    if let Some(u) = &a.upstream {
        return Ok(Some(u.clone()));
    }
    match qual_probe::git::Repo::new(root).upstream_branch() {
        Ok(Some(u)) => Ok(Some(u)),
        Ok(None) => Err(format!(
            "find the upstream branch of {}: the current branch has none (pass --upstream REF)",
            root.display()
        )),
        Err(e) => Err(format!(
            "find the upstream branch of {}: {e}",
            root.display()
        )),
    }
}

fn check(a: CheckArgs) -> i32 {
    let root = a.root.clone().unwrap_or_else(default_root);
    let upstream = match publication_upstream(&a, &root) {
        Ok(u) => u,
        Err(e) => {
            errln!("kiln-qual: failed to {}", esc(&e));
            return exit::FAILED;
        }
    };
    let cache: OnceCell<Result<String, String>> = OnceCell::new();
    let digest = |r: &Path| cache.get_or_init(|| current_source_digest(r)).clone();
    let strict = StrictChecks {
        root: Some(&root),
        current_source: a
            .require_current_source
            .then_some(&digest as &dyn Fn(&Path) -> Result<String, String>),
        local_artifacts: a.require_local_artifacts,
        known_commit: a.require_known_commit,
        publication: upstream.as_deref(),
    };
    let mut entries = Vec::with_capacity(a.receipts.len());
    for path in &a.receipts {
        let outcome = check_outcome(path, &strict);
        entries.push(CheckEntry {
            errors: outcome.error_lines(),
            ok: outcome.is_valid(),
            outcome,
            path: path.display().to_string(),
            shown: esc_path(path),
        });
    }
    let ok = entries.iter().all(|e| e.ok);
    if a.json {
        crate::output::print_json(&CheckReport {
            ok,
            receipts: entries,
        });
    } else {
        for e in &entries {
            match &e.outcome {
                FileOutcome::Valid => outln!("OK {}", e.shown),
                FileOutcome::Unloadable { error } => {
                    errln!("FAILED {}", e.shown);
                    errln!("  receipt: failed to load: {}", esc(error));
                }
                FileOutcome::Invalid { violations } => {
                    errln!("FAILED {}", e.shown);
                    for v in violations {
                        errln!("  {}: {}", esc(&v.pointer), esc(&v.message));
                    }
                }
            }
        }
    }
    if ok {
        exit::OK
    } else {
        exit::FAILED
    }
}

/// Checks one file, read once: a campaign receipt by `qual-campaign`'s rules (the document
/// table decides), anything else as a receipt v1.
fn check_outcome(path: &Path, strict: &StrictChecks<'_>) -> FileOutcome {
    let unloadable = |e: validate::LoadError| FileOutcome::Unloadable {
        error: e.to_string(),
    };
    let src = match qual_documents::read(path) {
        Ok(src) => src,
        Err(e) => return unloadable(e.into()),
    };
    if src.is(qual_documents::Kind::CampaignReceipt) {
        // The gate reads a receipt v1's source binding; it is never skipped silently.
        let gate = strict.publication.map(|_| {
            "cannot be checked for publication: the publication gate applies to qualification receipts v1, not serving-campaign receipts".to_owned()
        });
        return match qual_campaign::verify::check_receipt_bytes(path, &src.bytes) {
            Ok(f) if f.is_empty() && gate.is_none() => FileOutcome::Valid,
            Ok(f) => FileOutcome::Invalid {
                violations: f
                    .into_iter()
                    .chain(gate)
                    .map(|message| validate::Violation::new("receipt", message))
                    .collect(),
            },
            Err(error) => FileOutcome::Unloadable { error },
        };
    }
    let value = match src.value() {
        Ok(v) => v,
        Err(e) => return unloadable(e.into()),
    };
    if value.as_object().is_none() {
        return unloadable(validate::LoadError::NotAnObject {
            path: path.display().to_string(),
        });
    }
    let violations = validate::validate_strict(value, strict);
    if violations.is_empty() {
        FileOutcome::Valid
    } else {
        FileOutcome::Invalid { violations }
    }
}

fn show(a: ShowArgs) -> i32 {
    let value = match validate::load(&a.receipt) {
        Ok((v, _)) => v,
        Err(e) => {
            errln!(
                "kiln-qual: failed to load the receipt: {}",
                esc(&e.to_string())
            );
            return exit::FAILED;
        }
    };
    let violations = validate::validate(&value);
    if !violations.is_empty() {
        errln!(
            "kiln-qual: failed to show {}: the receipt is invalid ({} violations; run `kiln-qual receipt check`)",
            esc_path(&a.receipt),
            violations.len()
        );
        for v in &violations {
            errln!("  {}: {}", esc(&v.pointer), esc(&v.message));
        }
        return exit::FAILED;
    }
    out!("{}", qual_receipt::render::receipt_summary(&value));
    exit::OK
}

#[derive(Serialize)]
struct VerifyReport {
    attestation: Option<AttestationReport>,
    findings: Vec<qual_receipt::verify::Finding>,
    ok: bool,
    path: String,
}

#[derive(Serialize)]
struct AttestationReport {
    error: Option<String>,
    keyid: Option<String>,
    path: String,
}

fn verify(a: VerifyArgs) -> i32 {
    use qual_receipt::verify::Finding;
    let root = a.root.clone().unwrap_or_else(default_root);
    let path = a.receipt.display().to_string();
    let mut findings: Vec<Finding> = Vec::new();
    let mut attestation = None;
    match validate::load(&a.receipt) {
        Err(e) => findings.push(Finding {
            pointer: String::new(),
            message: format!("failed to load the receipt: {e}"),
        }),
        Ok((value, bytes)) => {
            let violations = validate::validate(&value);
            findings.extend(violations.iter().map(|v| Finding {
                pointer: v.pointer.clone(),
                message: v.message.clone(),
            }));
            if !a.no_run_dir {
                findings.extend(qual_receipt::verify::verify_run(
                    &value,
                    &root,
                    a.run_dir.as_deref(),
                ));
            }
            if let Some(keys) = &a.trusted_keys {
                attestation = Some(check_attestation(&a.receipt, &bytes, keys));
            }
        }
    }
    let ok = findings.is_empty() && attestation.as_ref().is_none_or(|x| x.error.is_none());
    if a.json {
        crate::output::print_json(&VerifyReport {
            attestation,
            findings,
            ok,
            path,
        });
    } else if ok {
        outln!("OK {}", esc(&path));
        if let Some(att) = &attestation {
            outln!(
                "  attestation {} signed by {}",
                esc(&att.path),
                esc(att.keyid.as_deref().unwrap_or_default())
            );
        }
    } else {
        errln!("FAILED {}", esc(&path));
        for f in &findings {
            errln!("  {}", esc(&f.to_string()));
        }
        if let Some(AttestationReport {
            error: Some(e),
            path,
            ..
        }) = &attestation
        {
            errln!("  {}: failed to {}", esc(path), esc(e));
        }
    }
    if ok {
        exit::OK
    } else {
        exit::FAILED
    }
}

fn check_attestation(receipt: &Path, bytes: &[u8], keys: &Path) -> AttestationReport {
    let envelope = qual_attest::envelope_path(receipt);
    let name = receipt
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let result = qual_attest::load_trusted_keys(keys)
        .and_then(|trusted| qual_attest::verify(&envelope, &name, bytes, &trusted));
    let (keyid, error) = match result {
        Ok(v) => (Some(v.keyid), None),
        Err(e) => (None, Some(e.to_string())),
    };
    AttestationReport {
        error,
        keyid,
        path: envelope.display().to_string(),
    }
}

/// What `receipt sign` signs, by the file's `schema`: a campaign summary is signed with every
/// receipt it lists, an oracle result with its input tensors, anything else as a receipt.
fn sign(a: SignArgs) -> i32 {
    let result = qual_attest::SigningKey::from_openssh_file(&a.key)
        .map_err(|e| e.to_string())
        .and_then(|key| {
            let signed = match schema_of(&a.receipt).as_deref() {
                Some(qual_campaign::records::SUMMARY_SCHEMA) => {
                    qual_campaign::attest::sign(&a.receipt, &key).map_err(|e| e.to_string())
                }
                Some(qual_oracle::result::RESULT_SCHEMA) => {
                    qual_oracle::attest::sign(&a.receipt, &key).map_err(|e| e.to_string())
                }
                _ => qual_attest::sign(&a.receipt, &key).map_err(|e| e.to_string()),
            };
            signed.map(|p| (p, key))
        });
    match result {
        Ok((p, key)) => {
            outln!("{}", esc_path(&p));
            errln!("signed {} with {}", esc_path(&a.receipt), key.keyid());
            exit::OK
        }
        Err(e) => {
            errln!("kiln-qual: failed to {}", esc(&e));
            exit::FAILED
        }
    }
}

/// The `schema` string of a strict JSON file, if it has one.
fn schema_of(path: &Path) -> Option<String> {
    qual_json::read_file_limited(path, 64 * 1024 * 1024)
        .ok()
        .and_then(|b| qual_json::from_slice(&b).ok())
        .and_then(|v| v.get("schema").and_then(|s| s.as_str().map(str::to_owned)))
}

#[derive(Serialize)]
struct RefusalReport {
    error: String,
    ok: bool,
}

fn display_path(path: &Path, root: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let abs = abs.canonicalize().unwrap_or(abs);
    abs.strip_prefix(&root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// Runs `kiln-qual compare`.
pub fn compare(a: CompareArgs) -> i32 {
    use qual_receipt::compare::{self as cmp, CompareError, LoadedReceipt};
    // Each file is read once; the document table says whether both are campaign receipts.
    let baseline = qual_documents::read(&a.baseline);
    let candidate = qual_documents::read(&a.candidate);
    let campaign = |r: &Result<qual_documents::Source, _>| {
        r.as_ref()
            .is_ok_and(|s| s.is(qual_documents::Kind::CampaignReceipt))
    };
    if campaign(&baseline) && campaign(&candidate) {
        let (Ok(b), Ok(c)) = (&baseline, &candidate) else {
            unreachable!("both were read")
        };
        return super::campaign::compare_read_receipts(b, c, a.json);
    }
    let loaded = |path: &Path, r: Result<qual_documents::Source, qual_json::LoadError>| {
        let src = r.map_err(|e| CompareError {
            message: format!("cannot read receipt {}: {e}", path.display()),
            details: Vec::new(),
        })?;
        LoadedReceipt::from_bytes(path, &src.bytes)
    };
    let root = a.root.clone().unwrap_or_else(default_root);
    let result = (|| {
        let baseline = loaded(&a.baseline, baseline)?;
        let candidate = loaded(&a.candidate, candidate)?;
        let manifest = match &a.workload_manifest {
            Some(m) => Some(cmp::load_committed_manifest(m, &root)?),
            None => None,
        };
        cmp::compare(&baseline, &candidate, manifest.as_ref())
    })();
    let mut report = match result {
        Ok(r) => r,
        Err(e) => {
            if a.json {
                crate::output::print_json(&RefusalReport {
                    error: e.text(),
                    ok: false,
                });
            } else {
                errln!("kiln-qual: comparison failed: {}", esc(&e.message));
                for d in &e.details {
                    errln!("  - {}", esc(d));
                }
            }
            return exit::FAILED;
        }
    };
    report.baseline.path = display_path(&a.baseline, &root);
    report.candidate.path = display_path(&a.candidate, &root);
    if a.json {
        crate::output::print_json(&report);
    } else {
        out!("{}", qual_receipt::render::comparison_table(&report));
        for d in &report.compatibility.rejected_differences {
            errln!("rejected {}:", esc(&d.describe()));
            for line in d.detail.iter().take(20) {
                errln!("    {}", esc(line));
            }
            if d.detail.len() > 20 {
                errln!("    ... and {} more differing leaves", d.detail.len() - 20);
            }
        }
        for e in &report.errors {
            errln!("error: {}", esc(e));
        }
        if !report.compatible {
            errln!("metric deltas were not computed");
        } else if report.metric_evaluations.is_empty() && !report.evidence_errors.is_empty() {
            errln!("metric deltas were not computed: the evidence is not admissible");
        }
    }
    if report.ok {
        exit::OK
    } else {
        exit::FAILED
    }
}
