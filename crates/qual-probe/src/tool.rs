//! Bounded execution of probe tools (`nvidia-smi`, `rocminfo`, `rustc --version`, ...).
//!
//! A probe tool runs with stdin null, in its own process group, with a deadline; on the
//! deadline the whole group is killed with SIGKILL. Output is kept up to [`OUTPUT_LIMIT`]
//! bytes per stream (the rest is drained and counted). A missing executable is reported as
//! [`ToolStatus::NotFound`], never as an invented value. The executable is the one
//! `qual-trusted` resolved (before any case ran, only root can change it, re-checked); a
//! refused one is [`ToolStatus::SpawnFailed`] with the reason.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
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

fn drain(mut r: impl Read) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

/// Runs `argv` with a deadline and the given environment additions (the rest is inherited).
pub fn run_tool(argv: &[&str], timeout: Duration) -> ToolOutput {
    let start = Instant::now();
    let mut cmd = match qual_trusted::command(argv[0]) {
        Ok(c) => c,
        Err(e) => {
            return ToolOutput {
                status: if e.is_not_found() {
                    ToolStatus::NotFound
                } else {
                    ToolStatus::SpawnFailed(e.to_string())
                },
                stdout: String::new(),
                stderr: String::new(),
                duration: start.elapsed(),
            }
        }
    };
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("LC_ALL", "C")
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let status = if e.kind() == std::io::ErrorKind::NotFound {
                ToolStatus::NotFound
            } else {
                ToolStatus::SpawnFailed(e.to_string())
            };
            return ToolOutput {
                status,
                stdout: String::new(),
                stderr: String::new(),
                duration: start.elapsed(),
            };
        }
    };
    let pgid = child.id() as i32;
    let out = child
        .stdout
        .take()
        .map(|s| std::thread::spawn(move || drain(s)));
    let err = child
        .stderr
        .take()
        .map(|s| std::thread::spawn(move || drain(s)));
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        if start.elapsed() >= timeout {
            timed_out = true;
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Anything left in the group after the leader exited is killed too.
    // SAFETY: as above; ESRCH when the group is already gone is fine.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    use std::os::unix::process::ExitStatusExt;
    let status = if timed_out {
        ToolStatus::TimedOut
    } else {
        match status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => ToolStatus::Exited(c),
                (None, Some(sig)) => ToolStatus::Signaled(sig),
                _ => ToolStatus::SpawnFailed("unknown exit status".into()),
            },
            None => ToolStatus::SpawnFailed("cannot wait for the tool".into()),
        }
    };
    ToolOutput {
        status,
        stdout: strip_ansi(&String::from_utf8_lossy(&stdout)),
        stderr: strip_ansi(&String::from_utf8_lossy(&stderr)),
        duration: start.elapsed(),
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
