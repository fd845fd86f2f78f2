//! The containment mechanisms of the case box, one by one, as this host offers them
//! (`kiln-qual doctor`).
//!
//! This module runs the very checks that refuse a run ([`crate::probe_containment`]: the cgroup
//! sub-tree, then the whole pre-exec chain of [`crate::sandbox`] in a forked child that
//! executes nothing) and spreads the one answer they give over the mechanisms:
//!
//! - the cgroup sub-tree is checked on its own (a sub-cgroup is created and removed);
//! - the chain stops at its first refused step. Every mechanism whose steps all ran before
//!   that step is `available`; the one the step belongs to is `missing`, with the kernel's
//!   reason; the others are `not_checked` (the chain never reached them), never guessed.
//!
//! What it cannot establish: a mechanism after the first refusal (fix that one and ask again),
//! and anything about a box inside an enclosing kiln-qual box (there the enclosing box holds
//! everything, reported as such).

use crate::sandbox::{self, Plan, Sandbox, Step, StepFailure};
use serde::Serialize;
use std::path::Path;

/// How one mechanism fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MechanismStatus {
    /// The kernel set it up.
    Available,
    /// The kernel refused it: runs are refused until it is fixed.
    Missing {
        /// The kernel's reason.
        reason: String,
        /// The one command (or step) that fixes it.
        fix: String,
    },
    /// The probe stopped at an earlier refusal before reaching it.
    NotChecked {
        /// The mechanism whose refusal stopped the probe.
        blocked_by: &'static str,
    },
    /// Not used on this host (a user namespace as root; everything inside an enclosing box).
    NotNeeded {
        /// Why.
        reason: &'static str,
    },
}

/// One mechanism of the case box.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MechanismCheck {
    /// Stable id (`cgroup_delegation`, `user_namespaces`, `namespaces`, `loopback_network`,
    /// `mounts`, `mount_setattr`, `capabilities`, `seccomp`, `process_setup`).
    pub id: &'static str,
    /// What the box needs of the kernel, in words.
    pub needs: &'static str,
    /// The outcome.
    #[serde(flatten)]
    pub status: MechanismStatus,
}

/// The mechanism ids, in the order [`probe_mechanisms`] reports them.
pub const MECHANISM_IDS: [&str; 9] = [
    "cgroup_delegation",
    "user_namespaces",
    "namespaces",
    "loopback_network",
    "mounts",
    "mount_setattr",
    "capabilities",
    "seccomp",
    "process_setup",
];

/// The pre-exec steps in the order the chain runs them (the program's own `PR_SET_PDEATHSIG`
/// shares `Setsid` with the first step, so a refusal there counts as the earliest).
const CHAIN_ORDER: [Step; 24] = [
    Step::Setsid,
    Step::Cgroup,
    Step::UserNs,
    Step::IdMap,
    Step::Namespaces,
    Step::LoopbackUp,
    Step::Dumpable,
    Step::Fork,
    Step::MountPrivate,
    Step::Clone,
    Step::PrivateDev,
    Step::ProcMount,
    Step::HostReadOnly,
    Step::PrivateTmp,
    Step::BindWritable,
    Step::BindReadOnly,
    Step::SetReadOnly,
    Step::Chdir,
    Step::Descriptors,
    Step::Capabilities,
    Step::NoNewPrivs,
    Step::Seccomp,
    Step::ProbeInterfaces,
    Step::ProbeTcp,
];

/// The chain mechanism a step belongs to.
fn mechanism_of(step: Step) -> &'static str {
    match step {
        Step::Cgroup => "cgroup_delegation",
        Step::UserNs | Step::IdMap => "user_namespaces",
        Step::Namespaces => "namespaces",
        Step::LoopbackUp | Step::ProbeInterfaces | Step::ProbeTcp => "loopback_network",
        Step::MountPrivate
        | Step::Clone
        | Step::PrivateDev
        | Step::ProcMount
        | Step::PrivateTmp
        | Step::BindWritable
        | Step::BindReadOnly => "mounts",
        Step::HostReadOnly | Step::SetReadOnly | Step::ProbeHostReadOnly => "mount_setattr",
        Step::Capabilities | Step::NoNewPrivs => "capabilities",
        Step::Seccomp => "seccomp",
        Step::Setsid | Step::Dumpable | Step::Fork | Step::Descriptors | Step::Chdir => {
            "process_setup"
        }
    }
}

