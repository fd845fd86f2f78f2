//! The seccomp filters of the box (`kiln-qual-case-v1`), compiled before the fork with
//! `seccompiler` (rust-vmm's BPF compiler, made for exactly this) and installed in the
//! program's process right before `exec`.
//!
//! Refused with `EPERM` for every program: creating or entering namespaces (`unshare`,
//! `setns`, `clone` with a `CLONE_NEW*` flag), every mount API call, `ptrace`,
//! cross-process memory and descriptor access (`process_vm_readv/writev`, `pidfd_getfd`,
//! `kcmp`), `bpf`, `perf_event_open`, the keyring (`keyctl`, `add_key`, `request_key`),
//! kernel modules and `kexec`, `open_by_handle_at`, `userfaultfd` and `io_uring` (whose
//! submissions would bypass the socket rules). `clone3` gets `ENOSYS`, so C libraries fall
//! back to `clone`, whose flags the filter can inspect. On x86-64 every x32 system call
//! number gets `ENOSYS` (a deny list must not be bypassable through the other ABI).
//!
//! With a loopback-only network, additionally: `socket` for any family other than
//! `AF_INET`, `AF_INET6` and `AF_NETLINK` (all scoped to the private network namespace) —
//! so no filesystem or abstract unix socket, `AF_VSOCK` or `AF_PACKET` — and
//! `socketpair(AF_UNIX, SOCK_DGRAM)` (an unconnected datagram socket could `sendto` a path);
//! stream and seqpacket socket pairs stay allowed (Python's `multiprocessing` uses them).

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Filter id recorded in the evidence.
pub const FILTER_ID: &str = "kiln-qual-case-v1";

const CLONE_NS_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

fn always() -> Vec<(i64, &'static str)> {
    vec![
        (libc::SYS_unshare, "unshare"),
        (libc::SYS_setns, "setns"),
        (libc::SYS_mount, "mount"),
        (libc::SYS_umount2, "umount2"),
        (libc::SYS_pivot_root, "pivot_root"),
        (libc::SYS_open_tree, "open_tree"),
        (libc::SYS_move_mount, "move_mount"),
        (libc::SYS_fsopen, "fsopen"),
        (libc::SYS_fsconfig, "fsconfig"),
        (libc::SYS_fsmount, "fsmount"),
        (libc::SYS_fspick, "fspick"),
        (libc::SYS_mount_setattr, "mount_setattr"),
        (libc::SYS_ptrace, "ptrace"),
        (libc::SYS_process_vm_readv, "process_vm_readv"),
        (libc::SYS_process_vm_writev, "process_vm_writev"),
        (libc::SYS_pidfd_getfd, "pidfd_getfd"),
        (libc::SYS_kcmp, "kcmp"),
        (libc::SYS_bpf, "bpf"),
        (libc::SYS_perf_event_open, "perf_event_open"),
        (libc::SYS_keyctl, "keyctl"),
        (libc::SYS_add_key, "add_key"),
        (libc::SYS_request_key, "request_key"),
        (libc::SYS_init_module, "init_module"),
        (libc::SYS_finit_module, "finit_module"),
        (libc::SYS_delete_module, "delete_module"),
        (libc::SYS_kexec_load, "kexec_load"),
        (libc::SYS_kexec_file_load, "kexec_file_load"),
        (libc::SYS_open_by_handle_at, "open_by_handle_at"),
        (libc::SYS_userfaultfd, "userfaultfd"),
        (libc::SYS_io_uring_setup, "io_uring_setup"),
        (libc::SYS_io_uring_enter, "io_uring_enter"),
        (libc::SYS_io_uring_register, "io_uring_register"),
    ]
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).expect("valid condition")
}

fn arch() -> seccompiler::TargetArch {
    std::env::consts::ARCH
        .try_into()
        .expect("seccompiler supports this architecture")
}

fn main_filter(loopback_only: bool) -> BpfProgram {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, _) in always() {
        rules.insert(nr, Vec::new());
    }
    rules.insert(
        libc::SYS_clone,
        CLONE_NS_FLAGS
            .iter()
            .map(|f| SeccompRule::new(vec![cond(0, SeccompCmpOp::MaskedEq(*f), *f)]).unwrap())
            .collect(),
    );
    if loopback_only {
        rules.insert(
            libc::SYS_socket,
            vec![SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Ne, libc::AF_INET as u64),
                cond(0, SeccompCmpOp::Ne, libc::AF_INET6 as u64),
                cond(0, SeccompCmpOp::Ne, libc::AF_NETLINK as u64),
            ])
            .unwrap()],
        );
        rules.insert(
            libc::SYS_socketpair,
            vec![SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64),
                cond(1, SeccompCmpOp::MaskedEq(0xf), libc::SOCK_DGRAM as u64),
            ])
            .unwrap()],
        );
    }
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch(),
    )
    .and_then(|f| f.try_into())
    .expect("the case filter compiles")
}

