//! Adversarial fixture programs for process tests, as `[[bin]]` targets, and the integration
//! tests that drive them through `qual-exec` (`tests/`).
//!
//! One multi-mode binary, `qual-fixture <mode> [args]`, so that every crate's tests can reuse
//! it (`env!("CARGO_BIN_EXE_qual-fixture")` inside this crate; other crates can build it with
//! `cargo build -p qual-test-fixtures --bin qual-fixture` and find it next to their own test
//! binaries). Modes (see `qual-fixture help`):
//!
//! | mode | behaviour |
//! | --- | --- |
//! | `exit CODE` | exits with CODE |
//! | `print TEXT` / `eprint TEXT` | writes TEXT and a newline to stdout / stderr |
//! | `sleep SECS` | sleeps (past any short deadline) |
//! | `ignore-term SECS` | ignores SIGTERM, prints `ready`, sleeps |
//! | `slow-term SECS` | counts SIGTERMs; after the first, cleans up for SECS, prints `terms N`, exits 0 |
//! | `escape PIDFILE [--keep-stdio] [--ignore-term] [--stay SECS]` | forks; the child calls `setsid` and forks again; the grandchild writes its pid to PIDFILE and keeps running; the leader prints `escaped` once the pid file exists and exits 0 (with `--stay`, keeps running SECS first, like a server that started a daemon) |
//! | `nest-cgroup PIDFILE` | creates a cgroup beneath its own, forks a child into it that keeps running, prints the nested directory, exits 0 (3 where cgroups cannot be nested) |
//! | `fork-children N SECS [--wait]` | forks N children that sleep SECS; the leader exits 0 (or waits with `--wait`) |
//! | `flood BYTES` | writes BYTES bytes to stdout in 64 KiB chunks |
//! | `kill-self SIGNAL` | raises SIGNAL (number) |
//! | `net-probe PORT` | tries to connect to 127.0.0.1:PORT (a listener outside), then a loopback round trip on 127.0.0.1:0; prints one JSON line; exits 0 when the outside connect failed and the round trip worked |
//! | `write-case-result KIND [--case-id ID] [--metric NAME] [--config JSON] [--bytes N]` | writes a `qualification-case-result-v1` document to `$KILN_QUALIFICATION_CASE_RESULT`: `valid`, `oversized` (100 MB by default), `wrong-case-id`, `undeclared-metric`, `passed-nonzero-exit` (also exits 3) |
//! | `touch-file PATH` | appends a line to PATH |
//! | `deny-syscalls NAMES -- CMD...` | installs a seccomp filter making the named system calls (`unshare`, `seccomp`, `mount_setattr`, `mount`) fail with `EPERM`, then executes CMD: a kernel without those mechanisms |
//! | `send-stdout SOCKET` | passes its stdout descriptor to the listener on UNIX socket SOCKET (SCM_RIGHTS), prints `sent`, exits 0 |
//!
//! [`harness`] is the loud-skip test runner for targets whose tests need something real;
//! [`synth`] writes generated receipt sets (with run and serving evidence) for the report's
//! tests and benchmarks; [`word_level_tokenizer`] the word-level `tokenizer.json` the bench
//! tests count with.
//!
//! Invariant: fixtures only ever address 127.0.0.1.
//!
//! Other crates' tests cannot use `env!("CARGO_BIN_EXE_...")` for a bin of this crate (and
//! cargo does not build a dependency's binaries); they can call [`fixture_binary`] after
//! `cargo build -p qual-test-fixtures --bins`, or put their integration tests here.

// Test support: fixtures spawn helpers and read back what tests wrote, without bounds.
#![allow(clippy::disallowed_methods)]

// `unsafe`: the harness asks geteuid whether a test can run as root.
#[allow(unsafe_code)]
pub mod harness;
pub mod synth;

use std::path::PathBuf;