fn position(step: Step) -> usize {
    // ProbeHostReadOnly runs last of all.
    CHAIN_ORDER
        .iter()
        .position(|s| *s == step)
        .unwrap_or(CHAIN_ORDER.len())
}

fn needs(id: &str) -> &'static str {
    match id {
        "cgroup_delegation" => "a writable (delegated) cgroup v2 sub-tree below this process's cgroup",
        "user_namespaces" => "unprivileged user namespaces (unshare CLONE_NEWUSER) and id maps",
        "namespaces" => "PID, mount, IPC and network namespaces",
        "loopback_network" => "a network namespace with only lo, up, and loopback TCP",
        "mounts" => "a private mount namespace: bind mounts, open_tree clones, fresh /proc, tmpfs /tmp and /dev",
        "mount_setattr" => "recursive read-only mounts (mount_setattr, Linux 5.12)",
        "capabilities" => "dropping every capability and no_new_privs",
        "seccomp" => "seccomp filters (SECCOMP_SET_MODE_FILTER)",
        _ => "a new session, die-with-parent, a PID namespace init, close_range (Linux 5.11)",
    }
}

fn sysctl(path: &str) -> Option<String> {
    crate::procfs::read_system_file(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The one command that fixes a missing mechanism here.
fn fix(id: &str) -> String {
    match id {
        "cgroup_delegation" => {
            "run under a delegated cgroup: systemd-run --user --scope -p Delegate=yes -- kiln-qual …".into()
        }
        "user_namespaces" => {
            if sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref()
                == Some("1")
            {
                "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0".into()
            } else if sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0")
            {
                "sudo sysctl -w kernel.unprivileged_userns_clone=1".into()
            } else if sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
                "sudo sysctl -w user.max_user_namespaces=15000".into()
            } else {
                "allow unshare(CLONE_NEWUSER) in the container: docker run --security-opt seccomp=unconfined …".into()
            }
        }
        "mount_setattr" | "seccomp" if under_seccomp_filter() => format!(
            "this process already runs under a seccomp filter that refuses {id}: run outside it (a container: docker run --security-opt seccomp=unconfined …)"
        ),
        "mount_setattr" => "boot Linux 5.12 or later".into(),
        "seccomp" => "boot a kernel built with CONFIG_SECCOMP_FILTER=y".into(),
        _ => "allow namespaces and mounts in the container: docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined …".into(),
    }
}

/// Whether this process already runs under a seccomp filter (`Seccomp: 2` in
/// `/proc/self/status`): then a refused filter or mount call is that filter's doing.
fn under_seccomp_filter() -> bool {
    crate::procfs::read_system_file("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}

fn reason(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

/// The chain mechanisms' outcomes from the chain probe's one answer.
fn chain_statuses(
    failure: Option<StepFailure>,
    uses_userns: bool,
) -> Vec<(&'static str, MechanismStatus)> {
    let ids = &MECHANISM_IDS[1..];
    let steps_of = |id: &str| -> Vec<Step> {
        CHAIN_ORDER
            .iter()
            .copied()
            .chain([Step::ProbeHostReadOnly])
            .filter(|s| mechanism_of(*s) == id)
            .collect()
    };
    ids.iter()
        .map(|id| {
            if *id == "user_namespaces" && !uses_userns {
                return (
                    *id,
                    MechanismStatus::NotNeeded {
                        reason: "running as root: the box creates no user namespace",
                    },
                );
            }
            let status = match failure {
                None => MechanismStatus::Available,
                Some(f) if mechanism_of(f.step) == *id => MechanismStatus::Missing {
                    reason: format!("{}: {}", f.step.mechanism(), reason(f.errno)),
                    fix: fix(id),
                },
                Some(f) => {
                    let at = position(f.step);
                    if steps_of(id).iter().all(|s| position(*s) < at) {
                        MechanismStatus::Available
                    } else {
                        MechanismStatus::NotChecked {
                            blocked_by: mechanism_of(f.step),
                        }
                    }
                }
            };
            (*id, status)
        })
        .collect()
}

/// Checks every mechanism of the case box the runner uses (a loopback-only network and
/// `sandbox`'s paths), without running any program, and reports each in [`MECHANISM_IDS`]
/// order. Creates and removes one sub-cgroup; forks one child that sets up the box and exits.
pub fn probe_mechanisms(sandbox: &Sandbox) -> Vec<MechanismCheck> {
    let check = |id: &'static str, status| MechanismCheck {
        id,
        needs: needs(id),
        status,
    };
    if sandbox::enclosed() {
        return MECHANISM_IDS
            .iter()
            .map(|id| {
                check(
                    id,
                    MechanismStatus::NotNeeded {
                        reason: "inside an enclosing kiln-qual box, which holds every mechanism",
                    },
                )
            })
            .collect();
    }
    let cgroup = match crate::cgroup::CaseCgroup::create() {
        Some(cg) => {
            cg.remove();
            MechanismStatus::Available
        }
        None => MechanismStatus::Missing {
            reason: crate::cgroup::unavailable_error().to_string(),
            fix: fix("cgroup_delegation"),
        },
    };
    let mut out = vec![check("cgroup_delegation", cgroup)];
    // The runner's network policy: loopback only.
    match Plan::new(sandbox, true, Vec::new(), false, Path::new("/")) {
        Ok(plan) => {
            let uses_userns = plan.uses_userns();
            let failure = sandbox::probe(plan).err();
            out.extend(
                chain_statuses(failure, uses_userns)
                    .into_iter()
                    .map(|(id, s)| check(id, s)),
            );
        }
        Err(e) => {
            // The box could not even be planned (a path of `sandbox` is unusable).
            out.extend(MECHANISM_IDS[1..].iter().map(|id| {
                check(
                    id,
                    MechanismStatus::Missing {
                        reason: format!("failed to plan the box: {e}"),
                        fix: "check the paths the box protects".into(),
                    },
                )
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_marks_its_mechanism_missing_earlier_ones_available_later_ones_unchecked() {
        let f = StepFailure {
            step: Step::Seccomp,
            index: 0,
            errno: libc::EPERM,
        };
        let s: std::collections::BTreeMap<_, _> =
            chain_statuses(Some(f), true).into_iter().collect();
        assert_eq!(s["user_namespaces"], MechanismStatus::Available);
        assert_eq!(
            s["mount_setattr"],
            MechanismStatus::NotChecked {
                blocked_by: "seccomp"
            }
        );
        assert_eq!(
            s["loopback_network"],
            MechanismStatus::NotChecked {
                blocked_by: "seccomp"
            }
        );
        assert!(matches!(s["seccomp"], MechanismStatus::Missing { .. }));
        assert_eq!(s["capabilities"], MechanismStatus::Available);
        let all = chain_statuses(None, false);
        assert_eq!(all.len(), MECHANISM_IDS.len() - 1);
        assert!(matches!(
            all.iter()
                .find(|(id, _)| *id == "user_namespaces")
                .unwrap()
                .1,
            MechanismStatus::NotNeeded { .. }
        ));
    }

    #[test]
    fn every_step_belongs_to_a_reported_mechanism() {
        for s in CHAIN_ORDER.iter().chain([&Step::ProbeHostReadOnly]) {
            assert!(MECHANISM_IDS.contains(&mechanism_of(*s)));
        }
    }
}
