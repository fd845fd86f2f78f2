//! Who belongs to a case, and how to signal and reap them.
//!
//! Membership, by mechanism:
//! - `cgroup_v2`: exactly the processes in the execution's cgroup (nothing can leave it).
//! - `process_group_subreaper`: the leader's subtree plus the subtrees of the processes
//!   re-parented to us (we are a child subreaper) that started after the leader and are not
//!   other leaders this crate registered, walked through `/proc/<pid>/task/*/children`. Every
//!   descendant of the leader is in one of those subtrees, whatever `setsid` or double forks it
//!   did. Where the kernel has no `children` files, a full `/proc` scan classifies processes
//!   by group, session, ancestry and re-parenting instead. Members are remembered by
//!   `(pid, start time)`, so a process seen once stays a member, and a reused pid is never
//!   confused with it.
//!
//! Caveat of the fallback: a process that this program starts through another API while an
//! execution is running, and that is orphaned and re-parented to us, would be attributed to
//! the case. With cgroups there is no such ambiguity.
//!
//! Signals go through `pidfd_open` + `pidfd_send_signal` after re-checking the start time, so
//! a pid recycled between the scan and the signal is never hit.

use crate::cgroup::CaseCgroup;
use crate::procfs::{self, Stat};
use crate::sys;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

static FORCE_FULL_SCAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes fallback membership use the full `/proc` scan even where `children` files exist (the
/// path taken on kernels without CONFIG_PROC_CHILDREN), process-wide. For tests.
#[doc(hidden)]
pub fn force_full_proc_scan(on: bool) {
    FORCE_FULL_SCAN.store(on, std::sync::atomic::Ordering::SeqCst);
}

fn full_scan_forced() -> bool {
    FORCE_FULL_SCAN.load(std::sync::atomic::Ordering::SeqCst)
}

/// Leaders spawned by this crate that are not yet reaped (excluded from orphan attribution).
static LEADERS: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

pub(crate) fn register_leader(pid: u32) {
    LEADERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert(pid);
}

pub(crate) fn unregister_leader(pid: u32) {
    if let Some(set) = LEADERS.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        set.remove(&pid);
    }
}

fn is_other_leader(pid: u32, own: u32) -> bool {
    pid != own
        && LEADERS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|s| s.contains(&pid))
}

/// Membership tracker of one case.
#[derive(Debug)]
pub(crate) struct Tracker {
    pub leader: u32,
    leader_start: u64,
    pub cgroup: Option<CaseCgroup>,
    /// Members ever seen (pid -> start time), leader excluded.
    known: Mutex<HashMap<u32, u64>>,
    self_pid: u32,
}

impl Tracker {
    pub(crate) fn new(leader: u32, cgroup: Option<CaseCgroup>) -> Tracker {
        let leader_start = procfs::stat(leader).map(|s| s.start_time).unwrap_or(0);
        Tracker {
            leader,
            leader_start,
            cgroup,
            known: Mutex::new(HashMap::new()),
            self_pid: procfs::self_pid(),
        }
    }

    /// Live (not zombie) members other than the leader and the box's PID namespace init, as
    /// of now. Zombie members that are our children (re-parented orphans, the init once its
    /// leader is gone) are reaped on the way. The init is ours, not the case's: it ends by
    /// itself when its namespace is empty, and takes the namespace with it when killed.
    pub(crate) fn live_members(&self) -> Vec<Stat> {
        let mut live = Vec::new();
        for s in self.members() {
            if s.is_dead() {
                if s.ppid == self.self_pid {
                    sys::reap_nohang(s.pid);
                }
            } else if !procfs::is_pidns_init(s.pid) {
                live.push(s);
            }
        }
        live
    }

