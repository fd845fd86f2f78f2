//! Bounded tool wrappers (the seed's "bounded build wrappers": offline dependency use,
//! filtered environments, finite runtime, cleanup), used by `kiln-qual cargo`.
//!
//! Rules:
//! - the environment is an allow-list ([`CARGO_ENV_ALLOW`] plus names the user adds); nothing
//!   else reaches the tool;
//! - `CARGO_NET_OFFLINE=true` is always set (the `--offline` semantics), overriding the host;
//! - the tool runs under [`crate::execute_observed`]: own session and group, deadline, TERM →
//!   grace → KILL, descendants settled and killed; in the box the caller gives (a case's:
//!   the host read-only but the worktree) with a loopback-only network;
//! - the exit code passes through; [`exit_code`] maps the other outcomes to the conventions of
//!   `timeout(1)` and shells.

use crate::{CaptureLimits, ExecSpec, NetworkPolicy, Sandbox, Termination};
use std::path::PathBuf;
use std::time::Duration;

/// Host variables a bounded cargo run may see (when present): the closed case base
/// environment of the runner (`closed-qualification-case-v1`) plus the toolchain and build
/// knobs that select compilers and targets.
pub const CARGO_ENV_ALLOW: &[&str] = &[
    // closed-qualification-case-v1 base
    "CARGO_HOME",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "RUSTUP_HOME",
    "SHELL",
    "TMPDIR",
    "USER",
    // toolchain and build selection
    "RUSTUP_TOOLCHAIN",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_JOBS",
    "CARGO_INCREMENTAL",
    "CARGO_TERM_COLOR",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUST_BACKTRACE",
    "CC",
    "CXX",
    "AR",
    "CFLAGS",
    "CXXFLAGS",
    "LDFLAGS",
    "PKG_CONFIG_PATH",
    "TERM",
    "NO_COLOR",
];

/// Exit code for an execution that passed its deadline (as `timeout(1)`).
pub const EXIT_TIMED_OUT: i32 = 124;
/// Exit code when the program could not be started (as shells do for "not found").
pub const EXIT_SPAWN_FAILED: i32 = 127;

/// Keeps the variables of `host` whose names are in `allow` or `extra_allow` (in the order of
/// `host`), then sets `forced` (overriding a host value of the same name).
pub fn filtered_env<I>(
    host: I,
    allow: &[&str],
    extra_allow: &[String],
    forced: &[(&str, &str)],
) -> Vec<(String, String)>
where
    I: IntoIterator<Item = (String, String)>,
{
    let mut env: Vec<(String, String)> = host
        .into_iter()
        .filter(|(k, _)| {
            (allow.contains(&k.as_str()) || extra_allow.iter().any(|e| e == k))
                && !forced.iter().any(|(f, _)| f == k)
        })
        .collect();
    env.extend(forced.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

/// Process exit code for a wrapper: the tool's own code; 128 + signal when it was killed by a
/// signal, when we were interrupted by one (the signal we received), or when it was aborted
/// (the signal we used); 124 on timeout.
pub fn exit_code(t: &Termination) -> i32 {
    match t {
        Termination::Exited { code } => *code,
        Termination::Signaled { signal } => 128 + signal,
        Termination::TimedOut { .. } => EXIT_TIMED_OUT,
        Termination::Interrupted { .. } => {
            128 + crate::signals::interrupted().unwrap_or(libc::SIGINT)
        }
        Termination::Aborted { signal_used, .. } => 128 + signal_used,
    }
}

/// The spec of a bounded `cargo` run: `program` (normally `cargo`) with `args`, the filtered
/// environment with `CARGO_NET_OFFLINE=true`, the deadline and grace, a private network with
/// only loopback (offline mode forbids fetching; tests may still use loopback services) and
/// the caller's `sandbox` (the box of a case: the host read-only but the worktree).
#[allow(clippy::too_many_arguments)]
pub fn cargo_spec(
    program: &str,
    args: &[String],
    cwd: PathBuf,
    host_env: Vec<(String, String)>,
    extra_allow: &[String],
    timeout: Duration,
    term_grace: Duration,
    sandbox: Sandbox,
) -> ExecSpec {
    let mut argv = vec![program.to_string()];
    argv.extend(args.iter().cloned());
    ExecSpec {
        argv,
        cwd,
        env: filtered_env(
            host_env,
            CARGO_ENV_ALLOW,
            extra_allow,
            &[("CARGO_NET_OFFLINE", "true")],
        ),
        timeout,
        term_grace,
        capture: CaptureLimits {
            head_bytes: 16 * 1024,
            tail_bytes: 16 * 1024,
        },
        network: NetworkPolicy::LoopbackOnly,
        sandbox,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn filter_keeps_only_allowed_and_forces_offline() {
        let host = vec![
            s("PATH", "/bin"),
            s("AWS_SECRET_ACCESS_KEY", "x"),
            s("CARGO_NET_OFFLINE", "false"),
            s("HIP_PATH", "/opt/rocm"),
            s("HOME", "/root"),
        ];
        let env = filtered_env(
            host,
            CARGO_ENV_ALLOW,
            &["HIP_PATH".to_string()],
            &[("CARGO_NET_OFFLINE", "true")],
        );
        assert_eq!(
            env,
            vec![
                s("PATH", "/bin"),
                s("HIP_PATH", "/opt/rocm"),
                s("HOME", "/root"),
                s("CARGO_NET_OFFLINE", "true")
            ]
        );
    }

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code(&Termination::Exited { code: 101 }), 101);
        assert_eq!(exit_code(&Termination::Signaled { signal: 9 }), 137);
        assert_eq!(exit_code(&Termination::TimedOut { signal_used: 15 }), 124);
    }
}
