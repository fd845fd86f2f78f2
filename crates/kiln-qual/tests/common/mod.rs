//! Helpers shared by the CLI integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod fleet;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `git -C root args…` with a fixed identity; panics with git's stderr on failure.
pub fn git(root: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Copies a directory tree (regular files and directories).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// The Kiln corpus (`../shared/kiln-corpus` beside the repository), when present.
/// A user's clone has no `../shared`: callers skip with a printed message.
pub fn corpus() -> Option<PathBuf> {
    let p = repo_root().join("../shared/kiln-corpus");
    p.is_dir().then_some(p)
}

/// One deliberate difference from `compat/deliberate-differences.json`.
#[derive(serde::Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    pub corpus: String,
    pub file: String,
    pub reason: String,
}

/// The reasoned list of deliberate verdict differences.
pub fn deliberate_differences() -> Vec<Difference> {
    let text = std::fs::read_to_string(repo_root().join("compat/deliberate-differences.json"))
        .expect("compat/deliberate-differences.json exists");
    let list: Vec<Difference> = serde_json::from_str(&text).expect("valid differences list");
    for d in &list {
        assert!(
            !d.reason.trim().is_empty(),
            "difference for {} has no reason",
            d.file
        );
    }
    list
}

/// Compares verdicts with labels, prints `N/M verdicts agree`, and panics on any
/// disagreement that is not a listed deliberate difference.
pub fn assert_verdicts(corpus_name: &str, verdicts: &[(String, bool, bool, String)]) {
    let allowed = deliberate_differences();
    let mut agree = 0;
    let mut unexpected = Vec::new();
    for (file, ours, label, detail) in verdicts {
        if ours == label {
            agree += 1;
            if allowed
                .iter()
                .any(|d| d.corpus == corpus_name && &d.file == file)
            {
                println!(
                    "note: {corpus_name}/{file} is listed as a deliberate difference but agrees"
                );
            }
        } else if let Some(d) = allowed
            .iter()
            .find(|d| d.corpus == corpus_name && &d.file == file)
        {
            println!("deliberate difference {corpus_name}/{file}: {}", d.reason);
        } else {
            unexpected.push(format!(
                "  {file}: ours={} label={} ({detail})",
                if *ours { "valid" } else { "invalid" },
                if *label { "valid" } else { "invalid" }
            ));
        }
    }
    println!("{corpus_name}: {agree}/{} verdicts agree", verdicts.len());
    assert!(
        unexpected.is_empty(),
        "{} unexplained disagreement(s) in {corpus_name}:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}

/// The legacy latency manifest's path in a repository.
pub const LATENCY_MANIFEST: &str = "docs/contracts/backend-latency-fixtures.json";

/// A git repository with one committed latency fixture, `echo_fixture` (`echo` stands in for
/// a benchmark binary; the command is an argv, never a shell line), whose `result_artifact`
/// is `result`.
pub fn latency_repo(result: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    std::fs::write(root.join(".gitignore"), "*.log\ntarget/\n").unwrap();
    std::fs::create_dir_all(root.join("docs/contracts")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/bench.rs"), "// bench\n").unwrap();
    let manifest = serde_json::json!({
        "schema_version": 1,
        "status": "fixture_required",
        "policy": {"covered_gate_requires": [
            "Every required backend has at least one known hardware fixture.",
            "Every fixture has locked numeric thresholds for its required measurements.",
            "Every locked threshold has a checked hardware-result artifact from the named fixture.",
            "Default-feature local tests must not mark the hardware latency gate covered."
        ]},
        "required_backends": ["metal"],
        "fixtures": [{
            "id": "echo_fixture",
            "backend": "metal",
            "hardware": "any host",
            "source": "src/bench.rs",
            "command": "echo 'KILN_LATENCY_METRIC latency_ms 9.5 ms'",
            "result_artifact": result,
            "threshold_state": "pending_fixture_result",
            "metrics": [{"name": "latency_ms", "unit": "ms", "comparison": "<=", "max": null}]
        }],
        "missing_fixture_slots": []
    });
    std::fs::write(
        root.join(LATENCY_MANIFEST),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "fixture"]);
    dir
}

/// For serving runs against a server whose timing truth the test does not know: the run
/// passed (exit 0), or the product's validity gate refused its timing — exit 1 and every
/// reason in the serving evidence under `.qualification/runs/` is `invalid run: …`. Any other failure fails the test. Returns whether it was a refusal.
pub fn passed_or_refused_by_the_gate(root: &Path, out: &std::process::Output) -> bool {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(0) {
        assert!(stderr.contains("verdict: passed"), "{stderr}");
        return false;
    }
    // The serving evidence lists the case's reasons one by one.
    fn find(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                find(&p, out);
            } else if p.to_string_lossy().ends_with(".serve-evidence.json") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    find(&root.join(".qualification/runs"), &mut files);
    let reasons: Vec<String> = files
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .filter_map(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .flat_map(|v| {
            v["reasons"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|r| r.as_str().map(str::to_string))
        })
        .collect();
    let refused = out.status.code() == Some(1)
        && !reasons.is_empty()
        && reasons.iter().all(|r| r.starts_with("invalid run:"));
    let details = reasons.join(" | ");
    assert!(refused, "neither passed nor refused by the gate: {stderr}");
    eprintln!("the product declared this run's timing invalid: {details}");
    true
}

/// A throwaway git repository holding `files` (paths relative to this repository, copied),
/// committed, with this repository's `.cache` linked in (real servers, Python environments)
/// and the kiln-qual under test at `target/debug/kiln-qual` (where `scripts/kiln-qual` finds
/// it). For the end-to-end tests of example workloads against real parts.
pub fn example_checkout(files: &[&str], message: &str) -> tempfile::TempDir {
    let src = repo_root();
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    for rel in files {
        let to = root.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(src.join(rel), to).unwrap();
    }
    std::fs::write(
        root.join(".gitignore"),
        ".qualification/\ntarget/\n.cache\n",
    )
    .unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", message]);
    std::os::unix::fs::symlink(src.join(".cache"), root.join(".cache")).unwrap();
    std::fs::create_dir_all(root.join("target/debug")).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_kiln-qual"),
        root.join("target/debug/kiln-qual"),
    )
    .unwrap();
    d
}

/// A free TCP port on 127.0.0.1 (bound, read and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process (a server a test started) killed and reaped on drop.
pub struct KilledOnDrop(pub std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (up to a minute) until something listens on 127.0.0.1:`port`; `what` names it in
/// the failure.
pub fn wait_port(port: u16, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not listen on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `BIN mock-server --port P EXTRA…` on a free port (output discarded), listening: the server
/// and its port.
pub fn mock_server(bin: impl AsRef<std::ffi::OsStr>, extra: &[&str]) -> (KilledOnDrop, u16) {
    let port = free_port();
    let child = std::process::Command::new(bin)
        .args(["mock-server", "--port", &port.to_string()])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = KilledOnDrop(child);
    wait_port(port, "the mock server");
    (server, port)
}

/// A launch recipe (`kiln-qual.serve-launch.v1`) at `path` for an owned mock server:
/// `bin mock-server --port PORT ARGS…` with `environment`, logs in `logs/`, short deadlines.
pub fn mock_launch_recipe(
    path: &Path,
    id: &str,
    bin: &str,
    port: u16,
    args: &[&str],
    environment: serde_json::Value,
) {
    let mut command = vec![
        bin.to_string(),
        "mock-server".into(),
        "--port".into(),
        port.to_string(),
    ];
    command.extend(args.iter().map(|s| s.to_string()));
    let mut recipe = serde_json::json!({
        "schema": "kiln-qual.serve-launch.v1",
        "id": id,
        "command": command,
        "working_directory": ".",
        "port": port,
        "log_directory": "logs",
        "readiness_poll_interval_ms": 10,
        "startup_timeout_seconds": 5,
        "shutdown_timeout_seconds": 5,
        "acceptable_exit_codes": [0],
    });
    if !environment.is_null() {
        recipe["environment"] = environment;
    }
    std::fs::write(path, recipe.to_string()).unwrap();
}

/// A stand-in model folder `dir/model` (a `GGUF` magic, `{}` config and tokenizer: what the
/// model fingerprint reads, for servers that never load it), made once; its path.
pub fn stand_in_model(dir: &Path) -> PathBuf {
    let model = dir.join("model");
    if !model.exists() {
        std::fs::create_dir_all(&model).unwrap();
        for (f, b) in [
            ("m.gguf", "GGUF"),
            ("config.json", "{}"),
            ("tokenizer.json", "{}"),
        ] {
            std::fs::write(model.join(f), b).unwrap();
        }
    }
    model
}

/// An Ed25519 key pair made by `ssh-keygen` (no passphrase): private key, public key and
/// the fingerprint as `ssh-keygen -l` prints it.
pub fn ssh_keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
    let key = dir.join(name);
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen runs");
    assert!(out.status.success(), "{out:?}");
    let pubkey = dir.join(format!("{name}.pub"));
    let out = std::process::Command::new("ssh-keygen")
        .arg("-lf")
        .arg(&pubkey)
        .output()
        .unwrap();
    let fingerprint = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned();
    (key, pubkey, fingerprint)
}

/// The interoperability venv's python (`scripts/setup-python-interop`), present or not.
pub fn interop_venv_python() -> PathBuf {
    repo_root().join(".cache/venv-interop/bin/python")
}

/// The interoperability venv (`scripts/setup-python-interop`): `None` skips loudly, except
/// under `CI=true`, where its absence fails.
pub fn interop_python() -> Option<PathBuf> {
    let python = interop_venv_python();
    if python.is_file() {
        return Some(python);
    }
    let msg = "SKIPPED: .cache/venv-interop is absent; run scripts/setup-python-interop";
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{msg} (required under CI=true)"
    );
    eprintln!("{msg}");
    None
}

/// Runs the `kiln-qual` under test in `root` with its directory first on `PATH` (so a scaffold's
/// `kiln-qual …` launch line finds it).
pub fn kq(root: &Path, args: &[&str]) -> std::process::Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_kiln-qual"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new(bin)
        .current_dir(root)
        .env("PATH", path)
        .args(args)
        .output()
        .unwrap()
}

/// `init --engine ENGINE --server SERVER --port PORT` in a fresh git repository at `root`,
/// committed, then `run` of the scaffolded workload (the `cpu` variant, `models/tiny`): the run
/// passes or is refused by the validity gate only, and its receipt validates.
pub fn init_run_and_check(root: &Path, engine: &str, server: &str, port: &str) {
    git(root, &["init", "-q"]);
    let out = kq(
        root,
        &[
            "init", "--engine", engine, "--server", server, "--port", port,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "scaffold"]);
    let workload = format!("qualification/workloads/serving-{engine}-v1.json");
    let receipt = format!(".qualification/receipts/{engine}.json");
    let out = kq(
        root,
        &[
            "run",
            &workload,
            "--variant",
            "cpu",
            "--host-id",
            "init-host",
            "--model",
            "models/tiny",
            "--output",
            &receipt,
        ],
    );
    passed_or_refused_by_the_gate(root, &out);
    let out = kq(root, &["receipt", "check", &receipt]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
