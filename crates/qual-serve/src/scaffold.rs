//! `kiln-qual init`: the files that start serving qualification of an existing repository
//! against a real engine.
//!
//! For an [`Engine`] it plans, relative to the repository root:
//! - `qualification/policy.json` (generic source-tree profile) — only when absent;
//! - `qualification/bin/kiln-qual`, a launcher that runs `kiln-qual` from `PATH` (workload and
//!   recipe commands name an executable by path, never through a `PATH` lookup);
//! - `qualification/serving/<engine>/launch.json`: the engine's own launch command bound to
//!   127.0.0.1 and a fixed port, readiness through `/v1/models`, timeouts sized for the engine;
//! - `qualification/serving/<engine>/corpus.jsonl`: a small seeded corpus (chat and completions,
//!   `temperature` 0, a per-entry seed);
//! - `qualification/workloads/serving-<engine>-v1.json`: a `performance` workload whose one
//!   case runs `kiln-qual serve` at concurrency 2, with a comparison policy for TTFT, throughput
//!   and failures.
//!
//! [`write`] refuses to overwrite anything (every target is created exclusively, and it checks
//! all targets before writing the first) and writes only inside the repository: a target with
//! a symlinked component (`qualification -> /elsewhere`) is refused (`qual_json::confine`); a
//! dry run writes nothing. `qualification/serving/<engine>/.gitignore` ignores `logs/`, where
//! each serve run puts its server's logs in a fresh private directory. The generated workload and
//! recipe pass `workload check` and the recipe loader (tests prove it for every engine).

use std::path::{Path, PathBuf};

/// The engines `init` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// llama.cpp's `llama-server` (GGUF at `${model_path}/model.gguf`).
    LlamaCpp,
    /// vLLM's `vllm serve`.
    Vllm,
    /// SGLang's `python3 -m sglang.launch_server`.
    Sglang,
    /// Ollama's `ollama serve` (the model must already be pulled or created).
    Ollama,
    /// Hugging Face text-generation-inference's `text-generation-launcher`.
    Tgi,
    /// Any OpenAI-compatible server: the executable is given with `--server` and started as
    /// `SERVER --port P --model ${model_path}` (a wrapper script adapts other flags); without
    /// `--server`, the bundled mock (`kiln-qual mock-server`, see [`MOCK_SERVER_ARGS`]).
    OpenaiCompatible,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 6] = [
        Engine::LlamaCpp,
        Engine::Vllm,
        Engine::Sglang,
        Engine::Ollama,
        Engine::Tgi,
        Engine::OpenaiCompatible,
    ];

    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Engine::LlamaCpp => "llama-cpp",
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Ollama => "ollama",
            Engine::Tgi => "tgi",
            Engine::OpenaiCompatible => "openai-compatible",
        }
    }

    /// The executable looked up on `PATH` at init time (none for `openai-compatible`).
    pub fn executable(self) -> Option<&'static str> {
        match self {
            Engine::LlamaCpp => Some("llama-server"),
            Engine::Vllm => Some("vllm"),
            Engine::Sglang => Some("python3"),
            Engine::Ollama => Some("ollama"),
            Engine::Tgi => Some("text-generation-launcher"),
            Engine::OpenaiCompatible => None,
        }
    }

    /// Seconds the server may take to answer `/v1/models` (model load included).
    fn startup_timeout_seconds(self) -> u64 {
        match self {
            Engine::LlamaCpp | Engine::Ollama => 120,
            Engine::OpenaiCompatible => 300,
            Engine::Vllm | Engine::Sglang | Engine::Tgi => 900,
        }
    }

    /// The launch argv after the executable, and the environment.
    fn arguments(self, port: u16) -> (Vec<String>, Vec<(String, String)>) {
        let p = port.to_string();
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        match self {
            Engine::LlamaCpp => (
                s(&[
                    "--model",
                    "${model_path}/model.gguf",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &p,
                    "--parallel",
                    "2",
                    "--seed",
                    "17",
                ]),
                vec![],
            ),
            Engine::Vllm => (
                s(&[
                    "serve",
                    "${model_path}",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &p,
                    "--seed",
                    "17",
                ]),
                vec![],
            ),
            Engine::Sglang => (
                s(&[
                    "-m",
                    "sglang.launch_server",
                    "--model-path",
                    "${model_path}",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &p,
                    "--random-seed",
                    "17",
                ]),
                vec![],
            ),
            // Ollama serves what it has pulled; the fingerprinted model directory is passed
            // on (as the workload must consume it) for a wrapper that wants it.
            Engine::Ollama => (
                s(&["serve"]),
                vec![
                    ("OLLAMA_HOST".to_owned(), format!("127.0.0.1:{p}")),
                    (
                        "KILN_QUALIFICATION_MODEL_PATH".to_owned(),
                        "${model_path}".to_owned(),
                    ),
                ],
            ),
            Engine::Tgi => (
                s(&[
                    "--model-id",
                    "${model_path}",
                    "--hostname",
                    "127.0.0.1",
                    "--port",
                    &p,
                ]),
                vec![],
            ),
            Engine::OpenaiCompatible => (s(&["--port", &p, "--model", "${model_path}"]), vec![]),
        }
    }
}

