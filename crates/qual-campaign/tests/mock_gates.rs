//! Campaigns against the real mock HTTP server (`qual-serve`'s mock, in this process): a clean
//! campaign passes, verifies and pairs; one injected fault per gate fails exactly that gate
//! with its name and detail, while the evidence stays consistent (`verify` finds nothing).

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

use qual_campaign::campaign::{self, CampaignOptions, ServerSpec};
use qual_campaign::memory::SourceRequest;
use qual_campaign::pairing::ReferenceRole;
use qual_campaign::profiles::Profile;
use qual_campaign::records::{self, ExecutionPolicy, Receipt, SloBounds, Verdict};
use qual_campaign::row::EvidenceMode;
use qual_campaign::verify;
use qual_serve::mock::MockConfig;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn start_mock(cfg: MockConfig) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        qual_serve::mock::run_blocking(cfg, |p| tx.send(p).unwrap()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap()
}

fn model_dir(root: &Path) -> PathBuf {
    let d = root.join("model");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("m.gguf"), b"GGUF-not-really").unwrap();
    std::fs::write(d.join("config.json"), b"{}").unwrap();
    std::fs::write(d.join("tokenizer.json"), b"{}").unwrap();
    d
}

fn options(port: u16, out: &Path, engine: &str, profiles: Vec<Profile>) -> CampaignOptions {
    CampaignOptions {
        engine: engine.into(),
        server: ServerSpec::Attached {
            base_url: format!("http://127.0.0.1:{port}").parse().unwrap(),
            server_pid: Some(std::process::id()),
        },
        model: None,
        model_path: Some(out.parent().unwrap().join("model")),
        campaign_id: "mock-campaign".into(),
        prompt_set_id: "mock-prompts".into(),
        profiles,
        sizes: vec![4],
        repeats: 1,
        max_tokens: 8,
        warmup: 0,
        seed: 17,
        slo: SloBounds {
            ttft_ms: 5000.0,
            client_visible_itl_ms: 250.0,
            e2e_ms: 60000.0,
        },
        max_dispatch_spread_ms: 250.0,
        memory_limit_bytes: 1 << 40,
        memory: SourceRequest::ProcessTree,
        memory_interval_ms: 1,
        metrics_path: None,
        evidence: EvidenceMode::Full,
        policy: ExecutionPolicy::FailFast,
        out_dir: out.to_path_buf(),
        reference_dir: None,
        reference_engine: None,
        reference_role: ReferenceRole::QualificationGate,
        runtime_artifacts: Vec::new(),
        runtime_manifest: None,
        request_timeout: Duration::from_secs(30),
        tokenize_path: None,
        context_tokens: None,
    }
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    model_dir(t.path());
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    (t, out)
}

fn receipt(path: &Path) -> Receipt {
    qual_campaign::pairing::read_receipt(path).unwrap().1
}

/// Runs one greedy-short campaign with `cfg` and `tweak`, and returns its single row's gates
/// after checking that the evidence verifies.
fn failing_gate(
    cfg: MockConfig,
    tweak: impl FnOnce(&mut CampaignOptions),
    gate: &str,
    detail: &str,
) {
    let (_t, out) = setup();
    let port = start_mock(cfg);
    let mut o = options(port, &out, "mock", vec![Profile::GreedyShort]);
    tweak(&mut o);
    let res = campaign::run(&o).unwrap();
    assert_eq!(res.summary.verdict, Verdict::Failed);
    let r = receipt(&res.receipts[0]);
    let row = &r.runs[0];
    assert_eq!(row.verdict, Verdict::Failed);
    let g = row
        .gates
        .iter()
        .find(|g| g.name == gate)
        .unwrap_or_else(|| panic!("no gate {gate}: {:?}", row.gates));
    assert_eq!(g.outcome, Verdict::Failed, "{g:?}");
    assert!(g.detail.contains(detail), "{gate}: {}", g.detail);
    let rep = verify::verify(&out, None);
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
}

