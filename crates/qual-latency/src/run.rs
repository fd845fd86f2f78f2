//! Running a fixture (`latency run`): command → raw log → artifact, in one step.
//!
//! The manifest stores each fixture command as one string (it is part of the fixture digest,
//! so it cannot change form). The original ran it through `sh -c`; we never use a shell.
//! [`parse_command`] accepts the simple-command subset real fixtures use: leading
//! `NAME=value` environment assignments, then words, with POSIX single quotes, double quotes
//! and backslash escapes. Anything that needs a shell (`| & ; < > ( ) $ \``, a newline) is
//! refused with a clear message rather than run differently. Globs and `~` are not expanded.
//!
//! [`run_bounded`] runs the argv from the repository root through `qual-exec` (own session
//! and process group, contained, stdin null), with stdout and stderr appended to the raw log
//! file in arrival order (bytes kept verbatim, where the original normalized newlines), a
//! deadline (SIGTERM to the group, a grace period, then SIGKILL) and a log-size cap. Nothing
//! of the run survives it; whether something outlived the leader is recorded. The raw log is named `<slug>-<UTC %Y%m%dT%H%M%SZ>.log` in the log directory
//! (default `bench-results/backend-latency/raw`, which must stay git-ignored).

use crate::artifact::{build_result_artifact, write_artifact, WriteInputs};
use crate::git::Repo;
use crate::manifest::{find_fixture, load_manifest};
use crate::{LegacyError, Result};
use qual_json::Value;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fixture command split into environment assignments and argv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedCommand {
    /// Leading `NAME=value` assignments, in order.
    pub env: Vec<(String, String)>,
    /// Program and arguments (never empty).
    pub argv: Vec<String>,
}

/// Why a command string cannot be run without a shell.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandParseError {
    /// An unquoted shell operator or expansion.
    #[error("fixture command needs a shell feature (\"{0}\"), which kiln-qual does not emulate; use a plain argv with optional leading NAME=value assignments")]
    ShellFeature(char),
    /// A quote is not closed.
    #[error("fixture command has an unterminated quote")]
    UnterminatedQuote,
    /// A trailing backslash.
    #[error("fixture command ends with a lone backslash")]
    TrailingBackslash,
    /// Only assignments, no program.
    #[error("fixture command names no program")]
    NoProgram,
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Splits a command string into assignments and argv (see module docs).
pub fn parse_command(cmd: &str) -> std::result::Result<ParsedCommand, CommandParseError> {
    // Each word keeps whether its `=` prefix was unquoted, so `'A=b' x` is a word, not an env.
    let mut words: Vec<(String, Option<usize>)> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut unquoted_eq: Option<usize> = None;
    let mut chars = cmd.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push((std::mem::take(&mut cur), unquoted_eq.take()));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => cur.push(ch),
                        None => return Err(CommandParseError::UnterminatedQuote),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => cur.push(e),
                            Some('\n') => {}
                            Some(e) => {
                                cur.push('\\');
                                cur.push(e);
                            }
                            None => return Err(CommandParseError::UnterminatedQuote),
                        },
                        Some(ch @ ('$' | '`')) => return Err(CommandParseError::ShellFeature(ch)),
                        Some(ch) => cur.push(ch),
                        None => return Err(CommandParseError::UnterminatedQuote),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(e) => cur.push(e),
                    None => return Err(CommandParseError::TrailingBackslash),
                }
            }
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' | '\n' => {
                return Err(CommandParseError::ShellFeature(c))
            }
            '#' if !in_word => break,
            _ => {
                if c == '=' && unquoted_eq.is_none() {
                    unquoted_eq = Some(cur.len());
                }
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push((cur, unquoted_eq));
    }
    let mut env = Vec::new();
    let mut iter = words.into_iter().peekable();
    while let Some((w, Some(eq))) = iter.peek() {
        if !is_env_name(&w[..*eq]) {
            break;
        }
        env.push((w[..*eq].to_owned(), w[*eq + 1..].to_owned()));
        iter.next();
    }
    let argv: Vec<String> = iter.map(|(w, _)| w).collect();
    if argv.is_empty() {
        return Err(CommandParseError::NoProgram);
    }
    Ok(ParsedCommand { env, argv })
}

/// Bounds of one run.
#[derive(Clone, Copy, Debug)]
pub struct RunLimits {
    /// Wall-clock deadline.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub term_grace: Duration,
    /// Largest raw log accepted.
    pub max_log_bytes: u64,
}

