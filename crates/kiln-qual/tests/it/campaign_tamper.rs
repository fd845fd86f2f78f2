//! The campaign tamper suite: real campaigns against owned `kiln-qual mock-server`s (a
//! passing reference `ref`, a paired candidate `cand` whose server stops one token short, a
//! `solo` campaign failing `fixed_output_length`, a `lowmem` one failing
//! `absolute_memory_limit`) are made once; each edit is applied to a copy of the directory
//! with the self-hashes recomputed by the project's own functions (`records::self_hash`, the
//! summary's per-receipt file hash), as a forger would, and must be refused by both
//! `campaign verify` and `report`, naming what disagrees. The untouched copy verifies
//! (positive control). The signed part: `receipt sign` on a summary, `campaign verify
//! --trusted-keys`, `report --trusted-keys`, a consistent forgery that only the signature
//! catches, and the independent DSSE implementation (securesystemslib) both ways.

use crate::common;
use assert_cmd::Command;
use qual_campaign::records::{self, Receipt, Summary, Verdict};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_kiln-qual");

fn recipe(path: &Path, extra: &[&str]) {
    let args: Vec<&str> = ["--itl-ms", "0.2"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    common::mock_launch_recipe(
        path,
        "tamper-mock",
        BIN,
        common::free_port(),
        &args,
        serde_json::Value::Null,
    );
}

fn campaign(dir: &Path, engine: &str, server: &[&str], extra: &[&str], code: i32) {
    let launch = format!("{engine}.launch.json");
    recipe(&dir.join(&launch), server);
    Command::new(BIN)
        .args(["campaign", "--engine", engine, "--launch", &launch])
        .args([
            "--campaign-id",
            "tamper",
            "--prompt-set-id",
            "tamper-prompts",
        ])
        .args(["--profiles", "greedy-short,mixed", "--sizes", "1,3"])
        .args(["--repeats", "1", "--max-tokens", "4"])
        .args(["--memory-source", "process-tree", "--memory-sample-ms", "1"])
        .args(["--output-evidence", "full", "--out-dir", "out"])
        .args(["--model-path", "model", "--continue-after-failure"])
        .args(extra)
        .current_dir(dir)
        .assert()
        .code(code);
}

/// The campaigns, made once for every test of this module (never edited in place).
fn fixture() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Shared by the tests of this module, so kept (under the target's scratch directory).
        let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        std::fs::create_dir(d.join("out")).unwrap();
        common::stand_in_model(&d);
        let big = ["--memory-limit-bytes", "1099511627776"];
        campaign(&d, "ref", &[], &big, 0);
        let paired = [
            big[0],
            big[1],
            "--reference-dir",
            "out",
            "--reference-engine",
            "ref",
        ];
        campaign(&d, "cand", &["--output-tokens", "3"], &paired, 1);
        campaign(&d, "solo", &["--output-tokens", "3"], &big, 1);
        campaign(&d, "lowmem", &[], &["--memory-limit-bytes", "4096"], 1);
        d
    })
}

/// A fresh copy of the campaign directory: `(temporary root, root/out)`.
fn copy() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    common::copy_dir(&fixture().join("out"), &out);
    (t, out)
}

fn read_receipt(path: &Path) -> Receipt {
    records::read_record(path).unwrap().2
}

fn read_summary(out: &Path, engine: &str) -> Summary {
    records::read_record(&out.join(records::summary_name(engine)))
        .unwrap()
        .2
}

