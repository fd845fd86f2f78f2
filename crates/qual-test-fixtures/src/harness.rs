//! Loud skips: a small libtest-compatible runner for test targets whose tests need something
//! real (the Kiln corpus in `../shared`, the llama.cpp server, root).
//!
//! A target declares `harness = false` and calls [`run`] from `main` with its [`Trial`]s.
//! A trial whose dependency is missing is reported **ignored** with the reason
//! (`test x ... ignored, needs …`) and counted in the summary's `ignored`, never as `ok`;
//! with `CI=true` in the environment the same trial **fails** (`CI=true and …`), so CI can
//! never pass by skipping. The Kiln corpus (`../shared`, beside the repository) is the one
//! exception ([`Trial::needs_corpus`]): a user's clone, and so a user's own CI, does not have
//! it, so its absence fails a trial only when the CI script asks for the corpus explicitly
//! with [`REQUIRE_CORPUS`]`=1` (ours does, in `.ci/run`), not merely under `CI=true`. The
//! dependency is checked when the tests run, not when they are built, so installing it
//! needs no rebuild.
//!
//! Understood arguments (as `cargo test` passes them): name filters (substring, or exact with
//! `--exact`), `--skip NAME`, `--ignored` / `--include-ignored` (run trials whose dependency
//! is missing; they then fail on their own), `--list`, and the harmless `--nocapture`,
//! `--test-threads N`, `-q`/`--quiet`, `--color X`, `--format X`, `--show-output`. Trials run
//! one after another on the main thread, output uncaptured. Invariant: the exit status is 0
//! only when no selected trial failed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Instant;

/// The variable with which a CI script asks for the Kiln corpus: `KIQ_REQUIRE_CORPUS=1`
/// makes a trial whose corpus is missing fail instead of being ignored.
pub const REQUIRE_CORPUS: &str = "KIQ_REQUIRE_CORPUS";

/// Who requires a missing dependency (and so turns its skip into a failure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RequiredBy {
    /// `CI=true`: CI skips nothing.
    Ci,
    /// [`REQUIRE_CORPUS`]`=1`: the CI script asked for the corpus.
    CorpusRequest,
}

impl RequiredBy {
    /// Why the missing dependency is a failure now, if it is.
    fn demands(self) -> Option<&'static str> {
        let var = |k: &str, want: &str| std::env::var(k).is_ok_and(|v| v == want);
        match self {
            RequiredBy::Ci => var("CI", "true").then_some("CI=true"),
            RequiredBy::CorpusRequest => var(REQUIRE_CORPUS, "1").then_some("KIQ_REQUIRE_CORPUS=1"),
        }
    }
}

/// One named test with an optional dependency.
pub struct Trial {
    name: String,
    needs: Result<(), String>,
    required_by: RequiredBy,
    body: fn(),
}

impl Trial {
    /// A trial running `body`.
    pub fn new(name: &str, body: fn()) -> Trial {
        Trial {
            name: name.to_string(),
            needs: Ok(()),
            required_by: RequiredBy::Ci,
            body,
        }
    }

    /// Makes the trial depend on `check` (`Err(what is missing)` skips it loudly; a failure
    /// under `CI=true`).
    pub fn needs(mut self, check: Result<(), String>) -> Trial {
        if self.needs.is_ok() {
            self.needs = check;
            self.required_by = RequiredBy::Ci;
        }
        self
    }

    /// Makes the trial depend on the Kiln corpus (`check`, e.g. [`needs_dir`] of
    /// `../shared/kiln-corpus/…`): missing, it is ignored, also under `CI=true`, and fails
    /// only with [`REQUIRE_CORPUS`]`=1`.
    pub fn needs_corpus(mut self, check: Result<(), String>) -> Trial {
        if self.needs.is_ok() {
            self.needs = check;
            self.required_by = RequiredBy::CorpusRequest;
        }
        self
    }
}

/// `Ok` when `path` is a directory, else what is missing.
pub fn needs_dir(path: &Path, what: &str) -> Result<(), String> {
    if path.is_dir() {
        Ok(())
    } else {
        Err(format!("needs {what} ({} is absent)", path.display()))
    }
}

/// `Ok` when `path` is a file, else what is missing.
pub fn needs_file(path: &Path, what: &str) -> Result<(), String> {
    if path.is_file() {
        Ok(())
    } else {
        Err(format!("needs {what} ({} is absent)", path.display()))
    }
}

/// `Ok` when the effective user is root.
pub fn needs_root(why: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(format!("needs root ({why})"))
    }
}

#[derive(Default)]
struct Args {
    filters: Vec<String>,
    skip: Vec<String>,
    exact: bool,
    run_ignored: bool,
    list: bool,
}

