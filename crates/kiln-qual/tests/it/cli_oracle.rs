//! `kiln-qual oracle compare` and `oracle check` on constructed tensors (real files, the real
//! binary): a safetensors reference against a `.npy` candidate within and beyond declared
//! tolerances, a NaN and a shape mismatch refused with their place, token ids bound, the
//! result document validated by `oracle check` and broken by any edit.

use assert_cmd::Command;
use std::path::Path;

fn npy(path: &Path, shape: &[usize], data: &[f32]) {
    std::fs::write(path, qual_oracle_npy(shape, data)).unwrap();
}

/// A version 1.0 `.npy` file (written here independently of the crate under test).
fn qual_oracle_npy(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let dims = if shape.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut h = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {dims}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn rows(positions: usize, vocab: usize, f: impl Fn(usize, usize) -> f32) -> Vec<f32> {
    (0..positions * vocab)
        .map(|i| f(i / vocab, i % vocab))
        .collect()
}

fn kq() -> Command {
    Command::cargo_bin("kiln-qual").unwrap()
}

fn tolerances(dir: &Path, max_abs: f64) -> std::path::PathBuf {
    let p = dir.join(format!("tol-{max_abs}.json"));
    std::fs::write(
        &p,
        format!(
            r#"{{"schema": "kiln-qual.oracle-tolerances.v1", "tolerances": {{"min_argmax_agreement": 1.0, "min_top_k_overlap": 9, "max_abs_error": {max_abs}, "min_cosine": 0.999, "max_kl_divergence": 0.01}}}}"#
        ),
    )
    .unwrap();
    p
}

#[test]
fn compare_within_and_beyond_tolerances_and_check_the_result() {
    let d = tempfile::tempdir().unwrap();
    let (p, v) = (4, 1000);
    // Distinct values per row (7919 is prime to 1000), 0.01 apart; offsets of 0.001 reorder none.
    let r = rows(p, v, |i, j| ((j * 7919 + i * 11) % 1000) as f32 * 0.01);
    let c: Vec<f32> = r
        .iter()
        .enumerate()
        .map(|(k, x)| x + if k % 3 == 0 { 0.001 } else { 0.0 })
        .collect();
    npy(&d.path().join("ref.npy"), &[p, v], &r);
    npy(&d.path().join("cand.npy"), &[p, v], &c);
    let out = d.path().join("result.json");
    let ok = kq()
        .args(["oracle", "compare"])
        .arg(d.path().join("ref.npy"))
        .arg(d.path().join("cand.npy"))
        .arg("--tolerances")
        .arg(tolerances(d.path(), 0.02))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&ok.stderr);
    assert_eq!(ok.status.code(), Some(0), "{err}");
    assert!(err.contains("argmax agreement      4/4"), "{err}");
    assert!(err.contains("verdict: passed"), "{err}");
    // Never overwritten.
    let again = kq()
        .args(["oracle", "compare"])
        .arg(d.path().join("ref.npy"))
        .arg(d.path().join("cand.npy"))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    // The result validates, with its inputs re-read.
    let chk = kq()
        .args(["oracle", "check", "--verify-inputs"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&chk.stdout);
    assert_eq!(
        chk.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&chk.stderr)
    );
    assert!(
        stdout.starts_with("OK ") && stdout.contains(" kiln-qual.oracle-result.v1 sha256:"),
        "{stdout}"
    );
    // An edited bound field breaks the self-hash.
    let text = std::fs::read_to_string(&out).unwrap();
    let edited = d.path().join("edited.json");
    std::fs::write(&edited, text.replacen("\"top_k\": 10", "\"top_k\": 9", 1)).unwrap();
    let bad = kq()
        .args(["oracle", "check"])
        .arg(&edited)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/result_sha256"));
    // A changed input is caught by --verify-inputs.
    npy(&d.path().join("cand.npy"), &[p, v], &r);
    let moved = kq()
        .args(["oracle", "check", "--verify-inputs"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(moved.status.code(), Some(1));
    // Identical tensors are within a zero bound; the offset candidate is not.
    let same = kq()
        .args(["oracle", "compare"])
        .arg(d.path().join("ref.npy"))
        .arg(d.path().join("cand.npy"))
        .arg("--tolerances")
        .arg(tolerances(d.path(), 0.0))
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0));
    npy(&d.path().join("off.npy"), &[p, v], &c);
    let fail = kq()
        .args(["oracle", "compare"])
        .arg(d.path().join("ref.npy"))
        .arg(d.path().join("off.npy"))
        .arg("--tolerances")
        .arg(tolerances(d.path(), 0.0005))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&fail.stderr);
    assert_eq!(fail.status.code(), Some(1), "{e}");
    assert!(e.contains("is above max_abs_error 0.0005"), "{e}");
    assert!(e.contains("verdict: failed"), "{e}");
}

