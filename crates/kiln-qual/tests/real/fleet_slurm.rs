//! A real two-node Slurm cluster on localhost (Debian's `slurm-wlm`, installed by
//! `scripts/setup-slurm`): its own munged (own key and socket), slurmctld and two slurmd
//! (`-N node1`, `-N node2`) on free ports with a config of the test's own, never `/etc/slurm`.
//! `kiln-qual fleet dispatch` submits a plan of four CPU targets as `sbatch` job arrays (two
//! pass, one fails, one outlives its one-minute Slurm time limit); `fleet status --wait` reads
//! their states back from Slurm; `fleet collect` verifies the three receipts and refuses the
//! timed-out target as missing, by name; `fleet report` shows it with Slurm's state. Then the
//! daemons are shut down and the test checks that none of them, and nothing that ran in the
//! cluster's directory, is left running.
//!
//! Needs root (munged and slurmd run as root here) and the Slurm programs; without them the
//! trial is reported ignored with the reason, and fails under `CI=true`.

use crate::common::fleet::{self, kq_env};
use qual_test_fixtures::harness::{self, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SBIN: &[&str] = &[
    "/usr/sbin/munged",
    "/usr/sbin/slurmctld",
    "/usr/sbin/slurmd",
];

fn slurm_present() -> Result<(), String> {
    harness::needs_root("munged and slurmd of the test cluster run as root")?;
    for p in SBIN
        .iter()
        .chain(&["/usr/bin/sbatch", "/usr/bin/scontrol", "/usr/bin/sinfo"])
    {
        harness::needs_file(
            Path::new(p),
            "slurm-wlm and munge (run scripts/setup-slurm)",
        )?;
    }
    Ok(())
}

/// The running test cluster; dropping it shuts it down.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    stopped: std::cell::Cell<bool>,
}

