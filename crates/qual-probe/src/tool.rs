//! Bounded execution of probe tools (`nvidia-smi`, `rocminfo`, `rustc --version`, ...).
//!
//! A probe tool runs with stdin null, in its own process group, with a deadline; on the
//! deadline the whole group is killed with SIGKILL (`qual_exec::run_tool` spawns and waits).
//! Output is kept up to [`OUTPUT_LIMIT`] bytes per stream (the rest is drained). A missing executable is reported as
//! [`ToolStatus::NotFound`], never as an invented value. The executable is the one
//! `qual-trusted` resolved (before any case ran, only root can change it, re-checked); a
//! refused one is [`ToolStatus::SpawnFailed`] with the reason.

use std::time::{Duration, Instant};

/// Bytes kept per stream.
pub const OUTPUT_LIMIT: usize = 4 * 1024 * 1024;

/// How a tool run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolStatus {
    /// The tool exited with this code.
    Exited(i32),
    /// The tool was killed by this signal.
    Signaled(i32),
    /// The executable does not exist.
    NotFound,
    /// The deadline passed; the group was killed.
    TimedOut,
    /// It could not be started for another reason.
    SpawnFailed(String),
}

/// A tool run's evidence.
#[derive(Clone, Debug)]
pub struct ToolOutput {
    /// The command line that ran (or was looked for).
    pub argv: Vec<String>,
    /// How it ended.
    pub status: ToolStatus,
    /// Captured stdout (lossy UTF-8, ANSI escapes removed).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8, ANSI escapes removed).
    pub stderr: String,
    /// Wall time.
    pub duration: Duration,
}

impl ToolOutput {
    /// Whether the tool exited 0.
    pub fn ok(&self) -> bool {
        self.status == ToolStatus::Exited(0)
    }

    /// A one-line failure reason (`exit N: <last 500 chars of stderr>`, `executable not
    /// found`, ...).
    pub fn failure(&self) -> String {
        match &self.status {
            ToolStatus::Exited(c) => format!("exit {c}: {}", tail(self.stderr.trim(), 500)),
            ToolStatus::Signaled(s) => format!("killed by signal {s}"),
            ToolStatus::NotFound => "executable not found".into(),
            ToolStatus::TimedOut => {
                format!("timed out after {:.1} seconds", self.duration.as_secs_f64())
            }
            ToolStatus::SpawnFailed(e) => format!("cannot start: {e}"),
        }
    }
}

fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    s.chars().skip(count.saturating_sub(n)).collect()
}

/// Removes ANSI CSI escape sequences.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Runs `argv` with a deadline and the given environment additions (the rest is inherited).
pub fn run_tool(argv: &[&str], timeout: Duration) -> ToolOutput {
    let start = Instant::now();
    let argv_owned: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let failed = |status| ToolOutput {
        argv: argv_owned.clone(),
        status,
        stdout: String::new(),
        stderr: String::new(),
        duration: start.elapsed(),
    };
    let mut cmd = match qual_trusted::command(argv[0]) {
        Ok(c) => c,
        Err(e) if e.is_not_found() => return failed(ToolStatus::NotFound),
        Err(e) => return failed(ToolStatus::SpawnFailed(e.to_string())),
    };
    cmd.args(&argv[1..]).env("LC_ALL", "C");
    let run = match qual_exec::run_tool(cmd, timeout, OUTPUT_LIMIT) {
        Ok(run) => run,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return failed(ToolStatus::NotFound),
        Err(e) => return failed(ToolStatus::SpawnFailed(e.to_string())),
    };
    ToolOutput {
        argv: argv_owned,
        status: status_of(&run),
        stdout: strip_ansi(&String::from_utf8_lossy(&run.stdout)),
        stderr: strip_ansi(&String::from_utf8_lossy(&run.stderr)),
        duration: start.elapsed(),
    }
}

fn status_of(run: &qual_exec::ToolRun) -> ToolStatus {
    use std::os::unix::process::ExitStatusExt;
    if run.timed_out {
        return ToolStatus::TimedOut;
    }
    match run.status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => ToolStatus::Exited(c),
            (None, Some(sig)) => ToolStatus::Signaled(sig),
            _ => ToolStatus::SpawnFailed("unknown exit status".into()),
        },
        None => ToolStatus::SpawnFailed("cannot wait for the tool".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tool_is_not_found_and_exit_codes_are_kept() {
        let r = run_tool(&["/nonexistent/kiln-probe-tool"], Duration::from_secs(5));
        assert_eq!(r.status, ToolStatus::NotFound);
        assert_eq!(r.failure(), "executable not found");
        let r = run_tool(&["false"], Duration::from_secs(10));
        assert_eq!(r.status, ToolStatus::Exited(1));
    }

    #[test]
    fn deadline_kills_the_tool() {
        let r = run_tool(&["sleep", "30"], Duration::from_millis(200));
        assert_eq!(r.status, ToolStatus::TimedOut);
        assert!(r.duration < Duration::from_secs(10));
    }

    #[test]
    fn ansi_escapes_are_removed() {
        assert_eq!(strip_ansi("\u{1b}[1;32mGPU0\u{1b}[0m:"), "GPU0:");
    }
}