impl std::str::FromStr for Engine {
    type Err = String;

    fn from_str(s: &str) -> Result<Engine, String> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
                format!("unknown engine {s:?}; one of {}", names.join(", "))
            })
    }
}

/// The arguments after the kiln-qual executable that make it the bundled mock server in an
/// `openai-compatible` scaffold without `--server`: a zero-compute server answering at a
/// 20 ms time to first token and 5 ms per token (the engine's `--port P --model
/// ${model_path}` follow; the mock serves the model directory's path as its model id).
pub const MOCK_SERVER_ARGS: [&str; 5] = ["mock-server", "--ttft-ms", "20", "--itl-ms", "5"];

/// What to scaffold.
#[derive(Clone, Debug)]
pub struct Options {
    /// The engine.
    pub engine: Engine,
    /// Absolute path of the server executable (found on `PATH` by the caller, or given).
    pub server: PathBuf,
    /// Arguments placed right after the executable, before the engine's own
    /// ([`MOCK_SERVER_ARGS`] for the bundled mock; usually none).
    pub server_args: Vec<String>,
    /// Port on 127.0.0.1.
    pub port: u16,
    /// Backend name in the workload variant (`cpu`, `cuda`, `rocm`, `metal`, `vulkan`).
    pub backend: String,
}

/// One file to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Path relative to the repository root.
    pub path: PathBuf,
    /// Contents.
    pub contents: String,
    /// Make it executable.
    pub executable: bool,
}

/// Why init wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// A target exists.
    #[error(
        "refuse to overwrite {0} (init never replaces a file; remove it or choose another engine)"
    )]
    Exists(String),
    /// Writing failed.
    #[error("write {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A target is not confined to the repository (a symlinked component, or outside it).
    #[error(transparent)]
    Confined(#[from] qual_json::confine::ConfineError),
}

fn json(v: &serde_json::Value) -> String {
    // serde's pretty format, not `qual_json::to_pretty_json`: this document's bytes (field
    // order, raw UTF-8, serde's float spelling) are its format; the Python-compatible writer
    // would change them.
    let mut s = serde_json::to_string_pretty(v).expect("scaffold JSON serializes");
    s.push('\n');
    s
}

const LAUNCHER: &str = r#"#!/bin/sh
# Written by `kiln-qual init`: runs kiln-qual from PATH, so workload commands can name an
# executable by path (kiln-qual never looks commands up on PATH itself).
command -v kiln-qual >/dev/null 2>&1 || { echo "kiln-qual is not on PATH (cargo install kiln-qual, or add its directory)" >&2; exit 127; }
exec kiln-qual "$@"
"#;

