//! Per-case overhead of `qual_exec::execute` (contained, captured, settled, cleaned up) over
//! 200 executions of `true`, against spawning `true` with plain `std::process::Command`
//! (`output()`) in the same process. Target: overhead < 5 ms per case.
//!
//! Run: `cargo bench -p qual-exec --bench overhead`.

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

use qual_exec::{execute, CaptureLimits, ExecSpec, Mechanism, NetworkPolicy};
use std::time::{Duration, Instant};

const N: u32 = 200;

fn find_true() -> String {
    for p in ["/usr/bin/true", "/bin/true"] {
        if std::path::Path::new(p).exists() {
            return p.to_string();
        }
    }
    panic!("no `true` binary found");
}

fn main() {
    let program = find_true();
    let spec = ExecSpec {
        argv: vec![program.clone()],
        cwd: std::env::temp_dir(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        timeout: Duration::from_secs(60),
        term_grace: Duration::from_secs(5),
        capture: CaptureLimits::default(),
        network: NetworkPolicy::Inherit,
        sandbox: Default::default(),
    };
    // Warm up both paths (page cache, cgroup detection).
    for _ in 0..5 {
        execute(&spec).expect("execute true");
        std::process::Command::new(&program)
            .output()
            .expect("spawn true");
    }

    let t = Instant::now();
    for _ in 0..N {
        let out = std::process::Command::new(&program)
            .env_clear()
            .output()
            .expect("spawn true");
        assert!(out.status.success());
    }
    let baseline = t.elapsed() / N;

    let (ours, mechanism) = measure(&spec);
    report(baseline, ours, mechanism);
    // What the runner uses for `network_access: forbidden`: a fresh network namespace per case.
    let mut isolated = spec.clone();
    isolated.network = NetworkPolicy::LoopbackOnly;
    if qual_exec::probe_loopback_only().is_ok() {
        println!("with NetworkPolicy::LoopbackOnly:");
        let (ours, mechanism) = measure(&isolated);
        report(baseline, ours, mechanism);
        // The whole box of a runner case: the host read-only, a worktree writable with its
        // `.git` and `.qualification/` read-only and the case directory writable again, a
        // private /tmp and /dev.
        let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("worktree");
        let case_dir = work.path().join(".qualification/runs/r/cases/001");
        std::fs::create_dir_all(&case_dir).expect("case dir");
        std::fs::create_dir_all(work.path().join(".git")).expect(".git");
        let mut case = isolated.clone();
        case.cwd = work.path().to_path_buf();
        case.sandbox = qual_exec::Sandbox {
            read_only: vec![work.path().join(".git"), work.path().join(".qualification")],
            writable: vec![work.path().to_path_buf(), case_dir],
            host: qual_exec::HostFiles::ReadOnly,
        };
        println!("with NetworkPolicy::LoopbackOnly and HostFiles::ReadOnly (a runner case):");
        let (ours, mechanism) = measure(&case);
        report(baseline, ours, mechanism);
        // On a shared, busy host the blocks above drift apart; interleaving one of each per
        // round and taking medians compares them under the same load.
        interleaved(
            &program,
            &[
                ("boxed", &spec),
                ("boxed + loopback-only network", &isolated),
                ("runner case (+ read-only host)", &case),
            ],
        );
    }
    if mechanism == Some(Mechanism::CgroupV2) {
        qual_exec::set_cgroup_policy(qual_exec::CgroupPolicy::Never);
        let (ours, mechanism) = measure(&spec);
        report(baseline, ours, mechanism);
    }
}

fn measure(spec: &ExecSpec) -> (Duration, Option<Mechanism>) {
    let t = Instant::now();
    let mut mechanism = None;
    for _ in 0..N {
        let e = execute(spec).expect("execute true");
        assert!(e.termination.success() && e.containment.clean);
        mechanism = Some(e.containment.mechanism);
    }
    (t.elapsed() / N, mechanism)
}

fn report(baseline: Duration, ours: Duration, mechanism: Option<Mechanism>) {
    let overhead = ours.saturating_sub(baseline);
    println!(
        "qual-exec overhead ({} executions of `true`, mechanism {}):",
        N,
        mechanism.map(|m| m.as_str()).unwrap_or("?")
    );
    println!(
        "  std::process::Command::output  {:>9.3} ms/case",
        ms(baseline)
    );
    println!("  qual_exec::execute             {:>9.3} ms/case", ms(ours));
    println!(
        "  overhead                       {:>9.3} ms/case (target < 5 ms) {}",
        ms(overhead),
        if overhead < Duration::from_millis(5) {
            "ok"
        } else {
            "MISSED"
        }
    );
    println!(
        "  ratio execute/baseline         {:>9.2}x",
        ours.as_secs_f64() / baseline.as_secs_f64()
    );
}

/// `N` rounds of: one bare spawn, then one execution of each spec; medians per path.
fn interleaved(program: &str, specs: &[(&str, &ExecSpec)]) {
    let mut bare = Vec::new();
    let mut boxed: Vec<Vec<Duration>> = vec![Vec::new(); specs.len()];
    for _ in 0..N {
        let t = Instant::now();
        let out = std::process::Command::new(program)
            .env_clear()
            .output()
            .expect("spawn true");
        assert!(out.status.success());
        bare.push(t.elapsed());
        for (i, (_, spec)) in specs.iter().enumerate() {
            let t = Instant::now();
            let e = execute(spec).expect("execute true");
            assert!(e.termination.success() && e.containment.clean);
            boxed[i].push(t.elapsed());
        }
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let base = median(&mut bare);
    println!("interleaved, {N} rounds (medians):");
    println!("  {:<34} {:>9.3} ms/case", "bare spawn", ms(base));
    for (i, (name, _)) in specs.iter().enumerate() {
        let m = median(&mut boxed[i]);
        let overhead = m.saturating_sub(base);
        println!(
            "  {:<34} {:>9.3} ms/case, overhead {:.3} ms {}",
            name,
            ms(m),
            ms(overhead),
            if overhead < Duration::from_millis(5) {
                "ok"
            } else {
                "MISSED"
            }
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