/// Locates a binary of this crate (`qual-fixture`, `qual-exec-run`, `qual-runner-fixture`,
/// `kiln-latency-fixture-bench`, `qual-serve-mock`) for tests of other crates: `$QUAL_FIXTURE_DIR/<name>` when that variable is set, else `<name>` in
/// the directory of the running test executable or its parent (cargo puts test binaries in
/// `target/<profile>/deps` and bins in `target/<profile>`). `None` when it has not been built.
pub fn fixture_binary(name: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("QUAL_FIXTURE_DIR") {
        let p = PathBuf::from(dir).join(name);
        return p.is_file().then_some(p);
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Pids of live processes whose environment carries `KQ_TEST_MARKER=<marker>`. Tests put a
/// unique marker into a case's environment and then prove through `/proc` that nothing of the
/// case is still alive (a zombie's environment reads as empty, so only running processes are
/// listed).
pub fn processes_with_marker(marker: &str) -> Vec<u32> {
    let needle = format!("KQ_TEST_MARKER={marker}");
    let mut out = Vec::new();
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in proc_dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// A cgroup v2 directory delegated to an unprivileged uid (as systemd does for a user's
/// session): created below this process's own cgroup by root, with the directory and its
/// `cgroup.procs`, `cgroup.threads` and `cgroup.subtree_control` owned by that uid. Tests
/// that run kiln-qual as an unprivileged user start it inside one (kiln-qual requires a
/// writable cgroup sub-tree). Removed on drop (members must be gone by then).
#[derive(Debug)]
pub struct DelegatedCgroup {
    dir: PathBuf,
}

impl DelegatedCgroup {
    /// Creates one for `uid`/`gid`; `None` (with the reason) when this process cannot.
    pub fn create(uid: u32, gid: u32) -> Result<DelegatedCgroup, String> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let mount = info
            .lines()
            .find_map(|l| {
                let (pre, post) = l.split_once(" - ")?;
                (post.split_whitespace().next() == Some("cgroup2"))
                    .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))?
            })
            .ok_or("no cgroup v2 mount")?;
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let rel = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or("no cgroup v2 membership")?
            .trim()
            .trim_start_matches('/')
            .to_string();
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = mount
            .join(rel)
            .join(format!("kq-delegated-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        for f in [
            "",
            "cgroup.procs",
            "cgroup.threads",
            "cgroup.subtree_control",
        ] {
            let p = if f.is_empty() {
                dir.clone()
            } else {
                dir.join(f)
            };
            std::os::unix::fs::chown(&p, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", p.display()))?;
        }
        Ok(DelegatedCgroup { dir })
    }

    /// Its `cgroup.procs` (write a pid, or `0` from the process itself, to move it in).
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Makes `cmd`'s child join this cgroup before it executes anything.
    #[allow(unsafe_code)] // the pre-exec hook writes to a descriptor opened before the fork
    pub fn enter_before_exec(&self, cmd: &mut std::process::Command) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let f = std::fs::OpenOptions::new().write(true).open(self.procs())?;
        // SAFETY: the closure writes to a descriptor opened before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::write(f.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }
}

impl Drop for DelegatedCgroup {
    fn drop(&mut self) {
        // Sub-cgroups an unprivileged run may have left, then the directory itself.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            if let Ok(rd) = std::fs::read_dir(&self.dir) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        let _ = std::fs::remove_dir(e.path());
                    }
                }
            }
            if std::fs::remove_dir(&self.dir).is_ok() || std::time::Instant::now() >= until {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// Writes `dir/tokenizer.json`, a Hugging Face word-level tokenizer over `words` (whitespace
/// split, one token per word, `[UNK]` 0 for the rest: the way the mock server counts prompt
/// tokens), and returns its path.
pub fn word_level_tokenizer(dir: &std::path::Path, words: &[&str]) -> PathBuf {
    let mut vocab = serde_json::Map::new();
    vocab.insert("[UNK]".into(), 0.into());
    for (i, w) in words.iter().enumerate() {
        vocab.insert((*w).into(), (i + 1).into());
    }
    let doc = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, doc.to_string()).expect("write tokenizer.json");
    p
}
