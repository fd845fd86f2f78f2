//! A real fleet set-up for the fleet tests: a bare "upstream" repository and a clone of it
//! with small CPU workloads (pass, fail, sleep), pushed to `origin/main`; one real Ed25519
//! key per host (`ssh-keygen`); a plan over them. Tasks run the exact script
//! `kiln-qual fleet dispatch` generates.

use super::{git, ssh_keygen};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A set-up: the temporary directory and what lies in it.
pub struct Fleet {
    /// Keeps everything alive.
    pub dir: tempfile::TempDir,
    /// The bare upstream repository (what the nodes clone).
    pub upstream: PathBuf,
    /// The clone the plan, collect and report work in.
    pub work: PathBuf,
    /// The pushed commit.
    pub commit: String,
    /// `(host id, private key, public key line, fingerprint)` of `node1`, `node2`.
    pub hosts: Vec<(String, PathBuf, String, String)>,
}

/// A workload with one required case running `argv` (case timeout `timeout` s).
pub fn workload(id: &str, argv: &[&str], timeout: u64) -> String {
    format!(
        r#"{{"schema_version": 1, "workload_id": "{id}", "kind": "correctness",
  "description": "fleet test workload {id}",
  "determinism": {{"seed": 1, "seed_delivery": "fixed_fixture", "repetitions": 1, "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"}},
  "variables": [],
  "variants": [{{"id": "cpu", "description": "host cpu", "backend": "cpu", "device_requirement": "none", "skip_policy": "fail", "effective_config": {{}},
    "cases": [{{"id": "probe", "description": "the case", "required": true, "command": {argv}, "working_directory": ".", "environment": {{}}, "timeout_seconds": {timeout}, "expected_exit_codes": [0], "output_assertions": [],
      "result_protocol": {{"format": "qualification-case-result-v1", "producer": "runner", "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT", "declared_metrics": ["case_pass", "exit_code", "output_assertion_failures"]}}}}]}}],
  "comparison_policy": {{"mode": "self_contained_correctness", "variant_pairs": [], "backend_pairs": [], "metric_rules": []}}}}
"#,
        argv = serde_json::to_string(argv).unwrap()
    )
}

/// `git -C dir args` printing stdout.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// The set-up (see the module docs).
pub fn fleet() -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let upstream = base.join("upstream.git");
    let work = base.join("work");
    git(
        &base,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            upstream.to_str().unwrap(),
        ],
    );
    git(
        &base,
        &[
            "clone",
            "-q",
            upstream.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    git(&work, &["checkout", "-q", "-b", "main"]);
    std::fs::write(work.join(".gitignore"), ".qualification/\n").unwrap();
    let w = work.join("qualification/workloads");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(
        w.join("fleet-pass-v1.json"),
        workload("fleet-pass-v1", &["uname", "-s"], 60),
    )
    .unwrap();
    std::fs::write(
        w.join("fleet-fail-v1.json"),
        workload("fleet-fail-v1", &["false"], 60),
    )
    .unwrap();
    std::fs::write(
        w.join("fleet-sleep-v1.json"),
        workload("fleet-sleep-v1", &["sleep", "600"], 900),
    )
    .unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "fleet workloads"]);
    git(&work, &["push", "-q", "-u", "origin", "main"]);
    let commit = git_out(&work, &["rev-parse", "HEAD"]);
    let keys = base.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let hosts = ["node1", "node2"]
        .iter()
        .map(|h| {
            let (key, public, fp) = ssh_keygen(&keys, h);
            let line = std::fs::read_to_string(public).unwrap().trim().to_owned();
            (h.to_string(), key, line, fp)
        })
        .collect();
    Fleet {
        dir,
        upstream,
        work,
        commit,
        hosts,
    }
}

/// One planned target: id, host, workload file name, Slurm time limit in minutes.
pub type PlannedTarget<'a> = (&'a str, &'a str, &'a str, u64);

impl Fleet {
    /// The set-up's base directory.
    pub fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    /// A plan over `targets` (each with a Slurm placement on its node and `runs_on` labels
    /// `[self-hosted, <host>]`), written to `<base>/<name>`.
    pub fn plan(&self, name: &str, commit: &str, targets: &[PlannedTarget<'_>]) -> PathBuf {
        let hosts: Vec<serde_json::Value> = self
            .hosts
            .iter()
            .map(|(h, key, line, _)| serde_json::json!({"host_id": h, "public_key": line, "signing_key": key}))
            .collect();
        let targets: Vec<serde_json::Value> = targets
            .iter()
            .map(|(id, host, w, minutes)| serde_json::json!({
                "id": id, "host_id": host, "workload": format!("qualification/workloads/{w}"), "variant": "cpu",
                "slurm": {"partition": "qual", "nodelist": host, "constraint": null, "gres": null, "time_limit_minutes": minutes},
                "runs_on": ["self-hosted", host]
            }))
            .collect();
        let plan = serde_json::json!({
            "schema": "kiln-qual.fleet-plan.v1", "fleet_id": "test-fleet",
            "repository": self.upstream, "commit": commit, "upstream": "origin/main",
            "hosts": hosts, "targets": targets
        });
        let path = self.base().join(name);
        std::fs::write(&path, serde_json::to_string_pretty(&plan).unwrap()).unwrap();
        path
    }
}

/// Runs `kiln-qual args` in `dir` with `env`.
pub fn kq_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kiln-qual"));
    c.current_dir(dir).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The task scripts of a dispatch (`fleet dispatch --dry-run --json`), with their targets.
pub fn task_scripts(f: &Fleet, plan: &Path, evidence: &Path) -> Vec<(String, Vec<String>)> {
    let bin = env!("CARGO_BIN_EXE_kiln-qual");
    let o = kq_env(
        &f.work,
        &[
            "fleet",
            "dispatch",
            plan.to_str().unwrap(),
            "--evidence",
            evidence.to_str().unwrap(),
            "--kiln-qual",
            bin,
            "--dry-run",
            "--json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            let targets = j["job"]["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_owned())
                .collect();
            (j["task_script"].as_str().unwrap().to_owned(), targets)
        })
        .collect()
}

/// Runs array task `index` of `script` by hand, as a Slurm node named `node` would (the
/// variables Slurm sets); returns its exit code.
pub fn run_task(script: &str, index: usize, node: &str) -> i32 {
    let o = Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("SLURM_ARRAY_TASK_ID", index.to_string())
        .env("SLURMD_NODENAME", node)
        .output()
        .unwrap();
    o.status.code().unwrap_or(-1)
}
