//! `kiln-qual workload check|show`: validate workload contracts and describe them.

use crate::exit;
use crate::output::{errln, out, outln};
use crate::output::{esc, esc_path, print_json, table};
use clap::{Args, Subcommand};
use qual_contract::{Violation, Workload};
use rayon::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Workload subcommands.
#[derive(Subcommand, Debug)]
pub enum WorkloadCommand {
    /// Validate workload files: `OK <path> sha256:<hex>` per valid file, every violation of
    /// each invalid one. Exit 0 when all are valid, 1 otherwise.
    Check(CheckArgs),
    /// Describe a workload: variants, backends, device requirement, skip policy, case ids and
    /// the comparison policy in words.
    Show(ShowArgs),
}

/// `workload check` arguments.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Workload files (relative paths resolve against --root).
    #[arg(value_parser = super::args::Path, required = true)]
    files: Vec<PathBuf>,
    /// Directory that relative paths are resolved against.
    #[arg(value_parser = super::args::Path, long, default_value = ".")]
    root: PathBuf,
    /// Print a machine-readable report on stdout.
    #[arg(long)]
    json: bool,
}

/// `workload show` arguments.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The workload file.
    #[arg(value_parser = super::args::Path)]
    file: PathBuf,
    /// Print the description as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs a workload subcommand and returns the exit code.
pub fn run(c: WorkloadCommand) -> i32 {
    match c {
        WorkloadCommand::Check(a) => check(a),
        WorkloadCommand::Show(a) => show(a),
    }
}

#[derive(Serialize)]
struct FileReport {
    path: String,
    /// The path for the terminal (exact bytes, escaped).
    #[serde(skip)]
    shown: String,
    ok: bool,
    workload_id: Option<String>,
    sha256: Option<String>,
    variants: Vec<String>,
    errors: Vec<Violation>,
}

#[derive(Serialize)]
struct CheckReport {
    ok: bool,
    workloads: Vec<FileReport>,
}

fn check_one(given: &Path, path: &Path) -> FileReport {
    let mut report = FileReport {
        path: given.display().to_string(),
        shown: esc_path(given),
        ok: false,
        workload_id: None,
        sha256: None,
        variants: Vec::new(),
        errors: Vec::new(),
    };
    let bytes = match qual_json::read_file_limited(path, qual_contract::MAX_WORKLOAD_BYTES) {
        Ok(b) => b,
        Err(e) => {
            report.errors.push(Violation {
                pointer: String::new(),
                message: e.to_string(),
            });
            return report;
        }
    };
    // One strict parse on the usual (valid) path; an invalid file is parsed a second time
    // only to name its id and variants in the report.
    let value = match qual_contract::check_bytes(&bytes) {
        Ok(v) => {
            report.ok = true;
            report.sha256 = Some(qual_json::sha256_prefixed(&bytes));
            Some(v)
        }
        Err(violations) => {
            report.errors = violations;
            qual_json::from_slice_with(&bytes, qual_contract::workload_limits()).ok()
        }
    };
    if let Some(v) = &value {
        report.workload_id = v
            .get("workload_id")
            .and_then(|x| x.as_str())
            .map(str::to_owned);
        report.variants = v
            .get("variants")
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.get("id").and_then(|i| i.as_str()).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
    }
    report
}

fn resolve(root: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() || root == Path::new(".") {
        p.to_owned()
    } else {
        root.join(p)
    }
}

fn check(a: CheckArgs) -> i32 {
    // Files are independent: checked on all cores, reported in the order given.
    let reports: Vec<FileReport> = a
        .files
        .par_iter()
        .map(|p| check_one(p, &resolve(&a.root, p)))
        .collect();
    let ok = reports.iter().all(|r| r.ok);
    if a.json {
        print_json(&CheckReport {
            ok,
            workloads: reports,
        });
    } else {
        for r in &reports {
            if r.ok {
                outln!("OK {} {}", r.shown, r.sha256.as_deref().unwrap_or_default());
            } else {
                errln!("FAILED {}", r.shown);
                for e in &r.errors {
                    let ptr = if e.pointer.is_empty() {
                        "/"
                    } else {
                        &e.pointer
                    };
                    errln!("  {}: {}", esc(ptr), esc(&e.message));
                }
            }
        }
        let bad = reports.iter().filter(|r| !r.ok).count();
        if bad > 0 {
            errln!("{bad} of {} workload files invalid", reports.len());
        }
    }
    if ok {
        exit::OK
    } else {
        exit::FAILED
    }
}

#[derive(Serialize)]
struct ShowCase {
    id: String,
    required: bool,
    producer: &'static str,
    timeout_seconds: u64,
    command: Vec<String>,
}

#[derive(Serialize)]
struct ShowVariant {
    id: String,
    backend: &'static str,
    device_requirement: &'static str,
    skip_policy: &'static str,
    cases: Vec<ShowCase>,
}

#[derive(Serialize)]
struct ShowReport {
    path: String,
    sha256: String,
    workload_id: String,
    kind: &'static str,
    description: String,
    seed: Option<u64>,
    repetitions: u64,
    variables: Vec<String>,
    variants: Vec<ShowVariant>,
    comparison_policy: String,
}