#[test]
fn clean_campaign_passes_verifies_and_pairs() {
    let (_t, out) = setup();
    let port = start_mock(MockConfig {
        metrics: true,
        ..MockConfig::default()
    });
    let mut o = options(
        port,
        &out,
        "mock-ref",
        vec![Profile::GreedyShort, Profile::Mixed],
    );
    o.sizes = vec![1, 4];
    o.warmup = 1;
    o.metrics_path = Some("/metrics".into());
    let reference = campaign::run(&o).unwrap();
    assert_eq!(
        reference.summary.verdict,
        Verdict::Passed,
        "{:?}",
        reference.summary
    );
    assert!(verify::verify(&out, Some("mock-ref")).findings.is_empty());
    for p in &reference.receipts {
        let r = receipt(p);
        assert_eq!(r.runs.len(), 2);
        for row in &r.runs {
            assert!(row.memory.unwrap().samples >= 2);
            assert!(row
                .gates
                .iter()
                .any(|g| g.name == "server_request_accounting"));
            assert_eq!(
                row.outputs[0].exact_output.as_ref().unwrap().content,
                "tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 "
            );
        }
    }
    // A second engine paired with the first: same prompts, tokens and outputs → matched.
    o.engine = "mock-cand".into();
    o.reference_dir = Some(out.clone());
    o.reference_engine = Some("mock-ref".into());
    let cand = campaign::run(&o).unwrap();
    assert_eq!(cand.summary.verdict, Verdict::Passed);
    let r = receipt(&cand.receipts[0]);
    assert_eq!(r.comparison.unwrap().result, records::Match::Matched);
    assert!(verify::verify(&out, Some("mock-cand")).findings.is_empty());
    // No clobbering: the same campaign again is refused before traffic.
    let again = campaign::run(&o).unwrap_err().to_string();
    assert!(again.contains("already exists"), "{again}");
}

#[test]
fn output_divergence_is_located_to_the_byte() {
    let (_t, out) = setup();
    let port = start_mock(MockConfig::default());
    let o = options(port, &out, "mock-ref", vec![Profile::GreedyShort]);
    let reference = campaign::run(&o).unwrap();
    // Rewrite the reference's exact output of request 2 (a different engine's text) and
    // re-hash it: the candidate must report the first divergent byte.
    let path = &reference.receipts[0];
    let mut r = receipt(path);
    let ev = &mut r.runs[0].outputs[2];
    let x = ev.exact_output.as_mut().unwrap();
    x.content = x.content.replacen("tok3", "tok9", 1);
    let mut joined = vec![0x1e];
    joined.extend_from_slice(x.content.as_bytes());
    ev.output_sha256 = qual_json::sha256_prefixed(&joined);
    ev.content_sha256 = qual_json::sha256_prefixed(x.content.as_bytes());
    r.runs[0].output_set_sha256 = qual_campaign::row::output_set_sha256(&r.runs[0].outputs);
    r.receipt_sha256 = records::self_hash(&r, "receipt_sha256");
    let refdir = out.join("ref");
    std::fs::create_dir(&refdir).unwrap();
    std::fs::write(
        refdir.join("greedy-short.mock-ref.json"),
        records::to_file_bytes(&r),
    )
    .unwrap();
    let mut o = options(port, &out, "mock-cand", vec![Profile::GreedyShort]);
    o.reference_dir = Some(refdir);
    o.reference_engine = Some("mock-ref".into());
    let cand = campaign::run(&o).unwrap();
    assert_eq!(cand.summary.verdict, Verdict::Failed);
    let c = receipt(&cand.receipts[0]).comparison.unwrap();
    assert_eq!(c.result, records::Match::Mismatched);
    match &c.mismatches[..] {
        [records::Mismatch::OutputMismatch {
            mismatched_request_indices,
            request_mismatches,
            ..
        }] => {
            assert_eq!(mismatched_request_indices, &[2]);
            assert_eq!(
                request_mismatches[0].content_first_divergent_utf8_byte,
                Some(18)
            );
            assert!(request_mismatches[0].exact_output_compared);
        }
        m => panic!("{m:?}"),
    }
    // The edited reference stands alone, without a campaign summary listing it: verify
    // names exactly that, and nothing else.
    let findings = verify::verify(&out, Some("mock-cand")).findings;
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(
        findings[0]
            .contains("is not listed with these bytes by a valid reference campaign summary"),
        "{findings:?}"
    );
}