fn parse(args: impl Iterator<Item = String>) -> Args {
    let mut a = Args::default();
    let mut it = args.peekable();
    while let Some(x) = it.next() {
        match x.as_str() {
            "--exact" => a.exact = true,
            "--ignored" | "--include-ignored" => a.run_ignored = true,
            "--list" => a.list = true,
            "--skip" => a.skip.extend(it.next()),
            "--test-threads" | "--color" | "--format" | "--logfile" | "-Z" => {
                it.next();
            }
            s if s.starts_with("--skip=") => a.skip.push(s["--skip=".len()..].to_string()),
            s if s.starts_with('-') => {}
            s => a.filters.push(s.to_string()),
        }
    }
    a
}

fn selected(a: &Args, name: &str) -> bool {
    let hit = |f: &String| {
        if a.exact {
            name == f
        } else {
            name.contains(f.as_str())
        }
    };
    (a.filters.is_empty() || a.filters.iter().any(hit)) && !a.skip.iter().any(hit)
}

/// A skip inside a libtest test, said out loud: prints `skipped: {why}` (the test then returns
/// early), and under `CI=true` (CI skips nothing) panics with `CI=true and {why}` instead.
pub fn skip(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and {why}"
    );
    eprintln!("skipped: {why}");
}

/// Runs the trials of several modules as one target, like [`run`], each trial named
/// `module::trial` as libtest names the tests of a module.
pub fn run_modules(modules: Vec<(&str, Vec<Trial>)>) -> ! {
    let trials = modules
        .into_iter()
        .flat_map(|(module, trials)| {
            trials.into_iter().map(move |mut t| {
                t.name = format!("{module}::{}", t.name);
                t
            })
        })
        .collect();
    run(trials)
}

/// Runs the trials like libtest and exits (101 when any failed).
pub fn run(trials: Vec<Trial>) -> ! {
    let args = parse(std::env::args().skip(1));
    let total = trials.len();
    let chosen: Vec<Trial> = trials
        .into_iter()
        .filter(|t| selected(&args, &t.name))
        .collect();
    if args.list {
        for t in &chosen {
            println!("{}: test", t.name);
        }
        std::process::exit(0);
    }
    let started = Instant::now();
    println!("\nrunning {} tests", chosen.len());
    let (mut passed, mut ignored) = (0, 0);
    let mut failed: Vec<(String, String)> = Vec::new();
    for t in chosen.iter() {
        match (&t.needs, t.required_by.demands(), args.run_ignored) {
            (Err(why), Some(by), _) => {
                println!("test {} ... FAILED", t.name);
                failed.push((t.name.clone(), format!("{by} and the test {why}")));
                continue;
            }
            (Err(why), None, false) => {
                println!("test {} ... ignored, {why}", t.name);
                eprintln!("skipped: {}: {why}", t.name);
                ignored += 1;
                continue;
            }
            _ => {}
        }
        let body = t.body;
        match catch_unwind(AssertUnwindSafe(body)) {
            Ok(()) => {
                println!("test {} ... ok", t.name);
                passed += 1;
            }
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".into());
                println!("test {} ... FAILED", t.name);
                failed.push((t.name.clone(), msg));
            }
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:\n");
        for (name, msg) in &failed {
            println!("---- {name} ----\n{msg}\n");
        }
        println!("failures:");
        for (name, _) in &failed {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; {ignored} ignored; 0 measured; {} filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        total - chosen.len(),
        started.elapsed().as_secs_f64()
    );
    std::process::exit(if failed.is_empty() { 0 } else { 101 });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_select_like_libtest() {
        let a = parse(
            [
                "real",
                "--skip",
                "real_b",
                "--test-threads",
                "1",
                "--nocapture",
            ]
            .into_iter()
            .map(String::from),
        );
        assert!(selected(&a, "real_a"));
        assert!(!selected(&a, "real_b"));
        assert!(!selected(&a, "other"));
        let a = parse(["x", "--exact"].into_iter().map(String::from));
        assert!(selected(&a, "x") && !selected(&a, "xy"));
        let a = parse(["--include-ignored"].into_iter().map(String::from));
        assert!(a.run_ignored && selected(&a, "anything"));
    }

    #[test]
    fn the_first_missing_dependency_is_the_reason() {
        let t = Trial::new("t", || {})
            .needs(Err("needs a".into()))
            .needs(Err("needs b".into()));
        assert_eq!(t.needs, Err("needs a".into()));
        assert_eq!(t.required_by, RequiredBy::Ci);
        let t = Trial::new("t", || {}).needs_corpus(Err("needs the corpus".into()));
        assert_eq!(t.required_by, RequiredBy::CorpusRequest);
        assert!(needs_dir(Path::new("/nonexistent-dir-kq"), "x")
            .unwrap_err()
            .contains("is absent"));
    }
}