fn enosys_filter() -> BpfProgram {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_clone3, Vec::new());
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch(),
    )
    .and_then(|f| f.try_into())
    .expect("the clone3 filter compiles")
}

/// On x86-64: `ENOSYS` for every x32 system call number (bit 30 set). Hand-written because
/// it is a range check, which seccompiler's per-number rules do not express.
fn x32_guard() -> BpfProgram {
    use seccompiler::sock_filter;
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JEQ_K: u16 = 0x15;
    const BPF_JGE_K: u16 = 0x35;
    const BPF_RET_K: u16 = 0x06;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    if std::env::consts::ARCH != "x86_64" {
        return vec![ins(BPF_RET_K, 0, 0, RET_ALLOW)];
    }
    vec![
        // arch (offset 4): other architectures are left to the main filter.
        ins(BPF_LD_W_ABS, 0, 0, 4),
        ins(BPF_JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        // nr (offset 0) >= __X32_SYSCALL_BIT -> ENOSYS
        ins(BPF_LD_W_ABS, 0, 0, 0),
        ins(BPF_JGE_K, 0, 1, 0x4000_0000),
        ins(BPF_RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
        ins(BPF_RET_K, 0, 0, RET_ALLOW),
    ]
}

/// The compiled filters for one execution.
pub(crate) struct Filters {
    programs: [BpfProgram; 3],
}

/// The compiled filters for a network policy (compiled once per process, before any fork).
pub(crate) fn filters(loopback_only: bool) -> &'static Filters {
    static INHERIT: std::sync::OnceLock<Filters> = std::sync::OnceLock::new();
    static LOOPBACK: std::sync::OnceLock<Filters> = std::sync::OnceLock::new();
    let cell = if loopback_only { &LOOPBACK } else { &INHERIT };
    cell.get_or_init(|| Filters {
        programs: [x32_guard(), enosys_filter(), main_filter(loopback_only)],
    })
}

impl Filters {
    /// Installs every filter in the calling thread (needs `no_new_privs`). Async-signal-safe:
    /// only `seccomp(2)` on prepared memory.
    pub(crate) unsafe fn install(&self) -> bool {
        unsafe {
            for p in &self.programs {
                let prog = libc::sock_fprog {
                    len: p.len() as u16,
                    filter: p.as_ptr() as *mut libc::sock_filter,
                };
                if libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0 as libc::c_ulong,
                    &prog as *const libc::sock_fprog,
                ) != 0
                {
                    return false;
                }
            }
            true
        }
    }
}

/// The seccomp part of a [`crate::SandboxRecord`]: which filter a case ran under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeccompRecord {
    /// Filter id (`kiln-qual-case-v1`).
    pub filter: String,
    /// System calls refused with `EPERM` (some only with the listed arguments).
    pub refused: Vec<String>,
}

/// The evidence of the filters used with this network policy.
pub(crate) fn record(loopback_only: bool) -> SeccompRecord {
    let mut refused: Vec<String> = always().into_iter().map(|(_, n)| n.to_string()).collect();
    refused.push("clone with CLONE_NEW* flags".into());
    refused.push("clone3 (ENOSYS)".into());
    if std::env::consts::ARCH == "x86_64" {
        refused.push("x32 system calls (ENOSYS)".into());
    }
    if loopback_only {
        refused.push("socket other than AF_INET, AF_INET6, AF_NETLINK".into());
        refused.push("socketpair(AF_UNIX, SOCK_DGRAM)".into());
    }
    SeccompRecord {
        filter: FILTER_ID.into(),
        refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_both_network_policies() {
        for lo in [false, true] {
            let f = filters(lo);
            assert!(f.programs.iter().all(|p| !p.is_empty()));
            assert!(record(lo).refused.iter().any(|r| r == "ptrace"));
        }
        assert!(record(true).refused.iter().any(|r| r.contains("AF_UNIX")));
        assert!(!record(false).refused.iter().any(|r| r.contains("AF_UNIX")));
    }
}