#[test]
fn nan_shape_and_token_ids_are_refused_with_a_reason() {
    let d = tempfile::tempdir().unwrap();
    let r = rows(2, 50, |i, j| (i + j) as f32);
    let mut c = r.clone();
    c[57] = f32::NAN;
    npy(&d.path().join("ref.npy"), &[2, 50], &r);
    npy(&d.path().join("nan.npy"), &[2, 50], &c);
    npy(&d.path().join("short.npy"), &[2, 49], &r[..98]);
    let run = |cand: &str, extra: &[&str]| {
        kq().args(["oracle", "compare"])
            .arg(d.path().join("ref.npy"))
            .arg(d.path().join(cand))
            .args(extra)
            .output()
            .unwrap()
    };
    let nan = run("nan.npy", &[]);
    assert_eq!(nan.status.code(), Some(1));
    let e = String::from_utf8_lossy(&nan.stderr);
    assert!(
        e.contains("non-finite Candidate value NaN at position 1, index 7"),
        "{e}"
    );
    let short = run("short.npy", &[]);
    assert!(String::from_utf8_lossy(&short.stderr).contains("shape mismatch"));
    std::fs::write(d.path().join("ids.json"), "[1, 2, 3]").unwrap();
    let ids = d.path().join("ids.json");
    let tol = tolerances(d.path(), 0.0);
    let ok = run(
        "ref.npy",
        &[
            "--token-ids",
            ids.to_str().unwrap(),
            "--tolerances",
            tol.to_str().unwrap(),
        ],
    );
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

/// Hostile inputs: unrelated logits without tolerances (none, or `{}`) are `compared`, never
/// `passed`; fewer `--token-ids` than positions and a safetensors header naming `logits`
/// twice are refused by name.
#[test]
fn no_tolerances_short_token_ids_and_duplicate_header_keys() {
    let d = tempfile::tempdir().unwrap();
    npy(
        &d.path().join("ref.npy"),
        &[2, 50],
        &rows(2, 50, |i, j| (i + j) as f32),
    );
    npy(
        &d.path().join("other.npy"),
        &[2, 50],
        &rows(2, 50, |i, j| ((i * 7 + j * 13) % 11) as f32),
    );
    let empty = d.path().join("empty.json");
    std::fs::write(
        &empty,
        r#"{"schema": "kiln-qual.oracle-tolerances.v1", "tolerances": {}}"#,
    )
    .unwrap();
    let run = |cand: &Path, extra: &[&std::ffi::OsStr]| {
        kq().args(["oracle", "compare"])
            .arg(d.path().join("ref.npy"))
            .arg(cand)
            .args(extra)
            .output()
            .unwrap()
    };
    let other = d.path().join("other.npy");
    for extra in [vec![], vec!["--tolerances".as_ref(), empty.as_os_str()]] {
        let o = run(&other, &extra);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(!e.contains("verdict: passed"), "{e}");
        assert!(
            e.contains("verdict: compared (no tolerance declared: nothing was checked)"),
            "{e}"
        );
    }
    let ids = d.path().join("one.json");
    std::fs::write(&ids, "[1]").unwrap();
    let o = run(
        &d.path().join("ref.npy"),
        &["--token-ids".as_ref(), ids.as_os_str()],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("1 input token ids for 2 logit positions"), "{e}");
    // Two `logits` entries in one header (the safetensors crate alone keeps the last).
    let entry = |shape: &str| {
        format!(r#""logits":{{"dtype":"F32","shape":{shape},"data_offsets":[0,400]}}"#)
    };
    let header = format!("{{{},{}}}", entry("[100]"), entry("[2,50]"));
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    for v in rows(2, 50, |i, j| (i + j) as f32) {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let dup = d.path().join("dup.safetensors");
    std::fs::write(&dup, b).unwrap();
    let o = run(&dup, &[]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("as safetensors: header: duplicate"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn check_refuses_unknown_schemas_and_non_regular_files() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.json");
    std::fs::write(&p, r#"{"schema": "kiln.unknown.v1"}"#).unwrap();
    let o = kq().args(["oracle", "check"]).arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unsupported oracle-result schema"));
    let o = kq()
        .args(["oracle", "check"])
        .arg(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
}

/// A greedy result as `oracle greedy` writes it, built from per-prompt tokens and reference
/// argmaxes (a 10-token vocabulary).
fn greedy_result(path: &Path, prompts: &[(&str, &[u32], &[u32])]) {
    use qual_oracle::result::{CaseOutcome, CaseRecord, GreedyTrace, TensorRef, View};
    let cases = prompts
        .iter()
        .map(|(id, tokens, argmax)| {
            let rows: Vec<Vec<f32>> = argmax
                .iter()
                .map(|&a| (0..10).map(|i| if i == a { 5.0 } else { 0.0 }).collect())
                .collect();
            let r = qual_oracle::tensor::Logits::from_rows(&rows).unwrap();
            let positions = qual_oracle::compare::compare(&r, &r, 2).unwrap();
            let summary = qual_oracle::compare::summarize(&positions, 10, 2).unwrap();
            let t = TensorRef {
                source: format!("engine {id}"),
                format: qual_oracle::tensor::TensorFormat::Memory,
                file_sha256: None,
                bytes: None,
                shape: [argmax.len(), 10],
                view: View::Full,
            };
            CaseRecord {
                id: id.to_string(),
                reference: t.clone(),
                candidate: t,
                input_token_ids_sha256: None,
                input_token_count: None,
                outcome: CaseOutcome::Compared {
                    checks: Vec::new(),
                    summary,
                    positions,
                },
                divergence: None,
                greedy: Some(GreedyTrace {
                    prompt_token_ids_sha256: qual_oracle::result::token_ids_digest(&[1, 2, 3]),
                    prompt_token_count: 3,
                    tokens: tokens.to_vec(),
                    texts: tokens.iter().map(|t| format!("t{t}")).collect(),
                    reference_argmax: argmax.to_vec(),
                }),
            }
        })
        .collect();
    let (doc, _) = qual_oracle::result::build("test", 2, Default::default(), cases);
    qual_oracle::result::write_new(path, &doc).unwrap();
}

#[test]
fn attribute_two_greedy_results_and_check_the_attribution() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.json"), d.path().join("b.json"));
    greedy_result(
        &a,
        &[
            ("capital", &[5, 6, 7, 1], &[5, 6, 7, 1]),
            ("story", &[1, 2], &[1, 2]),
            ("near-tie", &[3, 4], &[3, 9]),
        ],
    );
    greedy_result(
        &b,
        &[
            ("capital", &[5, 6, 8, 2], &[5, 6, 7, 3]),
            ("story", &[1, 2], &[1, 2]),
            ("near-tie", &[3, 9], &[3, 9]),
            ("only-b", &[1], &[1]),
        ],
    );
    let out = d.path().join("attr.json");
    let o = kq()
        .args(["oracle", "attribute"])
        .arg(&a)
        .arg(&b)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("prompt capital: step 2: A 7 \"t7\", B 8 \"t8\", reference argmax 7 \"t7\" -> candidate_a"),
        "{err}"
    );
    assert!(
        err.contains("prompt story: identical over 2 steps"),
        "{err}"
    );
    assert!(err.contains("prompt near-tie: step 1: A 4 \"t4\", B 9 \"t9\", reference argmax 9 \"t9\" -> candidate_b"), "{err}");
    assert!(err.contains("prompt only-b: refused"), "{err}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(doc["schema"], "kiln-qual.oracle-attribution.v1");
    assert_eq!(
        doc["counts"],
        serde_json::json!({"candidate_a": 1, "candidate_b": 1, "neither": 0, "identical": 1, "refused": 1})
    );
    // Valid under `oracle check`, with the sources re-read.
    let ok = kq()
        .args(["oracle", "check", "--verify-inputs"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("kiln-qual.oracle-attribution.v1"));
    // The output is never replaced.
    kq().args(["oracle", "attribute"])
        .arg(&a)
        .arg(&b)
        .arg("--output")
        .arg(&out)
        .assert()
        .code(1);
    // A flipped verdict with a recomputed self-hash is still caught; an edit breaks the hash.
    let mut bad = doc.clone();
    bad["prompts"][0]["outcome"]["attribution"] = "candidate_b".into();
    bad["counts"]["candidate_a"] = 0.into();
    bad["counts"]["candidate_b"] = 2.into();
    let bad_path = d.path().join("bad.json");
    std::fs::write(&bad_path, serde_json::to_vec(&bad).unwrap()).unwrap();
    let e = kq()
        .args(["oracle", "check"])
        .arg(&bad_path)
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&e.stderr).contains("/result_sha256"));
    let v = qual_json::Value::from_serde(&bad);
    bad["result_sha256"] = qual_json::self_digest(&v, "result_sha256").unwrap().into();
    let rehashed = d.path().join("rehashed.json");
    std::fs::write(&rehashed, serde_json::to_vec(&bad).unwrap()).unwrap();
    let e = kq()
        .args(["oracle", "check"])
        .arg(&rehashed)
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(1));
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(
        err.contains("/prompts/0/outcome/attribution: does not follow"),
        "{err}"
    );
    // A source that is not a valid greedy result is refused.
    std::fs::write(d.path().join("junk.json"), b"{\"schema\": \"x\"}").unwrap();
    let e = kq()
        .args(["oracle", "attribute"])
        .arg(d.path().join("junk.json"))
        .arg(&b)
        .arg("--output")
        .arg(d.path().join("never.json"))
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(1));
    assert!(!d.path().join("never.json").exists());
}

/// Re-points case 0's candidate at `tensor` (digest and size updated) and recomputes the
/// result's self-hash, as a forger would.
fn repoint(result: &Path, tensor: &Path, out: &Path) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(result).unwrap()).unwrap();
    let bytes = std::fs::read(tensor).unwrap();
    let c = &mut v["cases"][0]["candidate"];
    c["source"] = serde_json::json!(tensor.display().to_string());
    c["file_sha256"] = serde_json::json!(qual_json::sha256_prefixed(&bytes));
    c["bytes"] = serde_json::json!(bytes.len());
    let digest =
        qual_json::self_digest(&qual_json::Value::from_serde(&v), "result_sha256").unwrap();
    v["result_sha256"] = serde_json::json!(digest);
    let mut text = serde_json::to_vec_pretty(&v).unwrap();
    text.push(b'\n');
    std::fs::write(out, text).unwrap();
}

#[test]
fn a_result_repointed_at_an_unrelated_tensor_is_refused_and_a_signed_result_verifies() {
    let d = tempfile::tempdir().unwrap();
    let (p, v) = (3, 200);
    let r = rows(p, v, |i, j| ((j * 7919 + i * 11) % 200) as f32 * 0.01);
    npy(&d.path().join("ref.npy"), &[p, v], &r);
    npy(&d.path().join("cand.npy"), &[p, v], &r);
    // Unrelated logits of the same shape: another ordering entirely.
    let other = rows(p, v, |i, j| ((j * 31 + i * 7) % 200) as f32 * 0.5);
    npy(&d.path().join("other.npy"), &[p, v], &other);
    let out = d.path().join("result.json");
    let ok = kq()
        .args(["oracle", "compare"])
        .arg(d.path().join("ref.npy"))
        .arg(d.path().join("cand.npy"))
        .arg("--tolerances")
        .arg(tolerances(d.path(), 0.0))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let forged = d.path().join("forged.json");
    repoint(&out, &d.path().join("other.npy"), &forged);
    // The self-hash and the digests agree, so the plain checks and the digest re-read pass...
    let plain = kq()
        .args(["oracle", "check"])
        .arg(&forged)
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(0), "{plain:?}");
    // ...and the recomputation from the re-read tensors refuses it.
    let chk = kq()
        .args(["oracle", "check", "--verify-inputs"])
        .arg(&forged)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&chk.stderr);
    assert_eq!(chk.status.code(), Some(1), "{err}");
    assert!(
        err.contains("/cases/0/outcome: the recorded metrics differ from the comparison recomputed from the re-read tensors (summary differs, first at position 0)"),
        "{err}"
    );

    // Signed: the result and its input digests, verified with the trusted key.
    let keys = tempfile::tempdir().unwrap();
    let (key, pubkey, fingerprint) = crate::common::ssh_keygen(keys.path(), "oracle-signer");
    let sign = kq()
        .args(["receipt", "sign"])
        .arg(&out)
        .arg("--key")
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(sign.status.code(), Some(0), "{sign:?}");
    let chk = kq()
        .args(["oracle", "check", "--verify-inputs", "--trusted-keys"])
        .arg(&pubkey)
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&chk.stdout);
    assert_eq!(chk.status.code(), Some(0), "{chk:?}");
    assert!(text.contains(&format!("signed by {fingerprint}")), "{text}");
    // The forged result under the signed one's attestation: refused by the signature.
    std::fs::copy(
        qual_attest::envelope_path(&out),
        qual_attest::envelope_path(&forged),
    )
    .unwrap();
    let chk = kq()
        .args(["oracle", "check", "--trusted-keys"])
        .arg(&pubkey)
        .arg(&forged)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&chk.stderr);
    assert_eq!(chk.status.code(), Some(1), "{err}");
    assert!(err.contains("the subjects are"), "{err}");
}

