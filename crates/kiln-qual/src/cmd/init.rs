//! `kiln-qual init --engine E [--root R] [--server PATH] [--port P] [--backend B] [--dry-run]`:
//! scaffolds serving qualification of an existing repository for a real engine (the files are
//! planned by `qual_serve::scaffold`).
//!
//! The engine's executable is found on `PATH` now and recorded by absolute path (recipes never
//! look commands up), unless `--server` names it; `--engine openai-compatible` without
//! `--server` scaffolds the bundled mock server (this kiln-qual, `mock-server`), so the
//! whole path can be tried before a real server is at hand. The top-level `.gitignore` gains
//! `/.qualification/` when it does not ignore it yet (run data and exploratory receipts live
//! there; an untracked file would refuse the next run). Exit codes: 0 written (or, with
//! `--dry-run`, shown), 1 refused (not in a git repository, a target exists or lies behind a
//! symlink, the executable is not found) or not written, 2 usage. Every file is written
//! inside the repository's top level with no symlinked component
//! (`qual_serve::scaffold::write`).

use crate::exit;
use crate::output::{errln, esc, esc_path, outln};
use clap::Args;
use qual_serve::scaffold::{self, Engine};
use std::path::{Path, PathBuf};

/// Arguments of `kiln-qual init`.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// The engine: llama-cpp, vllm, sglang, ollama, tgi or openai-compatible.
    #[arg(long)]
    pub engine: Engine,
    /// Repository root, a git top level (default: the git top level of the current directory).
    #[arg(long, value_parser = super::args::Path, value_name = "R")]
    pub root: Option<PathBuf>,
    /// The server executable (default: the engine's executable found on PATH; for
    /// openai-compatible, the bundled mock server `kiln-qual mock-server`).
    #[arg(long, value_parser = super::args::Path, value_name = "PATH")]
    pub server: Option<PathBuf>,
    /// Port on 127.0.0.1 the server listens on.
    #[arg(long, default_value_t = 18100, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// Backend of the workload variant.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "rocm", "metal", "vulkan"])]
    pub backend: String,
    /// Print what would be written, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// The server executable and the arguments before the engine's own: `--server`, the
/// engine's executable found on `PATH`, or (for `openai-compatible` without `--server`) this
/// very kiln-qual as the bundled mock server. `Err` is the exit code, after saying why.
fn server(a: &InitArgs) -> Result<(PathBuf, Vec<String>), i32> {
    match (&a.server, a.engine.executable()) {
        (Some(p), _) => match std::path::absolute(p) {
            Ok(p) => Ok((p, Vec::new())),
            Err(e) => {
                errln!("kiln-qual: failed to resolve --server {}: {e}", esc_path(p));
                Err(exit::USAGE)
            }
        },
        (None, Some(exe)) => match super::args::find_on_path(exe) {
            Some(p) => Ok((p, Vec::new())),
            None => {
                errln!(
                    "kiln-qual: failed to find {} on PATH for --engine {}; install it or pass --server PATH",
                    esc(exe),
                    a.engine.name()
                );
                Err(exit::FAILED)
            }
        },
        (None, None) => match std::env::current_exe() {
            Ok(me) => {
                errln!(
                    "no --server: the launch recipe starts the bundled mock server ({} {}); pass --server PATH for your own server",
                    esc_path(&me),
                    scaffold::MOCK_SERVER_ARGS.join(" ")
                );
                Ok((me, scaffold::MOCK_SERVER_ARGS.map(str::to_owned).to_vec()))
            }
            Err(e) => {
                errln!("kiln-qual: failed to find this kiln-qual executable for the bundled mock server ({e}); pass --server PATH");
                Err(exit::FAILED)
            }
        },
    }
}

