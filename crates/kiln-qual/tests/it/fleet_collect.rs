//! `kiln-qual fleet collect` and the publication gate against real evidence: a bare upstream
//! repository and a clone (real git), real runs of the exact task script `fleet dispatch`
//! generates (run here by bash with the variables a Slurm node sets; the real cluster is
//! `tests/real/fleet_slurm.rs`), real Ed25519 keys. A tampered receipt, a wrong key, a wrong
//! commit, a missing target and an unsigned receipt are each refused by name; re-collecting is
//! idempotent and never replaces bytes; `receipt check --publication` refuses an unpushed
//! commit and a dirty run.

use crate::common::fleet::{self, kq_env, run_task, task_scripts};
use serde_json::Value;
use std::path::Path;

fn json(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The kinds of each target's refusal reasons (`[]` when verified), by target id.
fn kinds(c: &Value) -> Vec<(String, String, Vec<String>)> {
    c["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let kinds = t["reasons"]
                .as_array()
                .map(|r| {
                    let mut k: Vec<String> = r
                        .iter()
                        .map(|r| r["kind"].as_str().unwrap().to_owned())
                        .collect();
                    k.dedup();
                    k
                })
                .unwrap_or_default();
            (
                t["target"].as_str().unwrap().to_owned(),
                t["status"].as_str().unwrap().to_owned(),
                kinds,
            )
        })
        .collect()
}

fn collect(f: &fleet::Fleet, plan: &Path, evidence: &Path) -> std::process::Output {
    kq_env(
        &f.work,
        &[
            "fleet",
            "collect",
            plan.to_str().unwrap(),
            "--evidence",
            evidence.to_str().unwrap(),
            "--json",
        ],
        &[],
    )
}