#[test]
fn gate_all_requests_succeeded() {
    failing_gate(
        MockConfig {
            http_500_every: Some(2),
            ..MockConfig::default()
        },
        |_| {},
        "all_requests_succeeded",
        "http status 500",
    );
}

#[test]
fn gate_positive_completion_usage() {
    failing_gate(
        MockConfig {
            usage_completion_tokens: Some(0),
            ..MockConfig::default()
        },
        |_| {},
        "positive_completion_usage",
        "zero prompt or completion tokens",
    );
}

#[test]
fn gate_dispatch_spread() {
    failing_gate(
        MockConfig::default(),
        |o| o.max_dispatch_spread_ms = 0.0,
        "dispatch_spread",
        "(bound 0 ms)",
    );
}

#[test]
fn gate_fixed_output_length() {
    failing_gate(
        MockConfig {
            output_tokens: Some(3),
            ..MockConfig::default()
        },
        |_| {},
        "fixed_output_length",
        "3 tokens, finish \"stop\"",
    );
}

/// A server that sends one content event per request and claims more completion tokens
/// than the client received fails `fixed_output_length` (and `all_requests_succeeded`, naming
/// the claim): a billion tokens (above `max_tokens`), and exactly `max_tokens` = 8 with
/// finish "length" for one 5-byte event (the client accepts at most max(5 bytes, 4 × 1
/// event)). The campaign's own memory stays bounded (VmHWM growth of this process).
#[test]
fn gate_fixed_output_length_refuses_claims_beyond_what_was_received() {
    let hwm_before = qual_exec::procfs::status_bytes(0, "VmHWM").unwrap();
    for (claim, why) in [
        (
            1_000_000_000,
            "usage claims 1000000000 completion tokens, more than the request's max_tokens 8",
        ),
        (
            8,
            "usage claims 8 completion tokens for 5 bytes of text in 1 content events received",
        ),
    ] {
        let cfg = || MockConfig {
            output_tokens: Some(1),
            overrun_max_tokens: true,
            usage_completion_tokens: Some(claim),
            ..MockConfig::default()
        };
        failing_gate(
            cfg(),
            |_| {},
            "fixed_output_length",
            "no request succeeded, so none produced max_tokens = 8 tokens",
        );
        failing_gate(cfg(), |_| {}, "all_requests_succeeded", why);
    }
    let grew = qual_exec::procfs::status_bytes(0, "VmHWM").unwrap() - hwm_before;
    eprintln!("VmHWM grew {grew} bytes");
    // Siblings run in this process too: the bound is loose, a per-claimed-token cost is GBs.
    assert!(grew < 512 << 20, "VmHWM grew {grew} bytes");
}

#[test]
fn gate_uniform_prompt_tokens() {
    failing_gate(
        MockConfig {
            vary_prompt_tokens: true,
            ..MockConfig::default()
        },
        |_| {},
        "uniform_prompt_tokens",
        "exactly one required",
    );
}

#[test]
fn gate_memory_measured() {
    let t = tempfile::tempdir().unwrap();
    let bad = t.path().join("vram");
    std::fs::write(&bad, "not a number").unwrap();
    failing_gate(
        MockConfig::default(),
        move |o| o.memory = SourceRequest::Drm(Some(bad)),
        "memory_measured",
        "sampler failed",
    );
}

#[test]
fn gate_absolute_memory_limit() {
    failing_gate(
        MockConfig::default(),
        |o| o.memory_limit_bytes = 1,
        "absolute_memory_limit",
        "(limit 1 bytes)",
    );
}

#[test]
fn gate_server_metrics_readable() {
    failing_gate(
        MockConfig::default(),
        |o| o.metrics_path = Some("/metrics".into()),
        "server_metrics_readable",
        "answered http 404",
    );
}

#[test]
fn gate_server_request_accounting() {
    failing_gate(
        MockConfig {
            metrics: true,
            metrics_undercount: 1,
            ..MockConfig::default()
        },
        |o| o.metrics_path = Some("/metrics".into()),
        "server_request_accounting",
        "the server reported 3 completed requests, the client saw 4",
    );
}