impl Default for RunLimits {
    fn default() -> RunLimits {
        RunLimits {
            timeout: Duration::from_secs(3600),
            term_grace: Duration::from_secs(5),
            max_log_bytes: 256 * 1024 * 1024,
        }
    }
}

/// How a bounded run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Termination {
    /// The program exited with a status code.
    Exited(i32),
    /// The program was killed by a signal it did not get from us.
    Signaled(i32),
    /// The deadline passed; the group was terminated.
    TimedOut,
    /// We were interrupted (SIGINT/SIGTERM); the group was terminated.
    Interrupted,
    /// The run was stopped by us for the given reason (log too large, log not writable).
    Aborted(String),
}

/// The result of [`run_bounded`].
#[derive(Clone, Debug)]
pub struct Execution {
    /// How it ended.
    pub termination: Termination,
    /// Wall time.
    pub wall: Duration,
    /// Whether some process of the case outlived its leader and had to be killed, or the
    /// final containment check was not clean.
    pub group_residue: bool,
    /// Containment mechanism (`cgroup_v2` or `process_group_subreaper`).
    pub containment: &'static str,
}

/// Appends every output chunk to the raw log in arrival order (stdout and stderr merged),
/// stopping the run when the log passes its cap or cannot be written.
struct LogSink {
    file: std::fs::File,
    echo: bool,
    written: u64,
    max: u64,
    error: Option<String>,
}

impl qual_exec::Observer for LogSink {
    fn output(&mut self, _stream: qual_exec::OutputStream, chunk: &[u8]) {
        if self.error.is_none() && self.written + chunk.len() as u64 <= self.max {
            if let Err(e) = self.file.write_all(chunk) {
                self.error = Some(format!("cannot write raw log: {e}"));
            }
        }
        self.written += chunk.len() as u64;
        if self.echo {
            let _ = std::io::stderr().write_all(chunk);
        }
    }

    fn watch(&mut self) -> Option<String> {
        if self.written > self.max {
            return Some(format!("raw log exceeded {} bytes", self.max));
        }
        self.error.clone()
    }
}

/// Runs `cmd` from `cwd` through `qual-exec` (own session and process group, contained, stdin
/// null, deadline with TERM → grace → KILL) with stdout and stderr appended to `log` in
/// arrival order. The child inherits this process's environment plus the command's
/// assignments, as the original's shell did.
pub fn run_bounded(
    cmd: &ParsedCommand,
    cwd: &Path,
    log: &Path,
    limits: RunLimits,
) -> Result<Execution> {
    run_bounded_echo(cmd, cwd, log, limits, false, Default::default())
}

/// [`run_bounded`], echoing the output live to stderr when `echo` is set, in `sandbox` with
/// a loopback-only network.
pub fn run_bounded_echo(
    cmd: &ParsedCommand,
    cwd: &Path,
    log: &Path,
    limits: RunLimits,
    echo: bool,
    sandbox: qual_exec::Sandbox,
) -> Result<Execution> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| {
            LegacyError::Refused(format!("cannot create raw log {}: {e}", log.display()))
        })?;
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !cmd.env.iter().any(|(n, _)| n == k))
        .collect();
    env.extend(cmd.env.iter().cloned());
    let spec = qual_exec::ExecSpec {
        argv: cmd.argv.clone(),
        cwd: cwd.to_path_buf(),
        env,
        timeout: limits.timeout,
        term_grace: limits.term_grace,
        capture: qual_exec::CaptureLimits {
            head_bytes: 4096,
            tail_bytes: 4096,
        },
        network: qual_exec::NetworkPolicy::LoopbackOnly,
        sandbox,
    };
    let mut sink = LogSink {
        file,
        echo,
        written: 0,
        max: limits.max_log_bytes,
        error: None,
    };
    let ex = qual_exec::execute_observed(&spec, &mut sink)
        .map_err(|e| LegacyError::Refused(format!("cannot run fixture command: {e}")))?;
    let termination = match ex.termination {
        qual_exec::Termination::Exited { code } => Termination::Exited(code),
        qual_exec::Termination::Signaled { signal } => Termination::Signaled(signal),
        qual_exec::Termination::TimedOut { .. } => Termination::TimedOut,
        qual_exec::Termination::Interrupted { .. } => Termination::Interrupted,
        qual_exec::Termination::Aborted { reason, .. } => Termination::Aborted(reason),
    };
    Ok(Execution {
        termination,
        wall: ex.wall,
        group_residue: !ex.containment.clean,
        containment: ex.containment.mechanism.as_str(),
    })
}