fn replace(path: &Path, bytes: &[u8]) {
    std::fs::remove_file(path).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Rewrites the summary of `engine` with `edit` applied, its self-hash recomputed.
fn edit_summary(out: &Path, engine: &str, edit: impl FnOnce(&mut Summary)) {
    let mut s = read_summary(out, engine);
    edit(&mut s);
    s.summary_sha256 = records::self_hash(&s, "summary_sha256");
    replace(
        &out.join(records::summary_name(engine)),
        &records::to_file_bytes(&s),
    );
}

/// Rewrites receipt `name` with `edit`, its self-hash recomputed, and the summary's line for
/// it (file hash, verdict) and the summary's verdict made to agree.
fn edit_receipt(out: &Path, engine: &str, name: &str, edit: impl FnOnce(&mut Receipt)) {
    let path = out.join(name);
    let mut r = read_receipt(&path);
    edit(&mut r);
    r.receipt_sha256 = records::self_hash(&r, "receipt_sha256");
    let bytes = records::to_file_bytes(&r);
    replace(&path, &bytes);
    edit_summary(out, engine, |s| {
        for l in &mut s.profiles {
            if l.receipt.as_deref() == Some(name) {
                l.receipt_sha256 = Some(qual_json::sha256_prefixed(&bytes));
                l.verdict = Some(r.verdict);
            }
        }
        let all = s
            .profiles
            .iter()
            .all(|l| l.verdict == Some(Verdict::Passed));
        s.verdict = Verdict::of(all);
    });
}

fn run(dir: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// `campaign verify` and `report` both refuse the campaign of `engine`, naming `needle`.
fn refused(out: &Path, engine: &str, needle: &str) {
    let dir = out.parent().unwrap();
    let (code, text) = run(dir, &["campaign", "verify", "--engine", engine, "out"]);
    assert_eq!(code, 1, "campaign verify accepted the edit: {text}");
    assert!(
        text.contains(needle),
        "campaign verify: {needle:?} not in {text}"
    );
    let summary = format!("out/{}", records::summary_name(engine));
    let (code, text) = run(dir, &["report", &summary, "--markdown", "r.md"]);
    assert_eq!(code, 1, "report accepted the edit: {text}");
    assert!(
        text.contains(&format!("kiln-qual: refused {summary}")),
        "{text}"
    );
    assert!(text.contains(needle), "report: {needle:?} not in {text}");
    let md = std::fs::read_to_string(dir.join("r.md")).unwrap();
    assert!(
        !md.contains("✅"),
        "a refused campaign rendered as passed: {md}"
    );
}

fn verifies(out: &Path, engine: &str) {
    let (code, text) = run(
        out.parent().unwrap(),
        &["campaign", "verify", "--engine", engine, "out"],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("OK campaign verifies"), "{text}");
}

#[test]
fn untouched_campaigns_verify_and_report() {
    let (t, out) = copy();
    for e in ["ref", "cand", "solo", "lowmem"] {
        verifies(&out, e);
    }
    let (code, text) = run(t.path(), &["report", "out", "--markdown", "r.md"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("4 campaigns (1 passed, 3 failed), 0 refused"),
        "{text}"
    );
}

fn flip_to_passed(r: &mut Receipt) {
    for row in &mut r.runs {
        row.verdict = Verdict::Passed;
    }
    r.verdict = Verdict::Passed;
}

#[test]
fn verdict_flip_is_refused() {
    let (_t, out) = copy();
    edit_receipt(&out, "solo", "greedy-short.solo.json", flip_to_passed);
    refused(
        &out,
        "solo",
        "/runs/0/verdict does not follow from its gates and counts",
    );
}

#[test]
fn gate_flip_is_refused() {
    let (_t, out) = copy();
    edit_receipt(&out, "solo", "greedy-short.solo.json", |r| {
        for row in &mut r.runs {
            for g in &mut row.gates {
                g.outcome = Verdict::Passed;
            }
        }
        flip_to_passed(r);
    });
    refused(
        &out,
        "solo",
        "/runs/0/gates/3 (fixed_output_length): outcome is passed, the row's recorded numbers give failed",
    );
}

#[test]
fn throughput_change_is_refused() {
    let (_t, out) = copy();
    edit_receipt(&out, "ref", "greedy-short.ref.json", |r| {
        for row in &mut r.runs {
            row.output_token_throughput_per_s *= 100.0;
            row.request_throughput_per_s *= 100.0;
        }
    });
    refused(&out, "ref", "/runs/0/request_throughput_per_s is ");
    refused(&out, "ref", "the row's counts over elapsed_s");
}

#[test]
fn row_removed_is_refused() {
    let (_t, out) = copy();
    edit_receipt(&out, "ref", "mixed.ref.json", |r| {
        r.runs.pop();
        r.completion.completed_run_count = 1;
    });
    refused(
        &out,
        "ref",
        "/runs lacks measure-c003-r000 (1 of 2 rows) and /completion/failures records no reason",
    );
    // The same row removed together with its size: the other profile's sweep disagrees.
    let (_t, out) = copy();
    edit_receipt(&out, "ref", "mixed.ref.json", |r| {
        r.runs.pop();
        r.workload.sizes = vec![1];
        r.workload_fingerprint = qual_campaign::campaign::workload_fingerprint(&r.workload);
        r.completion.expected_run_count = 1;
        r.completion.completed_run_count = 1;
    });
    refused(&out, "ref", "the campaign-wide workload differs from");
}

#[test]
fn profile_removed_is_refused() {
    let (_t, out) = copy();
    edit_summary(&out, "ref", |s| {
        s.profiles.retain(|l| l.profile.name() != "mixed");
    });
    refused(
        &out,
        "ref",
        "mixed.ref.json: a receipt file of engine \"ref\" that the summary",
    );
}

#[test]
fn memory_peak_lowered_is_refused() {
    let (_t, out) = copy();
    edit_receipt(&out, "lowmem", "greedy-short.lowmem.json", |r| {
        for row in &mut r.runs {
            if let Some(m) = &mut row.memory {
                m.peak_bytes = 4000;
            }
            for g in &mut row.gates {
                if g.name == "absolute_memory_limit" {
                    g.outcome = Verdict::Passed;
                }
            }
        }
        flip_to_passed(r);
    });
    refused(&out, "lowmem", "memory/peak_delta_bytes is ");
    refused(&out, "lowmem", "(absolute_memory_limit): detail is \"peak ");
}

#[test]
fn output_hash_swapped_is_refused() {
    let (_t, out) = copy();
    let reference = read_receipt(&fixture().join("out/greedy-short.ref.json"));
    edit_receipt(&out, "cand", "greedy-short.cand.json", |r| {
        for (row, ref_row) in r.runs.iter_mut().zip(&reference.runs) {
            for (o, x) in row.outputs.iter_mut().zip(&ref_row.outputs) {
                o.output_sha256 = x.output_sha256.clone();
                o.content_sha256 = x.content_sha256.clone();
                o.content_utf8_bytes = x.content_utf8_bytes;
                o.exact_output = None;
            }
            row.output_set_sha256 = qual_campaign::row::output_set_sha256(&row.outputs);
        }
        let path = Path::new(&r.comparison.as_ref().unwrap().reference_receipt).to_path_buf();
        let role = qual_campaign::pairing::ReferenceRole::QualificationGate;
        r.comparison = Some(qual_campaign::pairing::compare(r, &path, role).unwrap());
    });
    refused(
        &out,
        "cand",
        "/runs/0/outputs/0/exact_output: missing in \"full\" evidence mode",
    );
}

#[test]
fn reference_pairing_swapped_is_refused() {
    let (t, out) = copy();
    // A "reference" that is the candidate's own receipt under the reference's name.
    let fake = t.path().join("fake");
    std::fs::create_dir(&fake).unwrap();
    let fake_ref = fake.join("greedy-short.ref.json");
    std::fs::copy(out.join("greedy-short.cand.json"), &fake_ref).unwrap();
    edit_receipt(&out, "cand", "greedy-short.cand.json", |r| {
        let role = qual_campaign::pairing::ReferenceRole::QualificationGate;
        r.comparison = Some(qual_campaign::pairing::compare(r, &fake_ref, role).unwrap());
        assert_eq!(
            r.comparison.as_ref().unwrap().result,
            records::Match::Matched
        );
    });
    refused(
        &out,
        "cand",
        "/comparison pairs engine \"cand\" with a receipt of the same engine",
    );
    refused(&out, "cand", "is outside the summary's reference_dir");
    refused(
        &out,
        "cand",
        "is not listed with these bytes by a valid reference campaign summary",
    );
}

/// Signs the summary of `engine` in `out` with `key` through `receipt sign`.
fn sign(out: &Path, engine: &str, key: &Path) {
    let summary = out.join(records::summary_name(engine));
    let (code, text) = run(
        out.parent().unwrap(),
        &[
            "receipt",
            "sign",
            summary.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{text}");
}

#[test]
fn signed_campaigns_verify_and_a_consistent_forgery_is_caught_only_by_the_signature() {
    let keys = tempfile::tempdir().unwrap();
    let (key, pubkey, fingerprint) = common::ssh_keygen(keys.path(), "campaign-signer");
    let (_, other, _) = common::ssh_keygen(keys.path(), "someone-else");
    let pubkey = pubkey.to_str().unwrap();
    let (t, out) = copy();
    sign(&out, "ref", &key);
    let (code, text) = run(
        t.path(),
        &[
            "campaign",
            "verify",
            "--engine",
            "ref",
            "out",
            "--trusted-keys",
            pubkey,
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!(
            "campaign.ref.json.intoto.jsonl signed by {fingerprint}"
        )),
        "{text}"
    );
    let (code, text) = run(
        t.path(),
        &[
            "report",
            "out/campaign.ref.json",
            "--trusted-keys",
            pubkey,
            "--markdown",
            "r.md",
        ],
    );
    assert_eq!(code, 0, "{text}");
    let md = std::fs::read_to_string(t.path().join("r.md")).unwrap();
    assert!(
        md.contains(&format!("signed by {fingerprint} (campaign-signer)")),
        "{md}"
    );
    // Another key does not vouch for it.
    let (code, text) = run(
        t.path(),
        &[
            "campaign",
            "verify",
            "--engine",
            "ref",
            "out",
            "--trusted-keys",
            other.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("no signature verifies with a trusted key"),
        "{text}"
    );

    // A forgery consistent in every number the row records: the peak lowered to the baseline
    // (or, where the host measured no growth at all, raised by 1 MiB, still far under the
    // 1 TiB limit) with its delta and its gate detail. Nothing in the file contradicts it, so
    // without keys it verifies (what a self-hash and recomputation cannot establish); the
    // signature refuses it. The edit must change every row, or the test would prove nothing.
    edit_receipt(&out, "ref", "greedy-short.ref.json", |r| {
        for row in &mut r.runs {
            let m = row.memory.as_mut().unwrap();
            let old = m.peak_bytes;
            m.peak_bytes = if old > m.baseline_bytes {
                m.baseline_bytes
            } else {
                old + (1 << 20)
            };
            assert_ne!(m.peak_bytes, old);
            m.peak_delta_bytes = m.peak_bytes.saturating_sub(m.baseline_bytes);
            for g in &mut row.gates {
                if g.name == "absolute_memory_limit" {
                    g.detail = g
                        .detail
                        .replace(&format!("peak {old} "), &format!("peak {} ", m.peak_bytes));
                }
            }
        }
    });
    verifies(&out, "ref");
    let (code, text) = run(
        t.path(),
        &[
            "campaign",
            "verify",
            "--engine",
            "ref",
            "out",
            "--trusted-keys",
            pubkey,
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("the subject \"campaign.ref.json\" has sha256"),
        "{text}"
    );
    let (code, text) = run(
        t.path(),
        &["report", "out/campaign.ref.json", "--trusted-keys", pubkey],
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("kiln-qual: refused out/campaign.ref.json"),
        "{text}"
    );

    // A profile removed together with its receipt file: only the signed subjects know it.
    let (t, out) = copy();
    sign(&out, "ref", &key);
    std::fs::remove_file(out.join("mixed.ref.json")).unwrap();
    edit_summary(&out, "ref", |s| {
        s.profiles.retain(|l| l.profile.name() != "mixed");
    });
    verifies(&out, "ref");
    let (code, text) = run(
        t.path(),
        &[
            "campaign",
            "verify",
            "--engine",
            "ref",
            "out",
            "--trusted-keys",
            pubkey,
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("the subjects are"), "{text}");
}

#[test]
fn an_independent_dsse_implementation_verifies_our_campaign_attestation_and_we_verify_its() {
    let Some(python) = common::interop_python() else {
        return;
    };
    let script = common::repo_root().join("tools/dsse_interop.py");
    let keys = tempfile::tempdir().unwrap();
    let (key, pubkey, fingerprint) = common::ssh_keygen(keys.path(), "interop");
    let (t, out) = copy();
    let summary = out.join("campaign.cand.json");
    let envelope = qual_attest::envelope_path(&summary);
    sign(&out, "cand", &key);
    let res = std::process::Command::new(&python)
        .arg(&script)
        .arg("verify-campaign")
        .args([&envelope, &pubkey])
        .arg(&fingerprint)
        .arg(&summary)
        .output()
        .unwrap();
    assert!(
        res.status.success(),
        "securesystemslib refused our envelope: {res:?}"
    );
    // The summary and every receipt it lists.
    let listed = read_summary(&out, "cand")
        .profiles
        .iter()
        .filter(|l| l.receipt.is_some())
        .count();
    assert!(
        String::from_utf8_lossy(&res.stdout).contains(&format!("{} subjects", listed + 1)),
        "{res:?}"
    );

    std::fs::remove_file(&envelope).unwrap();
    let res = std::process::Command::new(&python)
        .arg(&script)
        .arg("sign-campaign")
        .arg(&summary)
        .arg(&key)
        .arg(&fingerprint)
        .arg(&envelope)
        .output()
        .unwrap();
    assert!(
        res.status.success(),
        "securesystemslib failed to sign: {res:?}"
    );
    let (code, text) = run(
        t.path(),
        &[
            "campaign",
            "verify",
            "--engine",
            "cand",
            "out",
            "--trusted-keys",
            pubkey.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "we refused securesystemslib's envelope: {text}");
    assert!(text.contains(&format!("signed by {fingerprint}")), "{text}");
}
