//! The paired campaign on real engines: the candidate is Debian's `llama-server`
//! (`scripts/setup-real-server`) serving SmolLM2-135M Q4_1; the reference is the repository's
//! own transformers server (`tools/reference/server.py` in `.cache/venv-reference`, built by
//! `scripts/setup-reference-python`) serving the same GGUF, dequantized. Two profiles, sizes 1
//! and 4, 8 output tokens; the reference campaign runs first, the candidate is paired with
//! it. Whether the two engines' greedy bytes agree is a finding, not the test's business: the
//! test asserts the evidence is complete and consistent — both summaries verify, every row
//! has at least two memory samples, every receipt is paired (or says why not), and every
//! output mismatch carries the first divergent byte. Loud skip without either engine (a
//! failure under `CI=true`).

use qual_campaign::campaign::{self, CampaignOptions, ServerSpec};
use qual_campaign::memory::SourceRequest;
use qual_campaign::pairing::{self, ReferenceRole};
use qual_campaign::profiles::Profile;
use qual_campaign::records::{ExecutionPolicy, Mismatch, SloBounds, Verdict};
use qual_campaign::row::EvidenceMode;
use qual_campaign::{manifest, verify};
use qual_test_fixtures::harness::{self, Trial};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn root() -> PathBuf {
    std::fs::canonicalize(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap()
}

fn options(engine: &str, launch: &str, out: &Path) -> CampaignOptions {
    let root = root();
    CampaignOptions {
        engine: engine.into(),
        server: ServerSpec::Owned {
            launch: root.join(launch),
            base_url: None,
        },
        model: Some("smollm2".into()),
        model_path: Some(root.join(".cache/real-server/root/models/smollm2")),
        campaign_id: "ci-pair".into(),
        prompt_set_id: "ci-pair-prompts".into(),
        profiles: vec![Profile::GreedyShort, Profile::ApiDefaultSampled],
        sizes: vec![1, 4],
        repeats: 1,
        max_tokens: 8,
        warmup: 1,
        seed: 17,
        slo: SloBounds {
            ttft_ms: 60_000.0,
            client_visible_itl_ms: 10_000.0,
            e2e_ms: 120_000.0,
        },
        max_dispatch_spread_ms: 250.0,
        memory_limit_bytes: 8 << 30,
        memory: SourceRequest::ProcessTree,
        memory_interval_ms: 20,
        metrics_path: Some("/metrics".into()),
        evidence: EvidenceMode::Full,
        policy: ExecutionPolicy::ContinueAfterFailure,
        out_dir: out.to_path_buf(),
        reference_dir: None,
        reference_engine: None,
        reference_role: ReferenceRole::QualificationGate,
        runtime_artifacts: Vec::new(),
        runtime_manifest: None,
        request_timeout: Duration::from_secs(300),
        tokenize_path: Some("/tokenize".into()),
        context_tokens: Some(2048),
    }
}

fn candidate_and_reference_pair() {
    let root = root();
    let out = tempfile::tempdir().unwrap();
    let out = out.path();
    // The reference runtime's manifest, captured twice (byte-identical) before traffic.
    let env = [("OMP_NUM_THREADS".to_string(), "1".to_string())].into();
    let (m, bytes) =
        manifest::capture(&root.join(".cache/venv-reference/bin/python"), &env).unwrap();
    assert!(m.distributions.iter().any(|d| d.name == "torch"));
    let manifest_path = out.join("reference.runtime-manifest.json");
    std::fs::write(&manifest_path, bytes).unwrap();

    let mut r = options(
        "reference",
        "qualification/serving/reference/launch-smollm2.json",
        out,
    );
    r.runtime_manifest = Some(manifest_path);
    let reference = campaign::run(&r).unwrap();
    eprintln!("reference verdict: {:?}", reference.summary.verdict);

    let mut c = options(
        "llama-server",
        "qualification/serving/llama-cpp/launch-smollm2-campaign.json",
        out,
    );
    c.runtime_artifacts = vec![root.join(".cache/real-server/root/usr/bin/llama-server")];
    c.reference_dir = Some(out.to_path_buf());
    c.reference_engine = Some("reference".into());
    let candidate = campaign::run(&c).unwrap();
    eprintln!("candidate verdict: {:?}", candidate.summary.verdict);

    for engine in ["reference", "llama-server"] {
        let rep = verify::verify(out, Some(engine));
        assert!(rep.findings.is_empty(), "{engine}: {:?}", rep.findings);
        assert_eq!(rep.receipts.len(), 2);
        for p in &rep.receipts {
            let (_, rec) = pairing::read_receipt(p).unwrap();
            // The engines ran: every expected row is present, each with memory evidence.
            assert!(
                rec.completion
                    .failures
                    .iter()
                    .all(|f| f.phase == "reference_comparison"),
                "{engine}: {:?}",
                rec.completion.failures
            );
            assert_eq!(rec.runs.len(), 2, "{engine}");
            for row in &rec.runs {
                let mem = row.memory.expect("memory measured");
                assert!(mem.samples >= 2, "{engine}: {mem:?}");
                assert_eq!(
                    row.success_count, row.request_count,
                    "{engine}: {:?}",
                    row.errors
                );
            }
            assert_eq!(rec.memory_sampler.source, "process_tree_pss");
        }
    }
    // Every candidate receipt is paired; mismatches (a true finding) carry their bytes.
    for p in &candidate.receipts {
        let (_, rec) = pairing::read_receipt(p).unwrap();
        let cmp = rec.comparison.expect("paired with the reference");
        for m in &cmp.mismatches {
            eprintln!("finding: {m:?}");
            match m {
                Mismatch::OutputMismatch {
                    request_mismatches, ..
                } => {
                    for q in request_mismatches {
                        assert!(q.exact_output_compared);
                        assert!(
                            q.content_first_divergent_utf8_byte.is_some()
                                || q.reasoning_first_divergent_utf8_byte.is_some()
                                || q.fields
                                    .iter()
                                    .all(|f| f == "finish_reason" || f == "completion_tokens")
                        );
                    }
                }
                Mismatch::MissingRun { .. } => panic!("a run is missing: {m:?}"),
                Mismatch::PromptMismatch { .. } => panic!("the prompts differ: {m:?}"),
                Mismatch::PromptTokenMismatch { .. } => {}
            }
        }
        let passed = rec.verdict == Verdict::Passed;
        assert_eq!(
            passed,
            rec.runs.iter().all(|r| r.verdict == Verdict::Passed)
                && cmp.result == qual_campaign::records::Match::Matched
                && rec.completion.failures.is_empty()
        );
    }
}

fn main() {
    let root = root();
    harness::run(vec![Trial::new(
        "candidate_and_reference_pair",
        candidate_and_reference_pair,
    )
    .needs(harness::needs_file(
        &root.join(".cache/real-server/llama-server"),
        "llama-server (run scripts/setup-real-server)",
    ))
    .needs(harness::needs_file(
        &root.join(".cache/venv-reference/.requirements-sha256"),
        "the reference Python environment (run scripts/setup-reference-python)",
    ))]);
}