    /// Waits (up to `limit`) until every process of the case that became our child (the
    /// box's init once its leader is gone, re-parented orphans) has ended and is reaped; call
    /// after the group was killed. An exiting init is listed neither in the cgroup nor as a
    /// zombie while it waits for its namespace to empty, so our children are checked directly.
    pub(crate) fn settle_init(&self, limit: std::time::Duration) {
        let until = std::time::Instant::now() + limit;
        loop {
            let mut pending = false;
            for pid in procfs::children_of_self().unwrap_or_default() {
                let Some(s) = procfs::stat(pid) else { continue };
                if !(self.is_known(&s) || s.pgrp == self.leader) {
                    continue;
                }
                if s.is_dead() {
                    sys::reap_nohang(s.pid);
                } else {
                    pending = true;
                }
            }
            if !pending || std::time::Instant::now() >= until {
                return;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Members other than the leader, zombies included.
    pub(crate) fn members(&self) -> Vec<Stat> {
        let mut out: Vec<Stat> = Vec::new();
        let mut seen: HashSet<u32> = HashSet::new();
        let mut add = |s: Stat, out: &mut Vec<Stat>| {
            if s.pid != self.leader && seen.insert(s.pid) {
                out.push(s);
            }
        };
        if let Some(cg) = &self.cgroup {
            for pid in cg.pids() {
                if let Some(s) = procfs::stat(pid) {
                    add(s, &mut out);
                }
            }
            // Zombies re-parented to us, which the cgroup may no longer list.
            if let Some(children) = procfs::children_of_self() {
                for pid in children {
                    if let Some(s) = procfs::stat(pid) {
                        if s.is_dead() && (self.is_known(&s) || cg.contains_by_proc(pid)) {
                            add(s, &mut out);
                        }
                    }
                }
            }
        } else if let Some(children) = procfs::children_of_self().filter(|_| !full_scan_forced()) {
            // Every descendant of the leader is in the leader's subtree or, once orphaned,
            // in the subtree of one of our children (we are a subreaper).
            let mut roots: Vec<u32> = Vec::new();
            if procfs::stat(self.leader).is_some() {
                roots.push(self.leader);
            }
            for pid in children {
                if pid == self.leader || is_other_leader(pid, self.leader) {
                    continue;
                }
                if let Some(s) = procfs::stat(pid) {
                    if s.start_time >= self.leader_start || self.is_known(&s) {
                        roots.push(pid);
                    }
                }
            }
            let mut queue = roots;
            let mut depth_guard = 0usize;
            while let Some(pid) = queue.pop() {
                depth_guard += 1;
                if depth_guard > 100_000 {
                    break;
                }
                let Some(s) = procfs::stat(pid) else { continue };
                add(s, &mut out);
                queue.extend(procfs::children_of(pid));
            }
            // Processes seen before that are no longer in the tree (should not happen).
            let known: Vec<(u32, u64)> = self
                .known
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(a, b)| (*a, *b))
                .collect();
            for (pid, start) in known {
                if let Some(s) = procfs::stat(pid) {
                    if s.start_time == start {
                        add(s, &mut out);
                    }
                }
            }
        } else {
            let snap = procfs::snapshot();
            let by_pid: HashMap<u32, &Stat> = snap.iter().map(|s| (s.pid, s)).collect();
            let mut member: HashMap<u32, bool> = HashMap::new();
            for s in &snap {
                self.classify(s, &by_pid, &mut member, 0);
            }
            for s in &snap {
                if member.get(&s.pid) == Some(&true) {
                    add(*s, &mut out);
                }
            }
        }
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        for s in &out {
            known.insert(s.pid, s.start_time);
        }
        out
    }

    fn is_known(&self, s: &Stat) -> bool {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&s.pid)
            == Some(&s.start_time)
    }

    fn classify(
        &self,
        s: &Stat,
        by_pid: &HashMap<u32, &Stat>,
        memo: &mut HashMap<u32, bool>,
        depth: u32,
    ) -> bool {
        if let Some(&m) = memo.get(&s.pid) {
            return m;
        }
        let direct = s.pid == self.leader
            || (s.start_time >= self.leader_start
                && (s.pgrp == self.leader
                    || s.session == self.leader
                    || self.is_known(s)
                    || (s.ppid == self.self_pid && !is_other_leader(s.pid, self.leader))));
        let m = if direct {
            true
        } else if depth < 64 && s.ppid != 0 && s.ppid != self.self_pid && s.pid != self.self_pid {
            match by_pid.get(&s.ppid) {
                Some(parent) => self.classify(parent, by_pid, memo, depth + 1),
                None => false,
            }
        } else {
            false
        };
        memo.insert(s.pid, m);
        m
    }
}

/// Signals one process if it is still the one we saw (same start time).
pub(crate) fn signal_one(m: &Stat, sig: i32) {
    match sys::pidfd_open(m.pid) {
        Some(fd) => {
            if procfs::stat(m.pid).is_some_and(|now| now.start_time == m.start_time) {
                let _ = sys::pidfd_send_signal(&fd, sig);
            }
        }
        None => {
            if procfs::stat(m.pid).is_some_and(|now| now.start_time == m.start_time) {
                let _ = sys::kill(m.pid, sig);
            }
        }
    }
}