fn run(program: &str, args: &[&str], env: &[(&str, &Path)]) -> std::process::Output {
    let mut c = Command::new(program);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn pid_alive(pid_file: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pid_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // A zombie (state Z after the command) has exited.
    let state = stat.rsplit(')').next()?.split_whitespace().next()?;
    (state != "Z").then_some(pid)
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        for d in ["state", "spool", "log", "tmp"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let key = dir.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        let mut f = std::fs::File::open("/dev/urandom").unwrap();
        std::io::Read::read_exact(&mut f, &mut bytes).unwrap();
        std::fs::write(&key, &bytes).unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o400))
            .unwrap();
        let d = dir.display();
        let o = run(
            "/usr/sbin/munged",
            &[
                "--force",
                &format!("--socket={d}/munge.sock"),
                &format!("--key-file={d}/munge.key"),
                &format!("--log-file={d}/log/munged.log"),
                &format!("--pid-file={d}/munged.pid"),
                &format!("--seed-file={d}/munge.seed"),
            ],
            &[],
        );
        assert!(
            o.status.success(),
            "munged: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (ctld, n1, n2) = (
            crate::common::free_port(),
            crate::common::free_port(),
            crate::common::free_port(),
        );
        let conf = dir.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=kq\nSlurmctldHost=localhost\nSlurmUser=root\nSlurmdUser=root\n\
                 AuthType=auth/munge\nAuthInfo=socket={d}/munge.sock\nCredType=cred/munge\n\
                 StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd-%n.pid\n\
                 SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd-%n.log\n\
                 SlurmctldPort={ctld}\nSlurmdPort={n1}\nProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\nSchedulerType=sched/backfill\nSelectType=select/cons_tres\n\
                 ReturnToService=2\nMpiDefault=none\nKillWait=2\nOverTimeLimit=0\nMinJobAge=600\n\
                 NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n1} CPUs=2 RealMemory=4000 State=UNKNOWN\n\
                 NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n2} CPUs=2 RealMemory=4000 State=UNKNOWN\n\
                 PartitionName=qual Nodes=node1,node2 Default=YES MaxTime=60 State=UP\n"
            ),
        )
        .unwrap();
        let cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: conf.clone(),
            stopped: std::cell::Cell::new(false),
        };
        let env = [("SLURM_CONF", conf.as_path())];
        let c = conf.to_str().unwrap();
        for (program, args) in [
            ("/usr/sbin/slurmctld", vec!["-f", c]),
            ("/usr/sbin/slurmd", vec!["-f", c, "-N", "node1"]),
            ("/usr/sbin/slurmd", vec!["-f", c, "-N", "node2"]),
        ] {
            let o = run(program, &args, &env);
            assert!(
                o.status.success(),
                "{program}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let o = run("/usr/bin/sinfo", &["-h", "-o", "%T %D"], &env);
            if String::from_utf8_lossy(&o.stdout).trim() == "idle 2" {
                break;
            }
            assert!(Instant::now() < until, "the nodes never became idle: {o:?}");
            std::thread::sleep(Duration::from_millis(500));
        }
        cluster
    }

    /// Shuts the daemons down and waits until none is left.
    #[allow(unsafe_code)] // kill(2) of our own munged
    fn stop(&self) -> Vec<String> {
        self.stopped.set(true);
        let _ = run(
            "/usr/bin/scontrol",
            &["shutdown"],
            &[("SLURM_CONF", self.conf.as_path())],
        );
        let pids = ["slurmctld.pid", "slurmd-node1.pid", "slurmd-node2.pid"];
        let until = Instant::now() + Duration::from_secs(30);
        while pids.iter().any(|p| pid_alive(&self.dir.join(p)).is_some()) && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        if let Some(pid) = pid_alive(&self.dir.join("munged.pid")) {
            // SAFETY: kill has no memory preconditions; the pid is our own munged's.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let until = Instant::now() + Duration::from_secs(10);
        while pid_alive(&self.dir.join("munged.pid")).is_some() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.left_running()
    }

    /// Daemons still alive, and every process whose working directory or command line lies
    /// in the cluster's directory.
    fn left_running(&self) -> Vec<String> {
        let mut left: Vec<String> = [
            "munged.pid",
            "slurmctld.pid",
            "slurmd-node1.pid",
            "slurmd-node2.pid",
        ]
        .iter()
        .filter_map(|p| pid_alive(&self.dir.join(p)).map(|pid| format!("{p}: {pid}")))
        .collect();
        let me = std::process::id().to_string();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|c| c.is_ascii_digit()) || name == me {
                continue;
            }
            let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if pid_alive_pid(&name)
                && (cwd.starts_with(&self.dir) || cmd.contains(&*self.dir.to_string_lossy()))
            {
                left.push(format!("{name}: {cmd} (cwd {})", cwd.display()));
            }
        }
        left
    }
}