fn corpus() -> String {
    const TOPICS: [&str; 8] = [
        "kilns",
        "qualification",
        "latency",
        "throughput",
        "glazes",
        "receipts",
        "benchmarks",
        "clay",
    ];
    let mut out = String::new();
    for i in 0..16u64 {
        let endpoint = if i % 2 == 0 { "chat" } else { "completions" };
        let line = serde_json::json!({
            "id": format!("q{i:03}"),
            "endpoint": endpoint,
            "prompt": format!("Write a short paragraph about {} (number {i}).", TOPICS[i as usize % TOPICS.len()]),
            "max_tokens": 16 + (i % 4) * 8,
            "temperature": 0.0,
            "seed": 1000 + i,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

/// The launch recipe `init` writes: the engine's argv and environment on `o.port`.
fn launch_document(o: &Options) -> serde_json::Value {
    let e = o.engine.name();
    let (args, env) = o.engine.arguments(o.port);
    let mut command = vec![o.server.display().to_string()];
    command.extend(o.server_args.iter().cloned());
    command.extend(args);
    let environment: serde_json::Map<String, serde_json::Value> = env
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::from(v)))
        .collect();
    serde_json::json!({
        "schema": "kiln-qual.serve-launch.v1",
        "id": format!("{e}-server"),
        "command": command,
        "working_directory": "../../..",
        "environment": environment,
        "port": o.port,
        "log_directory": "logs",
        "readiness_poll_interval_ms": 200,
        "startup_timeout_seconds": o.engine.startup_timeout_seconds(),
        "shutdown_timeout_seconds": 30,
        "acceptable_exit_codes": [-15, 0, 143],
    })
}

/// The serving case's command: `kiln-qual serve` on the written launch recipe and corpus,
/// closed loop at concurrency 2, the selected `metrics`.
fn case_command(case_id: &str, dir: &str, metrics: &[&str]) -> Vec<String> {
    let mut case_command: Vec<String> = [
        "qualification/bin/kiln-qual",
        "serve",
        "--case-id",
        case_id,
        "--launch",
        &format!("{dir}/launch.json"),
        "--corpus",
        &format!("{dir}/corpus.jsonl"),
        "--seed",
        "${seed}",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    case_command.extend(["--model-path".to_owned(), "${model_path}".to_owned()]);
    for a in [
        "--concurrency",
        "2",
        "--warmup",
        "2",
        "--requests",
        "32",
        "--slo-ttft-ms",
        "2000",
    ] {
        case_command.push(a.to_owned());
    }
    for m in metrics {
        case_command.extend(["--metric".to_owned(), (*m).to_owned()]);
    }
    case_command
}

/// The workload `init` writes: one variant, one serving case, its comparison rules.
fn workload_document(
    o: &Options,
    case_id: &str,
    case_command: Vec<String>,
    metrics: &[&str],
) -> serde_json::Value {
    let e = o.engine.name();
    let rule = |metric: &str, unit: &str, aggregation: &str, lower: bool, abs: f64, rel: f64| {
        serde_json::json!({
            "scope": "result", "result_id": case_id, "metric": metric,
            "metric_class": "performance", "unit": unit, "aggregation": aggregation,
            "lower_is_better": lower,
            "operator": if lower { "not_greater" } else { "not_less" },
            "absolute_tolerance": abs, "relative_tolerance": rel, "required": true
        })
    };
    serde_json::json!({
        "schema_version": 1,
        "workload_id": format!("serving-{e}-v1"),
        "kind": "performance",
        "description": format!("Serving qualification of {e} through kiln-qual serve: owned launch on 127.0.0.1:{}, readiness, listener ownership, seeded closed-loop load at concurrency 2, clean shutdown. Written by kiln-qual init; pass --model with the model directory.", o.port),
        "determinism": {
            "seed": 17, "seed_delivery": "argv", "repetitions": 1,
            "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"
        },
        "variables": [],
        "variants": [{
            "id": o.backend,
            "description": format!("{e} on this host ({} backend).", o.backend),
            "backend": o.backend,
            "device_requirement": "none",
            "skip_policy": "fail",
            "effective_config": {},
            "cases": [{
                "id": case_id,
                "description": "Closed loop at concurrency 2, 32 measured requests after 2 warmup requests; every request must succeed.",
                "required": true,
                "command": case_command,
                "working_directory": ".",
                "environment": {},
                "timeout_seconds": o.engine.startup_timeout_seconds() + 600,
                "expected_exit_codes": [0],
                "output_assertions": [],
                "result_protocol": {
                    "format": "qualification-case-result-v1",
                    "producer": "command",
                    "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
                    "declared_metrics": metrics,
                }
            }]
        }],
        "comparison_policy": {
            "mode": "same_environment_performance",
            "variant_pairs": [], "backend_pairs": [],
            "metric_rules": [
                rule("output_tokens_per_second", "tokens/s", "rate", false, 0.0, 0.2),
                rule("requests_failed", "count", "count", true, 0.0, 0.0),
                rule("ttft_ms.p50", "ms", "p50", true, 1.0, 0.2),
            ]
        }
    })
}

/// The files `init` would write, in writing order (`policy_exists`: leave the policy alone).
pub fn plan(o: &Options, policy_exists: bool) -> Vec<Planned> {
    let e = o.engine.name();
    let dir = format!("qualification/serving/{e}");
    let launch = launch_document(o);
    let case_id = format!("{e}-serving-c2");
    let metrics = [
        "itl_ms.p50",
        "output_tokens_per_second",
        "requests_failed",
        "slo_attainment",
        "ttft_ms.p50",
    ];
    let case_command = case_command(&case_id, &dir, &metrics);
    let workload = workload_document(o, &case_id, case_command, &metrics);
    let mut out = Vec::new();
    if !policy_exists {
        out.push(Planned {
            path: "qualification/policy.json".into(),
            contents: json(
                &serde_json::json!({"schema_version": 1, "source_tree_profile": "generic"}),
            ),
            executable: false,
        });
    }
    out.push(Planned {
        path: "qualification/bin/kiln-qual".into(),
        contents: LAUNCHER.to_owned(),
        executable: true,
    });
    out.push(Planned {
        path: format!("{dir}/launch.json").into(),
        contents: json(&launch),
        executable: false,
    });
    out.push(Planned {
        path: format!("{dir}/corpus.jsonl").into(),
        contents: corpus(),
        executable: false,
    });
    // The server's logs stay in the repository, in a fresh private directory per run below
    // `logs/`, which git ignores (a qualification run needs a clean worktree).
    out.push(Planned {
        path: format!("{dir}/.gitignore").into(),
        contents: "/logs/\n".into(),
        executable: false,
    });
    out.push(Planned {
        path: format!("qualification/workloads/serving-{e}-v1.json").into(),
        contents: json(&workload),
        executable: false,
    });
    out
}

/// The line `init` makes sure the repository's top-level `.gitignore` has: run data and
/// exploratory receipts live below `.qualification/`, and a qualification run needs a clean
/// worktree (an untracked file there would refuse the next run).
pub const IGNORE_LINE: &str = "/.qualification/";

/// Whether a `.gitignore` text already ignores the top-level `.qualification/` directory
/// (any of the usual spellings on a line of its own).
pub fn ignores_qualification(gitignore: &str) -> bool {
    gitignore.lines().map(str::trim).any(|l| {
        matches!(
            l,
            ".qualification" | ".qualification/" | "/.qualification" | "/.qualification/"
        )
    })
}

/// The `.gitignore` of `root` with [`IGNORE_LINE`] appended, or `None` when it already
/// ignores `.qualification/` (a missing file reads as empty). Refuses a `.gitignore` that is
/// a symlink or not a regular file.
pub fn gitignore_update(root: &Path) -> Result<Option<String>, ScaffoldError> {
    let rel = Path::new(".gitignore");
    qual_json::confine::check(root, rel)?;
    let path = root.join(rel);
    let old = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        _ => qual_json::file::read_regular_string(&path, 1 << 20).map_err(|source| {
            ScaffoldError::Io {
                path: ".gitignore".into(),
                source,
            }
        })?,
    };
    if ignores_qualification(&old) {
        return Ok(None);
    }
    let mut new = old;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(IGNORE_LINE);
    new.push('\n');
    Ok(Some(new))
}

/// Writes the `.gitignore` text [`gitignore_update`] returned (replacing the file
/// atomically: the one file `init` changes rather than creates, and only by appending).
pub fn write_gitignore(root: &Path, text: &str) -> Result<(), ScaffoldError> {
    qual_json::confine::replace_file(root, Path::new(".gitignore"), text.as_bytes(), 0o644)?;
    Ok(())
}

/// Writes the planned files under `root`, refusing before writing anything when a target
/// exists (a launcher already present from another engine's init is kept, not an error).
pub fn write(root: &Path, files: &[Planned]) -> Result<Vec<PathBuf>, ScaffoldError> {
    let mut todo = Vec::new();
    for f in files {
        qual_json::confine::check(root, &f.path)?;
        let target = root.join(&f.path);
        if let Ok(m) = std::fs::symlink_metadata(&target) {
            if f.executable
                && m.is_file()
                && qual_json::file::read_regular_string(&target, f.contents.len())
                    .ok()
                    .as_deref()
                    == Some(&f.contents)
            {
                continue;
            }
            return Err(ScaffoldError::Exists(f.path.display().to_string()));
        }
        todo.push(f);
    }
    let mut written = Vec::new();
    for f in todo {
        let io = |source| ScaffoldError::Io {
            path: f.path.display().to_string(),
            source,
        };
        let mode = if f.executable { 0o755 } else { 0o644 };
        let mut file = qual_json::confine::create_file(root, &f.path, mode)?;
        std::io::Write::write_all(&mut file, f.contents.as_bytes()).map_err(io)?;
        written.push(f.path.clone());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(engine: Engine) -> Options {
        Options {
            engine,
            server: "/usr/bin/server".into(),
            server_args: Vec::new(),
            port: 18100,
            backend: "cpu".into(),
        }
    }

    #[test]
    fn gitignore_gains_the_qualification_line_once() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let new = gitignore_update(root).unwrap().unwrap();
        assert_eq!(new, "/.qualification/\n");
        std::fs::write(root.join(".gitignore"), "target").unwrap();
        let new = gitignore_update(root).unwrap().unwrap();
        assert_eq!(new, "target\n/.qualification/\n");
        write_gitignore(root, &new).unwrap();
        assert!(gitignore_update(root).unwrap().is_none());
        for spelled in [
            ".qualification",
            ".qualification/",
            "/.qualification",
            " /.qualification/ ",
        ] {
            assert!(
                ignores_qualification(&format!("a\n{spelled}\nb")),
                "{spelled}"
            );
        }
        assert!(!ignores_qualification(".qualification/runs/\n"));
        std::fs::remove_file(root.join(".gitignore")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join(".gitignore")).unwrap();
        assert!(gitignore_update(root).is_err());
    }

    #[test]
    fn every_engine_scaffolds_a_valid_recipe_and_corpus() {
        for engine in Engine::ALL {
            let files = plan(&opts(engine), false);
            assert_eq!(files.len(), 6);
            let launch = files
                .iter()
                .find(|f| f.path.ends_with("launch.json"))
                .unwrap();
            let v = qual_json::from_str(&launch.contents).unwrap();
            let recipe = crate::recipe::validate(
                &v,
                Path::new("/repo/qualification/serving/x"),
                String::new(),
            );
            assert!(recipe.is_ok(), "{}: {:?}", engine.name(), recipe.err());
            let corpus = files
                .iter()
                .find(|f| f.path.ends_with("corpus.jsonl"))
                .unwrap();
            crate::corpus::parse(corpus.contents.as_bytes()).expect("corpus is valid");
            assert_eq!(engine.name().parse::<Engine>().unwrap(), engine);
        }
        assert!("vllm2".parse::<Engine>().is_err());
    }

    #[test]
    fn refuses_to_overwrite_and_writes_nothing_then() {
        let d = tempfile::tempdir().unwrap();
        let files = plan(&opts(Engine::Vllm), false);
        write(d.path(), &files).unwrap();
        let again = write(d.path(), &files);
        assert!(matches!(again, Err(ScaffoldError::Exists(_))));
        // A second engine shares the launcher and the policy is left alone.
        let tgi = plan(&opts(Engine::Tgi), true);
        let written = write(d.path(), &tgi).unwrap();
        assert_eq!(written.len(), 4);
    }
}
