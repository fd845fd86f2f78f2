//! The llama-cpp scaffold of `kiln-qual init` against the real `llama-server` that
//! `scripts/setup-real-server` installs (CI does): init, commit, `run` with the tiny GGUF as
//! `MODEL_DIR/model.gguf`, and the receipt validates. Without the installed server the trial
//! is reported ignored (failed under `CI=true`).

use crate::common::{init_run_and_check, repo_root};
use qual_test_fixtures::harness::{self, Trial};

fn llama_cpp_scaffold_runs_against_the_real_server() {
    let cache = repo_root().join(".cache/real-server");
    let server = cache.join("llama-server");
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let model = root.join("models/tiny");
    std::fs::create_dir_all(&model).unwrap();
    let src = cache.join("root/models/tiny");
    for (from, to) in [
        ("config.json", "config.json"),
        ("tokenizer.json", "tokenizer.json"),
        ("chat_template.jinja", "chat_template.jinja"),
        ("tiny.gguf", "model.gguf"),
    ] {
        std::fs::copy(src.join(from), model.join(to)).unwrap();
    }
    std::fs::write(root.join(".gitignore"), ".qualification/\nmodels/\n").unwrap();
    init_run_and_check(root, "llama-cpp", &server.to_string_lossy(), "18141");
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![Trial::new(
        "llama_cpp_scaffold_runs_against_the_real_server",
        llama_cpp_scaffold_runs_against_the_real_server,
    )
    .needs(harness::needs_file(
        &repo_root().join(".cache/real-server/llama-server"),
        "the real llama-server (run scripts/setup-real-server)",
    ))]
}