/// The last `n` lines of a log, as the original prints them (`<raw log empty>` for an empty
/// log, `<raw log unreadable: …>` when it cannot be read). Only the last 64 KiB are read, so
/// a huge log costs no memory (longer tail lines are shown cut at that boundary).
pub fn log_tail(path: &Path, n: usize) -> String {
    use std::io::{Seek, SeekFrom};
    const TAIL_BYTES: u64 = 64 * 1024;
    let mut bytes = Vec::new();
    let read = qual_json::open_regular(path)
        .map_err(std::io::Error::from)
        .and_then(|mut f| {
            let len = f.metadata()?.len();
            f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))?;
            f.take(TAIL_BYTES).read_to_end(&mut bytes)
        });
    match read {
        Err(e) => format!("<raw log unreadable: {e}>"),
        Ok(_) => {
            let text = crate::metric::decode_log(&bytes);
            let lines = crate::metric::py_splitlines(&text);
            if lines.is_empty() {
                "<raw log empty>".into()
            } else {
                lines[lines.len().saturating_sub(n)..].join("\n")
            }
        }
    }
}

/// What `latency run` needs.
#[derive(Clone, Debug)]
pub struct RunRequest<'a> {
    /// The manifest.
    pub manifest_path: &'a Path,
    /// The fixture to run.
    pub fixture_id: &'a str,
    /// Raw-log directory (relative to the root unless absolute).
    pub log_dir: &'a str,
    /// Artifact output (defaults to the fixture's `result_artifact`).
    pub output: Option<&'a Path>,
    /// `passed` or `failed`.
    pub status: &'a str,
    /// Bounds.
    pub limits: RunLimits,
    /// Echo the command's output live to stderr.
    pub echo: bool,
    /// The box the fixture command runs in (the caller's: a case's, the host read-only but
    /// the worktree).
    pub sandbox: qual_exec::Sandbox,
}

/// What `latency run` produced.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Fixture id.
    pub fixture_id: String,
    /// Backend.
    pub backend: String,
    /// Absolute raw-log path.
    pub raw_log: PathBuf,
    /// Written artifact.
    pub output: PathBuf,
    /// Declared metric names, sorted.
    pub metrics: Vec<String>,
    /// The artifact written.
    pub artifact: Value,
    /// How the command ran.
    pub execution: Execution,
}

/// The default output path of a fixture's artifact (`fixture.result_artifact`), refused unless
/// it stays inside the repository (`paths::contained`).
pub fn default_output_path(repo: &Repo, fixture: &qual_json::Object) -> Result<PathBuf> {
    match fixture.get("result_artifact").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => match crate::paths::contained(repo.root(), s) {
            None => Ok(repo.join(s)),
            Some(why) => Err(LegacyError::Refused(format!(
                "fixture.result_artifact {why}: {}",
                crate::msg::quote(s)
            ))),
        },
        _ => Err(LegacyError::refused(
            "fixture.result_artifact must be a non-empty string",
        )),
    }
}