#[test]
fn tampered_receipts_fail_verification() {
    let (_t, out) = setup();
    let port = start_mock(MockConfig::default());
    let res = campaign::run(&options(port, &out, "mock", vec![Profile::GreedyShort])).unwrap();
    let p = &res.receipts[0];
    let text = std::fs::read_to_string(p).unwrap();
    std::fs::remove_file(p).unwrap();
    std::fs::write(
        p,
        text.replacen("\"success_count\": 4", "\"success_count\": 3", 1),
    )
    .unwrap();
    let f = verify::verify(&out, None).findings;
    assert!(f.iter().any(|m| m.contains("receipt_sha256")), "{f:?}");
}

#[test]
fn prompt_context_preflight_runs_before_traffic() {
    let (_t, out) = setup();
    let port = start_mock(MockConfig::default());
    let mut o = options(port, &out, "mock", vec![Profile::GreedyShort]);
    o.tokenize_path = Some("/tokenize".into());
    o.context_tokens = Some(64);
    let res = campaign::run(&o).unwrap();
    let r = receipt(&res.receipts[0]);
    assert!(r.runs.is_empty());
    assert_eq!(r.completion.failures[0].phase, "prompt_context");
    assert!(r.completion.failures[0]
        .detail
        .contains("answered http 404"));
    assert!(verify::verify(&out, None).findings.is_empty());
}

#[test]
fn fail_fast_blocks_later_profiles_and_continue_runs_them() {
    let (_t, out) = setup();
    let port = start_mock(MockConfig {
        http_500_every: Some(3),
        ..MockConfig::default()
    });
    let o = options(port, &out, "ff", vec![Profile::GreedyShort, Profile::Mixed]);
    let res = campaign::run(&o).unwrap();
    let lines = &res.summary.profiles;
    assert_eq!(lines[0].verdict, Some(Verdict::Failed));
    assert_eq!(lines[1].status, records::ProfileStatus::NotRunAfterFailure);
    assert_eq!(lines[1].blocked_by_profile, Some(Profile::GreedyShort));
    assert_eq!(res.receipts.len(), 1);
    assert!(verify::verify(&out, Some("ff")).findings.is_empty());
    let mut o = options(
        port,
        &out,
        "all",
        vec![Profile::GreedyShort, Profile::Mixed],
    );
    o.policy = ExecutionPolicy::ContinueAfterFailure;
    let res = campaign::run(&o).unwrap();
    assert_eq!(res.receipts.len(), 2);
    assert!(res
        .summary
        .profiles
        .iter()
        .all(|l| l.status == records::ProfileStatus::Completed));
    assert!(verify::verify(&out, Some("all")).findings.is_empty());
}

#[test]
fn unserved_model_and_unstartable_server_are_failed_receipts() {
    let (t, out) = setup();
    let port = start_mock(MockConfig::default());
    let mut o = options(port, &out, "nomodel", vec![Profile::GreedyShort]);
    o.model = Some("other-model".into());
    let res = campaign::run(&o).unwrap();
    let r = receipt(&res.receipts[0]);
    assert!(r.runs.is_empty());
    assert!(r.completion.failures[0].detail.contains("is not served"));
    let recipe = t.path().join("launch.json");
    std::fs::write(
        &recipe,
        serde_json::json!({
            "schema": "kiln-qual.serve-launch.v1",
            "id": "missing-binary",
            "command": ["./no-such-server"],
            "working_directory": ".",
            "port": 1,
            "log_directory": "logs",
            "readiness_poll_interval_ms": 10,
            "startup_timeout_seconds": 1,
            "shutdown_timeout_seconds": 1,
            "acceptable_exit_codes": [0],
        })
        .to_string(),
    )
    .unwrap();
    let mut o = options(port, &out, "nostart", vec![Profile::GreedyShort]);
    o.server = ServerSpec::Owned {
        launch: recipe,
        base_url: None,
    };
    let res = campaign::run(&o).unwrap();
    assert_eq!(res.summary.verdict, Verdict::Failed);
    let r = receipt(&res.receipts[0]);
    assert_eq!(r.completion.failures[0].phase, "server_startup");
    assert_eq!(
        r.completion.finalization_checks["server_shutdown"],
        records::CheckStatus::Failed
    );
    assert!(verify::verify(&out, Some("nostart")).findings.is_empty());
}