fn show(a: ShowArgs) -> i32 {
    let loaded = match qual_contract::load_workload(&a.file) {
        Ok(l) => l,
        Err(e) => {
            errln!(
                "kiln-qual: failed to load workload {}: {}",
                esc_path(&a.file),
                esc(&e.to_string())
            );
            return exit::FAILED;
        }
    };
    let w = &loaded.workload;
    let report = ShowReport {
        path: a.file.display().to_string(),
        sha256: loaded.sha256.clone(),
        workload_id: w.workload_id.clone(),
        kind: w.kind.as_str(),
        description: w.description.clone(),
        seed: w.determinism.seed,
        repetitions: w.determinism.repetitions,
        variables: w
            .variables
            .iter()
            .map(|v| {
                format!(
                    "{} ({:?}{})",
                    v.name,
                    v.ty,
                    if v.required { ", required" } else { "" }
                )
                .to_lowercase()
            })
            .collect(),
        variants: w
            .variants
            .iter()
            .map(|v| ShowVariant {
                id: v.id.clone(),
                backend: v.backend.as_str(),
                device_requirement: match v.device_requirement {
                    qual_contract::DeviceRequirement::None => "none",
                    qual_contract::DeviceRequirement::Required => "required",
                },
                skip_policy: match v.skip_policy {
                    qual_contract::SkipPolicy::Allow => "allow",
                    qual_contract::SkipPolicy::Fail => "fail",
                },
                cases: v
                    .cases
                    .iter()
                    .map(|c| ShowCase {
                        id: c.id.clone(),
                        required: c.required,
                        producer: match c.result_protocol.producer {
                            qual_contract::Producer::Command => "command",
                            qual_contract::Producer::Runner => "runner",
                        },
                        timeout_seconds: c.timeout_seconds,
                        command: c.command.clone(),
                    })
                    .collect(),
            })
            .collect(),
        comparison_policy: describe_policy(w),
    };
    if a.json {
        print_json(&report);
        return exit::OK;
    }
    outln!(
        "{} ({})  {}",
        esc(&report.workload_id),
        report.kind,
        report.sha256
    );
    outln!("{}", esc(&report.description));
    outln!(
        "seed: {}  repetitions: {}",
        report.seed.map_or("none".to_owned(), |s| s.to_string()),
        report.repetitions
    );
    if !report.variables.is_empty() {
        outln!("variables: {}", esc(&report.variables.join(", ")));
    }
    outln!();
    let rows: Vec<Vec<String>> = report
        .variants
        .iter()
        .map(|v| {
            vec![
                v.id.clone(),
                v.backend.to_owned(),
                v.device_requirement.to_owned(),
                v.skip_policy.to_owned(),
                v.cases
                    .iter()
                    .map(|c| {
                        let mut s = c.id.clone();
                        if !c.required {
                            s.push_str(" (advisory)");
                        }
                        s
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    out!(
        "{}",
        table(&["VARIANT", "BACKEND", "DEVICE", "SKIP", "CASES"], &rows)
    );
    outln!();
    outln!("comparison: {}", report.comparison_policy);
    exit::OK
}

fn describe_policy(w: &Workload) -> String {
    use qual_contract::{Mode, Operator};
    let Some(p) = &w.comparison_policy else {
        return format!(
            "none: {} receipts are evidence on their own and are never compared",
            w.kind.as_str()
        );
    };
    let mut out = match p.mode {
        Mode::SelfContainedCorrectness => {
            "self-contained correctness: the verdict comes from each case's own assertions; receipts are not compared".to_owned()
        }
        Mode::SameEnvironmentPerformance => {
            "same-environment performance: two receipts of the same variant on the same environment may be compared".to_owned()
        }
        Mode::DeclaredAbVariants => {
            let pairs: Vec<String> = p
                .variant_pairs
                .iter()
                .map(|v| {
                    format!(
                        "{} -> {} (may differ only in {})",
                        esc(&v.baseline_variant_id),
                        esc(&v.candidate_variant_id),
                        esc(&v.allowed_effective_config_differences.join(", "))
                    )
                })
                .collect();
            format!("declared A/B variants: {}", pairs.join("; "))
        }
        Mode::CrossBackendCorrectness => {
            let pairs: Vec<String> = p
                .backend_pairs
                .iter()
                .map(|b| {
                    format!(
                        "{}:{} <-> {}:{} ({} environment differences allowed)",
                        b.backend_a.as_str(),
                        esc(&b.variant_a_id),
                        b.backend_b.as_str(),
                        esc(&b.variant_b_id),
                        b.allowed_environment_differences.len()
                    )
                })
                .collect();
            format!("cross-backend correctness: {}", pairs.join("; "))
        }
    };
    for r in &p.metric_rules {
        let op = match r.operator {
            Operator::Equal => "must equal the baseline",
            Operator::NotGreater => "must not exceed the baseline",
            Operator::NotLess => "must not fall below the baseline",
        };
        out.push_str(&format!(
            "\n  - {}/{} [{}, {}] {} (abs tol {}, rel tol {}){}",
            esc(&r.result_id),
            esc(&r.metric),
            esc(&r.unit),
            esc(&r.aggregation),
            op,
            r.absolute_tolerance,
            r.relative_tolerance,
            if r.required { "" } else { ", advisory" }
        ));
    }
    out
}
