//! One hardened `git` invocation: closed environment, command-line overrides, null stdin, a
//! deadline, and bounded output read without deadlock.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::GitError;

/// The default deadline of one git invocation.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);

/// The most stdout one git invocation may print before it is killed.
pub const MAX_STDOUT_BYTES: usize = 256 << 20;

/// How much of the end of stderr is kept for error messages.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// `HOME` for git: below `/dev/null`, which is not a directory, so it can never exist.
pub const HOME: &str = "/dev/null/kiln-qual-git-home";

/// The environment git runs with, apart from `PATH` (kept when set) and `HOME` ([`HOME`]).
/// Nothing else is inherited: no `GIT_*` variable (`GIT_DIR`, `GIT_CONFIG_PARAMETERS`,
/// `GIT_EXTERNAL_DIFF`, `GIT_SSH_COMMAND`, …) reaches git.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("LC_ALL", "C"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_NO_LAZY_FETCH", "1"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
];

/// `-c` overrides given to every invocation. Command-line configuration beats every
/// configuration file, including files pulled in by `include.path` / `includeIf`, so a hostile
/// `.git/config` cannot turn any of these back on. Drivers with free names
/// (`filter.<x>.*`, `diff.<x>.textconv`) cannot be overridden this way: the binding instead
/// never runs a command that could use them (see the crate docs).
pub const OVERRIDES: &[&str] = &[
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=false",
    "sequence.editor=false",
    "core.askPass=",
    "core.sshCommand=",
    "core.gitProxy=",
    "core.alternateRefsCommand=",
    "credential.helper=",
    "diff.external=",
    "gpg.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
    "log.showSignature=false",
    "protocol.allow=never",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "uploadpack.packObjectsHook=",
];

/// What one finished invocation left.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
}

impl Finished {
    /// The exit code, `None` when killed by a signal.
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// Runs `git <overrides> <args>` in `dir` and waits at most `deadline`.
#[allow(clippy::disallowed_methods)] // git's one invocation: qual-git stays free of libc (scripts/check-boundaries), so
                                     // it cannot spawn through qual-exec; this function owns git's deadline and output bounds.
pub(crate) fn run(dir: &Path, args: &[&str], deadline: Duration) -> Result<Finished, GitError> {
    let started = Instant::now();
    let until = started + deadline;
    let shown = args.join(" ");
    let mut child = command(dir, args)
        .map_err(|source| GitError::Program {
            args: shown.clone(),
            source,
        })?
        .spawn()
        .map_err(|source| GitError::Spawn {
            args: shown.clone(),
            source,
        })?;
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take().expect("stderr is piped");
    let tx_out = tx.clone();
    std::thread::spawn(move || {
        let _ = tx_out.send(Stream::Stdout(read_head(out, MAX_STDOUT_BYTES)));
    });
    std::thread::spawn(move || {
        let _ = tx.send(Stream::Stderr(read_tail(err, STDERR_TAIL_BYTES)));
    });

    // Both streams reach end of file when git exits; a reader that never reports (a
    // descendant holding the pipe) is left behind once the deadline passes.
    let mut stdout = None;
    let mut stderr = None;
    while stdout.is_none() || stderr.is_none() {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Stream::Stdout(Ok(Head::Complete(bytes)))) => stdout = Some(bytes),
            Ok(Stream::Stdout(Ok(Head::Overflow))) => {
                kill(&mut child);
                return Err(GitError::OutputTooLarge {
                    args: shown,
                    limit: MAX_STDOUT_BYTES,
                });
            }
            Ok(Stream::Stdout(Err(source))) => {
                kill(&mut child);
                return Err(GitError::Read {
                    args: shown,
                    source,
                });
            }
            Ok(Stream::Stderr(bytes)) => stderr = Some(bytes),
            Err(_) => {
                kill(&mut child);
                return Err(timeout(shown, deadline));
            }
        }
    }
    let mut pause = Duration::from_micros(200);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= until => {
                kill(&mut child);
                return Err(timeout(shown, deadline));
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Err(source) => {
                kill(&mut child);
                return Err(GitError::Read {
                    args: shown,
                    source,
                });
            }
        }
    };
    let stderr = String::from_utf8_lossy(&stderr.unwrap_or_default())
        .trim()
        .to_owned();
    Ok(Finished {
        status,
        stdout: stdout.unwrap_or_default(),
        stderr,
    })
}

/// Runs git and returns its stdout when it exited with 0.
pub(crate) fn output(dir: &Path, args: &[&str], deadline: Duration) -> Result<Vec<u8>, GitError> {
    let done = run(dir, args, deadline)?;
    if done.status.success() {
        Ok(done.stdout)
    } else {
        Err(failed(args, &done))
    }
}

/// The error for an unexpected exit status.
pub(crate) fn failed(args: &[&str], done: &Finished) -> GitError {
    GitError::Failed {
        args: args.join(" "),
        status: done.status.to_string(),
        stderr: done.stderr.clone(),
    }
}

fn timeout(args: String, deadline: Duration) -> GitError {
    GitError::Timeout {
        args,
        seconds: deadline.as_secs_f64(),
    }
}

/// The command: the trusted `git`, closed environment, overrides, no pager, null stdin,
/// piped output.
fn command(dir: &Path, args: &[&str]) -> Result<Command, qual_trusted::TrustError> {
    let mut cmd = qual_trusted::command("git")?;
    cmd.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    cmd.env("HOME", HOME);
    for (k, v) in ENVIRONMENT {
        cmd.env(k, v);
    }
    cmd.arg("--no-pager");
    for o in OVERRIDES {
        cmd.arg("-c").arg(o);
    }
    cmd.arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(cmd)
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

enum Stream {
    Stdout(std::io::Result<Head>),
    Stderr(Vec<u8>),
}

enum Head {
    Complete(Vec<u8>),
    Overflow,
}

/// Reads to end of file, or stops as soon as more than `limit` bytes arrived.
fn read_head(r: impl Read, limit: usize) -> std::io::Result<Head> {
    let mut buf = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    r.take(cap).read_to_end(&mut buf)?;
    if buf.len() > limit {
        Ok(Head::Overflow)
    } else {
        Ok(Head::Complete(buf))
    }
}

/// Reads to end of file and keeps the last `keep` bytes (errors end the read).
fn read_tail(mut r: impl Read, keep: usize) -> Vec<u8> {
    let mut tail = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * keep {
                    tail.drain(..tail.len() - keep);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_stop_past_the_limit_and_tails_keep_the_end() {
        assert!(matches!(
            read_head(&b"abcd"[..], 4).unwrap(),
            Head::Complete(b) if b == b"abcd"
        ));
        assert!(matches!(
            read_head(&b"abcde"[..], 4).unwrap(),
            Head::Overflow
        ));
        let long: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(read_tail(&long[..], 10), long[long.len() - 10..]);
        assert_eq!(read_tail(&b"short"[..], 10), b"short");
    }

    #[test]
    fn every_override_is_a_key_value_pair() {
        for o in OVERRIDES {
            let (k, _) = o.split_once('=').expect("key=value");
            assert!(k.contains('.') && !k.contains(char::is_whitespace), "{o}");
        }
    }
}
