//! Short helper programs kiln-qual starts for itself (probe tools such as `nvidia-smi` or
//! `rustc --version`, `gh api`): the one place besides [`crate::execute`] that spawns a child.
//!
//! The caller builds the [`Command`] (for a program started by name, from `qual_trusted`,
//! which resolved it) with its arguments and environment; [`run_tool`] owns the rest: stdin
//! null, stdout and stderr piped and drained on their own threads, the child leading its own
//! process group, and a deadline after which the whole group is killed with SIGKILL. Whatever
//! is still in the group once the leader exited is killed too. Each stream keeps at most
//! `keep` bytes; the rest is read and dropped, so a chatty tool never blocks on a full pipe.
//!
//! Not a case: no box, no cgroup, no residue evidence — those are [`crate::execute`]'s.

use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What one helper-program run left.
#[derive(Debug)]
pub struct ToolRun {
    /// How the leader ended; `None` when waiting for it failed.
    pub status: Option<ExitStatus>,
    /// The deadline passed and the group was killed.
    pub timed_out: bool,
    /// The first `keep` bytes of stdout.
    pub stdout: Vec<u8>,
    /// The first `keep` bytes of stderr.
    pub stderr: Vec<u8>,
    /// Stdout had more than `keep` bytes (the rest was dropped).
    pub stdout_truncated: bool,
    /// Wall time from the spawn until both streams ended.
    pub duration: Duration,
}

/// Runs `cmd` to completion or to `timeout`, keeping up to `keep` bytes of each stream.
/// The error is the spawn's (`NotFound` for a missing executable).
pub fn run_tool(mut cmd: Command, timeout: Duration, keep: usize) -> io::Result<ToolRun> {
    let start = Instant::now();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    #[allow(clippy::disallowed_methods)] // the home of helper-program spawns (module docs)
    let mut child = cmd.spawn()?;
    let pgid = child.id();
    let out = child.stdout.take().map(|s| drain_thread(s, keep));
    let err = child.stderr.take().map(|s| drain_thread(s, keep));
    let mut timed_out = false;
    let mut pause = Duration::from_micros(200);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        if start.elapsed() >= timeout {
            timed_out = true;
            let _ = crate::sys::killpg(pgid, libc::SIGKILL);
            break child.wait().ok();
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    };
    // Anything left in the group after the leader exited is killed too (a group already
    // gone is fine).
    let _ = crate::sys::killpg(pgid, libc::SIGKILL);
    let (stdout, stdout_truncated) = join(out);
    let (stderr, _) = join(err);
    Ok(ToolRun {
        status,
        timed_out,
        stdout,
        stderr,
        stdout_truncated,
        duration: start.elapsed(),
    })
}

fn drain_thread(r: impl Read + Send + 'static, keep: usize) -> JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || drain(r, keep))
}

fn join(h: Option<JoinHandle<(Vec<u8>, bool)>>) -> (Vec<u8>, bool) {
    h.and_then(|h| h.join().ok()).unwrap_or_default()
}

/// Reads to end of file, keeping the first `keep` bytes; whether any were dropped.
fn drain(mut r: impl Read, keep: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut dropped = false;
    let mut buf = [0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                dropped |= n > room;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, dropped)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests build their commands directly
mod tests {
    use super::*;

    #[test]
    fn output_is_kept_up_to_the_bound_and_the_rest_drained() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "head -c 100000 /dev/zero; echo err >&2; exit 3"]);
        let r = run_tool(cmd, Duration::from_secs(30), 1000).unwrap();
        assert_eq!(r.status.and_then(|s| s.code()), Some(3));
        assert!(!r.timed_out);
        assert_eq!(r.stdout.len(), 1000);
        assert!(r.stdout_truncated);
        assert_eq!(r.stderr, b"err\n");
    }

    #[test]
    fn the_deadline_kills_the_group() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30"]);
        let r = run_tool(cmd, Duration::from_millis(200), 1000).unwrap();
        assert!(r.timed_out);
        assert!(r.duration < Duration::from_secs(10), "{:?}", r.duration);
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let e = run_tool(
            Command::new("/nonexistent/kiln-tool"),
            Duration::from_secs(5),
            10,
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