/// Runs a fixture and writes its artifact.
pub fn run_fixture(repo: &Repo, req: &RunRequest<'_>) -> Result<RunReport> {
    let manifest = load_manifest(req.manifest_path)?;
    let fixture = find_fixture(&manifest, req.fixture_id)?;
    let id = req.fixture_id;
    let command = match fixture.get("command").and_then(Value::as_str) {
        Some(c) if !c.is_empty() => c,
        _ => {
            return Err(LegacyError::Refused(format!(
                "{id}.command must be a non-empty string"
            )))
        }
    };
    let parsed =
        parse_command(command).map_err(|e| LegacyError::Refused(format!("{id}.command: {e}")))?;
    // Every write stays inside the repository: no symlinked component (a committed
    // `bench-results -> /elsewhere` is refused, not followed).
    let log_dir = qual_json::confine::create_dirs(repo.root(), &repo.join(req.log_dir), 0o755)
        .map_err(|e| LegacyError::Refused(e.to_string()))?;
    let log_path = log_dir.join(format!(
        "{}-{}.log",
        crate::paths::slug(id),
        crate::timestamp::format_utc_compact(crate::timestamp::now_secs())
    ));
    // A raw log inside the repository must be ignored, or the capture is dirty (and the log
    // could be committed); refuse before spending a hardware run on it.
    if let Ok(rel) = crate::paths::resolve(&log_path).strip_prefix(repo.root()) {
        let rel = rel.to_string_lossy();
        if !repo.is_ignored(&rel) {
            return Err(LegacyError::Refused(format!(
                "raw log {rel} would not be ignored by git; ignore {} (e.g. in .gitignore) before running",
                req.log_dir
            )));
        }
    }
    match qual_json::confine::create_file(repo.root(), &log_path, 0o644) {
        Ok(_) => {}
        Err(qual_json::confine::ConfineError::Exists { .. }) => {
            return Err(LegacyError::Refused(format!(
                "raw log already exists (one run per second per fixture): {}",
                log_path.display()
            )))
        }
        Err(e) => return Err(LegacyError::Refused(e.to_string())),
    }
    let execution = run_bounded_echo(
        &parsed,
        repo.root(),
        &log_path,
        req.limits,
        req.echo,
        req.sandbox.clone(),
    )?;
    let tail = || log_tail(&log_path, 20);
    let shown = log_path.display();
    match &execution.termination {
        Termination::Exited(0) => {}
        Termination::Exited(rc) => {
            return Err(LegacyError::Refused(format!(
                "fixture command exited with status {rc}; raw log: {shown}; raw log tail:\n{}",
                tail()
            )))
        }
        Termination::Signaled(sig) => {
            return Err(LegacyError::Refused(format!(
                "fixture command was killed by signal {sig}; raw log: {shown}; raw log tail:\n{}",
                tail()
            )))
        }
        Termination::TimedOut => {
            return Err(LegacyError::Refused(format!(
                "fixture command exceeded its deadline of {}s and was terminated; raw log: {shown}; raw log tail:\n{}",
                req.limits.timeout.as_secs_f64(),
                tail()
            )))
        }
        Termination::Interrupted => {
            return Err(LegacyError::Refused(format!(
                "fixture command was interrupted; raw log: {shown}"
            )))
        }
        Termination::Aborted(reason) => {
            return Err(LegacyError::Refused(format!(
                "fixture command was stopped: {reason}; raw log: {shown}"
            )))
        }
    }
    let observations = crate::metric::parse_metric_log(&log_path).map_err(|e| {
        LegacyError::Refused(format!("{e}; raw log: {shown}; raw log tail:\n{}", tail()))
    })?;
    let artifact = build_result_artifact(
        repo,
        fixture,
        &observations,
        &WriteInputs {
            status: req.status,
            log_path: &log_path,
            manifest_path: req.manifest_path,
            manifest_schema_version: manifest.get("schema_version"),
        },
    )?;
    let output = match req.output {
        Some(p) => repo.join(&p.to_string_lossy()),
        None => default_output_path(repo, fixture)?,
    };
    write_artifact(repo.root(), &output, &artifact)?;
    Ok(RunReport {
        fixture_id: id.into(),
        backend: artifact
            .get("backend")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
        raw_log: log_path,
        output,
        metrics: artifact
            .get("metrics")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default(),
        artifact,
        execution,
    })
}

/// What `latency write` needs.
#[derive(Clone, Debug)]
pub struct WriteRequest<'a> {
    /// The manifest.
    pub manifest_path: &'a Path,
    /// The fixture.
    pub fixture_id: &'a str,
    /// The captured log (absolute, or relative to the current directory).
    pub log_path: &'a Path,
    /// Artifact output (defaults to the fixture's `result_artifact`).
    pub output: Option<&'a Path>,
    /// `passed` or `failed`.
    pub status: &'a str,
}