/// A stand-in for `tools/reference/worker.py` (the real one needs torch and, for CUDA, a GPU,
/// neither of which this test can count on) that reports a run on `device` whatever it was
/// asked: the runner must refuse a report for another device than the one it asked for.
fn lying_worker(dir: &Path, device: &str) -> std::path::PathBuf {
    let p = dir.join(format!("worker-{}.py", device.len()));
    let evidence = format!(
        r#"{{"attention_implementation": "eager", "deterministic_algorithms": True, "device": {device}, "dtype": "float32", "duration_seconds": 0.1, "gguf_version": "0", "max_rss_bytes": 1, "outputs": [], "packages": [], "packages_sha256": "sha256:0", "python_version": "3", "safetensors_version": "0", "schema": "kiln-qual.hf-logits.v1", "seed": 20260715, "threads": 1, "torch_version": "0", "transformers_version": "0", "vocab": 8}}"#
    );
    std::fs::write(
        &p,
        format!("import json\nprint('KILN_QUAL_HF_LOGITS_PASS ' + json.dumps({evidence}, sort_keys=True))\n"),
    )
    .unwrap();
    p
}

#[test]
fn a_worker_report_for_another_device_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let ids = d.path().join("ids.json");
    std::fs::write(&ids, "[1, 2, 3]").unwrap();
    let model = d.path().join("model.gguf");
    std::fs::write(&model, "not read by the stand-in").unwrap();
    for (asked, reported, says) in [
        (
            "cuda",
            r#"{"kind": "cpu"}"#,
            "the worker ran on cpu (TF32 off), not on the cuda asked for",
        ),
        (
            "cpu",
            r#"{"kind": "cuda", "name": "NVIDIA H200", "allow_tf32": True}"#,
            "the worker ran on cuda (TF32 on), not on the cpu asked for",
        ),
        (
            "cuda",
            r#"{"kind": "cuda", "name": "NVIDIA H200", "allow_tf32": True}"#,
            "the worker ran on cuda (TF32 on), not on the cuda asked for",
        ),
    ] {
        let out = d
            .path()
            .join(format!("{asked}-{}.safetensors", reported.len()));
        let a = kq()
            .args([
                "oracle",
                "reference",
                "--python",
                "/usr/bin/python3",
                "--device",
                asked,
            ])
            .arg("--worker")
            .arg(lying_worker(d.path(), reported))
            .arg("--model")
            .arg(&model)
            .arg("--token-ids")
            .arg(&ids)
            .arg("--output")
            .arg(&out)
            .assert()
            .code(1);
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        assert!(err.contains(says), "{asked} / {reported}: {err}");
        assert!(!out.exists());
    }
}