/// Runs `kiln-qual init`.
pub fn run(a: InitArgs) -> i32 {
    let (server, server_args) = match server(&a) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let root = match repository_root(a.root.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            errln!("kiln-qual: failed to scaffold: {}", esc(&e));
            return exit::FAILED;
        }
    };
    let opts = scaffold::Options {
        engine: a.engine,
        server,
        server_args,
        port: a.port,
        backend: a.backend.clone(),
    };
    let policy_exists = std::fs::symlink_metadata(root.join("qualification/policy.json")).is_ok();
    let files = scaffold::plan(&opts, policy_exists);
    let gitignore = match scaffold::gitignore_update(&root) {
        Ok(g) => g,
        Err(e) => {
            errln!("kiln-qual: failed to scaffold: {}", esc(&e.to_string()));
            return exit::FAILED;
        }
    };
    if a.dry_run {
        for f in &files {
            outln!("== {} (would write)", esc_path(&root.join(&f.path)));
            for line in f.contents.lines() {
                outln!("{}", esc(line));
            }
        }
        if gitignore.is_some() {
            outln!(
                "== {} (would append {})",
                esc_path(&root.join(".gitignore")),
                scaffold::IGNORE_LINE
            );
        }
        return exit::OK;
    }
    let written = match scaffold::write(&root, &files) {
        Ok(w) => w,
        Err(e) => {
            errln!("kiln-qual: failed to scaffold: {}", esc(&e.to_string()));
            return exit::FAILED;
        }
    };
    for p in &written {
        errln!("wrote {}", esc_path(p));
    }
    if let Some(text) = &gitignore {
        if let Err(e) = scaffold::write_gitignore(&root, text) {
            errln!(
                "kiln-qual: failed to add {} to .gitignore: {}; add it yourself (run data and exploratory receipts live there)",
                scaffold::IGNORE_LINE,
                esc(&e.to_string())
            );
            return exit::FAILED;
        }
        errln!("appended {} to .gitignore", scaffold::IGNORE_LINE);
    }
    next_steps(&root, &opts);
    exit::OK
}

/// The repository `init` writes into: the git top level of the current directory, or `--root`,
/// which must itself be a git top level (its symlinks resolved). Outside a git repository
/// there is nothing to qualify, and no place the writes are confined to.
fn repository_root(given: Option<&Path>) -> Result<PathBuf, String> {
    let start = match given {
        Some(r) => r.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    let not_repo = |e: &dyn std::fmt::Display| {
        format!(
            "{} is not in a git repository (init writes only inside one; run `git init` first): {e}",
            start.display()
        )
    };
    let top = qual_probe::git::Repo::discover(&start)
        .map_err(|e| not_repo(&e))?
        .root()
        .to_path_buf();
    if given.is_some() {
        let canonical = std::fs::canonicalize(&start).map_err(|e| not_repo(&e))?;
        if canonical != top {
            return Err(format!(
                "--root {} is not the top level of its git repository ({})",
                start.display(),
                top.display()
            ));
        }
    }
    Ok(top)
}

fn next_steps(root: &Path, o: &scaffold::Options) {
    let e = o.engine.name();
    errln!(
        "next: review the files, commit them, then\n  kiln-qual workload check qualification/workloads/serving-{e}-v1.json\n  kiln-qual run qualification/workloads/serving-{e}-v1.json --variant {} --host-id $(hostname) --model MODEL_DIR",
        o.backend
    );
    if o.engine == Engine::LlamaCpp {
        errln!("(llama-cpp serves MODEL_DIR/model.gguf; MODEL_DIR also needs config.json and tokenizer.json for the model fingerprint)");
    }
    if !o.server_args.is_empty() {
        errln!("(the bundled mock server computes nothing; MODEL_DIR is still fingerprinted, so it needs config.json, tokenizer.json and weights: a model kiln-qual's own tests use is qualification/fixtures/tiny-model in the kiln-qual repository)");
    }
    if o.engine == Engine::Ollama {
        errln!("(ollama serves the models it has pulled; --model names the directory the receipt fingerprints)");
    }
    let _ = root;
}