#[test]
fn collect_refuses_each_bad_target_by_name_and_recollects_idempotently() {
    let f = fleet::fleet();
    let targets = [
        ("good", "node1", "fleet-pass-v1.json", 5),
        ("failing", "node2", "fleet-fail-v1.json", 5),
        ("tampered", "node2", "fleet-pass-v1.json", 5),
        ("wrong-key", "node1", "fleet-pass-v1.json", 5),
        ("unsigned", "node2", "fleet-pass-v1.json", 5),
        ("wrong-commit", "node1", "fleet-pass-v1.json", 5),
        ("missing", "node1", "fleet-pass-v1.json", 5),
    ];
    let plan = f.plan("plan.json", &f.commit, &targets);
    let evidence = f.base().join("evidence");
    let jobs = task_scripts(&f, &plan, &evidence);
    // Another pushed commit, for the target that runs the wrong one.
    std::fs::write(f.work.join("README"), "second\n").unwrap();
    crate::common::git(&f.work, &["add", "-A"]);
    crate::common::git(&f.work, &["commit", "-q", "-m", "second"]);
    crate::common::git(&f.work, &["push", "-q"]);
    let second = fleet::git_out(&f.work, &["rev-parse", "HEAD"]);
    for (script, ids) in &jobs {
        for (i, id) in ids.iter().enumerate() {
            if id == "missing" {
                continue;
            }
            let host = targets.iter().find(|t| t.0 == id).unwrap().1;
            let script = if id == "wrong-commit" {
                script.replace(&f.commit, &second)
            } else {
                script.clone()
            };
            let want = if id == "failing" { 1 } else { 0 };
            assert_eq!(run_task(&script, i, host), want, "task {id}");
        }
    }
    let inbox = evidence.join("inbox");
    // Tampered: a duration edited after the signature.
    let tampered = inbox.join("tampered/tampered.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&tampered).unwrap()).unwrap();
    v["results"][0]["duration_seconds"] = serde_json::json!(0.5);
    std::fs::write(&tampered, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    // Wrong key: re-signed with node2's key instead of node1's.
    let wrong = inbox.join("wrong-key/wrong-key.json");
    std::fs::remove_file(inbox.join("wrong-key/wrong-key.json.intoto.jsonl")).unwrap();
    let o = kq_env(
        &f.work,
        &[
            "receipt",
            "sign",
            wrong.to_str().unwrap(),
            "--key",
            f.hosts[1].1.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Unsigned: the attestation never arrived.
    std::fs::remove_file(inbox.join("unsigned/unsigned.json.intoto.jsonl")).unwrap();

    let o = collect(&f, &plan, &evidence);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let c = json(&o);
    let k = kinds(&c);
    let of = |id: &str| k.iter().find(|x| x.0 == id).unwrap().clone();
    assert_eq!(of("good").1, "verified");
    assert_eq!(of("failing").1, "verified", "a failed run is evidence too");
    assert_eq!(c["targets"][1]["verdict"], "failed");
    assert_eq!(c["targets"][0]["keyid"], f.hosts[0].3.as_str());
    assert_eq!(of("tampered").2, ["edited"], "{:?}", c["targets"][2]);
    assert_eq!(of("wrong-key").2, ["wrong_key"], "{:?}", c["targets"][3]);
    assert!(
        c["targets"][3]["reasons"][0]["message"]
            .as_str()
            .unwrap()
            .contains("it is signed by host \"node2\"'s key"),
        "{:?}",
        c["targets"][3]
    );
    assert_eq!(of("unsigned").2, ["unsigned"], "{:?}", c["targets"][4]);
    assert!(
        of("wrong-commit").2.contains(&"wrong_commit".to_owned()),
        "{:?}",
        c["targets"][5]
    );
    assert_eq!(of("missing").2, ["missing"], "{:?}", c["targets"][6]);
    // Text mode names each refused target.
    let text = kq_env(
        &f.work,
        &[
            "fleet",
            "collect",
            plan.to_str().unwrap(),
            "--evidence",
            evidence.to_str().unwrap(),
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&text.stderr);
    for id in [
        "tampered",
        "wrong-key",
        "unsigned",
        "wrong-commit",
        "missing",
    ] {
        assert!(err.contains(&format!("REFUSED {id} ")), "{id}: {err}");
    }

    // Re-collecting: the same outcome, nothing new copied.
    let again = json(&collect(&f, &plan, &evidence));
    assert_eq!(again["imported_files"], 0);
    assert_eq!(kinds(&again), k);
    // Nothing is replaced: other bytes for a collected file refuse the target.
    std::fs::write(inbox.join("good/kiln-qual.log"), "other bytes\n").unwrap();
    let c = json(&collect(&f, &plan, &evidence));
    let good = &c["targets"][0];
    assert_eq!(good["status"], "refused");
    assert_eq!(good["reasons"][0]["kind"], "layout");
    assert!(good["reasons"][0]["message"]
        .as_str()
        .unwrap()
        .contains("already collected with other bytes"));

    // The report (`kiln-qual report --fleet`, the same as `fleet report`): failures first, the
    // missing target named, who signed.
    let o = kq_env(
        &f.work,
        &[
            "fleet",
            "report",
            plan.to_str().unwrap(),
            "--evidence",
            evidence.to_str().unwrap(),
        ],
        &[],
    );
    let same = kq_env(
        &f.work,
        &[
            "report",
            "--fleet",
            plan.to_str().unwrap(),
            evidence.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(same.stdout, o.stdout);
    assert_eq!(same.status.code(), o.status.code());
    let md = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1));
    let row = |id: &str| {
        md.find(&format!("| {id} |"))
            .unwrap_or_else(|| panic!("{id}: {md}"))
    };
    // Over the collected tree (the refused re-import changed nothing in it): refused rows,
    // then the failed verdict, then the passed one.
    assert!(
        row("missing") < row("failing") && row("failing") < row("good"),
        "{md}"
    );
    assert!(
        md.contains("## Missing targets\n\n- `missing` on `node1`"),
        "{md}"
    );
    assert!(
        md.contains(&f.hosts[1].3),
        "the signer of the failing target is shown: {md}"
    );
}

#[test]
fn the_publication_gate_refuses_an_unpushed_commit_and_a_dirty_run() {
    let f = fleet::fleet();
    let plan = f.plan(
        "plan.json",
        &f.commit,
        &[("pushed", "node1", "fleet-pass-v1.json", 5)],
    );
    let evidence = f.base().join("evidence");
    let jobs = task_scripts(&f, &plan, &evidence);
    let script = &jobs[0].0;
    assert_eq!(run_task(script, 0, "node1"), 0);
    let pushed = evidence.join("inbox/pushed/pushed.json");
    let check = |receipt: &Path, extra: &[&str]| {
        let mut args = vec![
            "receipt",
            "check",
            "--publication",
            receipt.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        kq_env(&f.work, &args, &[])
    };
    let o = check(&pushed, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // An unpushed commit: committed in the clone, never pushed; run from the clone.
    std::fs::write(f.work.join("LOCAL"), "not pushed\n").unwrap();
    crate::common::git(&f.work, &["add", "-A"]);
    crate::common::git(&f.work, &["commit", "-q", "-m", "local only"]);
    let local = fleet::git_out(&f.work, &["rev-parse", "HEAD"]);
    let unpushed_script = script
        .replace(&f.commit, &local)
        .replace(f.upstream.to_str().unwrap(), f.work.to_str().unwrap())
        .replace("/inbox", "/inbox-local");
    assert_eq!(run_task(&unpushed_script, 0, "node1"), 0);
    let unpushed = evidence.join("inbox-local/pushed/pushed.json");
    let o = check(&unpushed, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("receipt.source.git_commit: is {local}: refused for publication, the commit is not reachable from the upstream branch origin/main")),
        "{err}"
    );
    // The same commit passes the gate once pushed; an explicit upstream works too.
    crate::common::git(&f.work, &["push", "-q"]);
    assert!(check(&unpushed, &["--upstream", "origin/main"])
        .status
        .success());

    // A dirty run (the flag as recorded): refused with the reason.
    let mut v: Value = serde_json::from_slice(&std::fs::read(&pushed).unwrap()).unwrap();
    v["source"]["git_worktree_clean"] = Value::Bool(false);
    v["qualification"]["verdict"] = serde_json::json!("failed");
    v["results"][0]["status"] = serde_json::json!("failed");
    v["results"][0]["metrics"][0]["value"] = serde_json::json!(0);
    let dirty = f.base().join("dirty.json");
    std::fs::write(&dirty, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let o = check(&dirty, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("receipt.source.git_worktree_clean: is false: refused for publication, the run was not made from a clean worktree"),
        "{err}"
    );
    // Without the flag the same receipt is a valid (failed) receipt.
    let o = kq_env(&f.work, &["receipt", "check", dirty.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Dispatch applies the gate to the plan's commit.
    std::fs::write(f.work.join("LOCAL2"), "not pushed\n").unwrap();
    crate::common::git(&f.work, &["add", "-A"]);
    crate::common::git(&f.work, &["commit", "-q", "-m", "local only again"]);
    let head = fleet::git_out(&f.work, &["rev-parse", "HEAD"]);
    let plan2 = f.plan(
        "plan2.json",
        &head,
        &[("pushed", "node1", "fleet-pass-v1.json", 5)],
    );
    let o = kq_env(
        &f.work,
        &[
            "fleet",
            "dispatch",
            plan2.to_str().unwrap(),
            "--evidence",
            "ev2",
            "--dry-run",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is not reachable from origin/main"), "{err}");
    assert!(!f.work.join("ev2").exists());
}