/// Materializes an artifact from a captured log. Returns `(output path, artifact)`.
pub fn write_from_log(repo: &Repo, req: &WriteRequest<'_>) -> Result<(PathBuf, Value)> {
    let manifest = load_manifest(req.manifest_path)?;
    let fixture = find_fixture(&manifest, req.fixture_id)?;
    let observations = crate::metric::parse_metric_log(req.log_path)
        .map_err(|e| LegacyError::Refused(e.to_string()))?;
    let artifact = build_result_artifact(
        repo,
        fixture,
        &observations,
        &WriteInputs {
            status: req.status,
            log_path: req.log_path,
            manifest_path: req.manifest_path,
            manifest_schema_version: manifest.get("schema_version"),
        },
    )?;
    let output = match req.output {
        Some(p) => repo.join(&p.to_string_lossy()),
        None => default_output_path(repo, fixture)?,
    };
    write_artifact(repo.root(), &output, &artifact)?;
    Ok((output, artifact))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_fixture_commands() {
        let c = parse_command("CUDARC_CUDA_VERSION=12080 cargo test -p kiln-tensor --features cuda --test cuda_latency_bench -- --ignored --nocapture").unwrap();
        assert_eq!(c.env, vec![("CUDARC_CUDA_VERSION".into(), "12080".into())]);
        assert_eq!(c.argv[0], "cargo");
        assert_eq!(c.argv.len(), 11);
        let c = parse_command("KILN_VK_MICROBENCH_ONLY=full_step_resident,full_token_resident_paged KILN_VK_MICROBENCH_BATCHES=1 cargo run --release -p kiln-vulkan-kernel --bin vulkan_decode_microbench").unwrap();
        assert_eq!(c.env.len(), 2);
        assert_eq!(c.env[0].1, "full_step_resident,full_token_resident_paged");
        assert_eq!(c.argv[..2], ["cargo".to_string(), "run".to_string()]);
    }

    #[test]
    fn quoting_and_refusals() {
        let c = parse_command(r#"prog 'a b' "c \"d\"" e\ f --x=1 'A=1'"#).unwrap();
        assert_eq!(c.argv, ["prog", "a b", "c \"d\"", "e f", "--x=1", "A=1"]);
        assert!(c.env.is_empty());
        let c = parse_command("'A=1' prog").unwrap();
        assert_eq!(c.argv, ["A=1", "prog"]);
        for bad in [
            "a | b",
            "a && b",
            "a; b",
            "a > f",
            "echo $HOME",
            "echo `x`",
            "(a)",
            "echo \"$X\"",
        ] {
            assert!(
                matches!(parse_command(bad), Err(CommandParseError::ShellFeature(_))),
                "{bad}"
            );
        }
        assert_eq!(
            parse_command("a 'b"),
            Err(CommandParseError::UnterminatedQuote)
        );
        assert_eq!(parse_command("A=1"), Err(CommandParseError::NoProgram));
        assert_eq!(parse_command("   "), Err(CommandParseError::NoProgram));
    }

    #[test]
    fn bounded_run_times_out_and_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        let cmd = parse_command("sleep 30").unwrap();
        let limits = RunLimits {
            timeout: Duration::from_millis(200),
            term_grace: Duration::from_millis(200),
            max_log_bytes: 1 << 20,
        };
        let ex = run_bounded(&cmd, dir.path(), &log, limits).unwrap();
        assert_eq!(ex.termination, Termination::TimedOut);
        assert!(ex.wall < Duration::from_secs(10));
    }

    #[test]
    fn bounded_run_stops_a_flooding_command_at_the_log_cap() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        let cmd = parse_command("yes KILN_LATENCY_METRIC").unwrap();
        let limits = RunLimits {
            timeout: Duration::from_secs(30),
            term_grace: Duration::from_millis(500),
            max_log_bytes: 100_000,
        };
        let ex = run_bounded(&cmd, dir.path(), &log, limits).unwrap();
        assert_eq!(
            ex.termination,
            Termination::Aborted("raw log exceeded 100000 bytes".into())
        );
        assert!(std::fs::metadata(&log).unwrap().len() <= 100_000);
    }

    #[test]
    fn bounded_run_passes_assignments_and_inherits_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        let cmd = parse_command("KILN_TEST_ASSIGNED=yes-assigned env").unwrap();
        let ex = run_bounded(&cmd, dir.path(), &log, RunLimits::default()).unwrap();
        assert_eq!(ex.termination, Termination::Exited(0));
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("KILN_TEST_ASSIGNED=yes-assigned"), "{text}");
        assert!(text.contains("PATH="), "{text}");
    }

    #[test]
    fn bounded_run_merges_output_and_reports_exit_status() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        let cmd = parse_command("ls -d . /definitely-not-here-kiln").unwrap();
        let ex = run_bounded(&cmd, dir.path(), &log, RunLimits::default()).unwrap();
        assert!(matches!(ex.termination, Termination::Exited(c) if c != 0));
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains(".\n") || text.contains(".\r\n"), "{text}");
        assert!(text.contains("definitely-not-here-kiln"), "{text}");
        assert!(log_tail(&dir.path().join("missing.log"), 20).starts_with("<raw log unreadable:"));
        std::fs::write(dir.path().join("empty.log"), b"").unwrap();
        assert_eq!(
            log_tail(&dir.path().join("empty.log"), 20),
            "<raw log empty>"
        );
    }
}