fn pid_alive_pid(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                .map(|s| s != "Z")
        })
        .unwrap_or(false)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.stopped.get() {
            self.stop();
        }
    }
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn a_plan_runs_on_a_two_node_cluster_and_is_collected_verified_and_reported() {
    let started = Instant::now();
    let f = fleet::fleet();
    let base = f.base();
    let cluster = Cluster::start(&base.join("slurm"));
    let conf = cluster.conf.to_str().unwrap().to_owned();
    let tmp = cluster.dir.join("tmp");
    let env = [
        ("SLURM_CONF", conf.as_str()),
        ("TMPDIR", tmp.to_str().unwrap()),
    ];
    let plan = f.plan(
        "plan.json",
        &f.commit,
        &[
            ("pass-node1", "node1", "fleet-pass-v1.json", 5),
            ("pass-node2", "node2", "fleet-pass-v1.json", 5),
            ("fail-node1", "node1", "fleet-fail-v1.json", 5),
            ("sleep-node2", "node2", "fleet-sleep-v1.json", 1),
        ],
    );
    let plan = plan.to_str().unwrap();
    let evidence = base.join("evidence");
    let ev = evidence.to_str().unwrap();
    let bin = env!("CARGO_BIN_EXE_kiln-qual");
    let dispatch = [
        "fleet",
        "dispatch",
        plan,
        "--evidence",
        ev,
        "--kiln-qual",
        bin,
    ];

    // The dry run prints the exact sbatch commands and writes nothing.
    let mut dry = dispatch.to_vec();
    dry.push("--dry-run");
    let o = kq_env(&f.work, &dry, &env);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "one array per placement: {out}");
    assert!(
        lines[0].starts_with(&format!(
            "sbatch --parsable --job-name=kq-test-fleet-0 --array=0-1 --partition=qual --time=5 --nodelist=node1 --output={ev}/slurm/task-%A_%a.out {ev}/slurm/job-0.sh"
        )),
        "{out}"
    );
    assert!(
        lines[2].contains("--array=0-0 --partition=qual --time=1 --nodelist=node2"),
        "{out}"
    );
    assert!(!evidence.exists(), "a dry run writes nothing");

    // A scheduler error is never hidden: an unknown partition is sbatch's refusal, verbatim.
    let bad_plan = std::fs::read_to_string(plan).unwrap().replace(
        "\"partition\": \"qual\"",
        "\"partition\": \"no-such-partition\"",
    );
    let bad = base.join("bad-plan.json");
    std::fs::write(&bad, bad_plan).unwrap();
    let bad_evidence = base.join("bad-evidence");
    let o = kq_env(
        &f.work,
        &[
            "fleet",
            "dispatch",
            bad.to_str().unwrap(),
            "--evidence",
            bad_evidence.to_str().unwrap(),
        ],
        &env,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("kiln-qual: failed to run sbatch") && err.contains("invalid partition"),
        "{err}"
    );
    assert!(
        !bad_evidence.join("slurm/dispatch.json").exists(),
        "nothing was submitted"
    );

    let o = kq_env(&f.work, &dispatch, &env);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A second dispatch into the same evidence directory is refused.
    let again = kq_env(&f.work, &dispatch, &env);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));

    let o = kq_env(
        &f.work,
        &[
            "fleet",
            "status",
            "--evidence",
            ev,
            "--wait",
            "240",
            "--json",
        ],
        &env,
    );
    let status = json(&o);
    assert!(o.status.success(), "{status}");
    let state = |id: &str| {
        status["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["target"] == id)
            .unwrap()["state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(state("pass-node1"), "completed", "{status}");
    assert_eq!(state("pass-node2"), "completed", "{status}");
    assert_eq!(state("fail-node1"), "failed", "{status}");
    assert_eq!(state("sleep-node2"), "timed_out", "{status}");

    let collect = ["fleet", "collect", plan, "--evidence", ev, "--json"];
    let o = kq_env(&f.work, &collect, &env);
    assert_eq!(o.status.code(), Some(1), "the timed-out target is missing");
    let c = json(&o);
    let t = |id: &str| {
        c["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["target"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(t("pass-node1")["verdict"], "passed", "{c}");
    assert_eq!(t("pass-node1")["keyid"], f.hosts[0].3.as_str());
    assert_eq!(t("pass-node2")["keyid"], f.hosts[1].3.as_str());
    assert_eq!(t("fail-node1")["verdict"], "failed", "{c}");
    assert_eq!(t("sleep-node2")["status"], "refused");
    assert_eq!(t("sleep-node2")["reasons"][0]["kind"], "missing");
    let again = json(&kq_env(&f.work, &collect, &env));
    assert_eq!(again["imported_files"], 0, "re-collecting copies nothing");
    assert_eq!(again["targets"], c["targets"]);

    let o = kq_env(&f.work, &["fleet", "report", plan, "--evidence", ev], &env);
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("3 of 4 targets verified"), "{md}");
    assert!(md.contains("- `sleep-node2` on `node2`: Slurm "), "{md}");
    assert!(md.contains("timed out (Slurm time limit)"), "{md}");
    let row = |id: &str| md.find(&format!("| {id} |")).unwrap();
    assert!(
        row("sleep-node2") < row("fail-node1") && row("fail-node1") < row("pass-node1"),
        "{md}"
    );

    let left = cluster.stop();
    assert!(left.is_empty(), "left running after shutdown: {left:?}");
    eprintln!(
        "fleet_slurm: cluster, 4 targets, collect and report in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![Trial::new(
        "a_plan_runs_on_a_two_node_cluster_and_is_collected_verified_and_reported",
        a_plan_runs_on_a_two_node_cluster_and_is_collected_verified_and_reported,
    )
    .needs(slurm_present())]
}
