//! The greedy oracle: a real engine's greedy continuations checked against the reference.
//!
//! Owns the order of operations: launch the engine through `qual-serve`'s owned lifecycle
//! (port check, contained process, readiness, the server's statement of its device when the
//! recipe declares one) → for each prompt (token ids), a greedy
//! completion of N steps with the full next-token distribution at every step
//! ([`crate::llama`]) → owned shutdown with the residue proof → one contained reference worker
//! run that teacher-forces every prompt plus the candidate's own tokens ([`crate::worker`]) →
//! per prompt, the full comparison of the reference's log-softmax with the candidate's
//! log-probabilities at every step, and the first step where the candidate's token is not the
//! reference argmax ([`crate::divergence`]) → the self-hashed result ([`crate::result`]) and a
//! `qualification-case-result-v1` for the runner.
//!
//! Invariant: a step that failed (server, worker, parsing) makes its prompt a `refused` case
//! and the verdict `failed`; nothing is left running when [`run`] returns.

use crate::compare::{compare, log_softmax, summarize};
use crate::divergence::first_divergence;
use crate::llama::{greedy, Distribution, GreedyRun};
use crate::result::{
    self, CaseOutcome, CaseRecord, GreedyTrace, OracleResult, Status, TensorRef, View,
};
use crate::tensor::{read_tensor_file, Logits, TensorFormat};
use crate::tolerance::Tolerances;
use crate::worker::{self, ReferenceEvidence, Sequence, WorkerRequest};
use qual_serve::lifecycle::{LifecycleRecord, OwnedServer};
use qual_serve::recipe::LaunchRecipe;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Schema of a prompt file.
pub const PROMPTS_SCHEMA: &str = "kiln-qual.oracle-prompts.v1";

/// One prompt as token ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    /// Identifier (`^[a-z0-9][a-z0-9_-]{0,63}$`).
    pub id: String,
    /// What the ids say (documentation; not sent).
    pub text: String,
    /// The token ids sent to the engine and the reference.
    pub token_ids: Vec<i64>,
}

/// A prompt file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptFile {
    /// [`PROMPTS_SCHEMA`].
    pub schema: String,
    /// The prompts (unique ids).
    pub prompts: Vec<Prompt>,
}

impl PromptFile {
    /// Shape problems.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.schema != PROMPTS_SCHEMA {
            out.push(format!("schema must be {PROMPTS_SCHEMA:?}"));
        }
        if self.prompts.is_empty() {
            out.push("at least one prompt is needed".into());
        }
        let mut ids = std::collections::BTreeSet::new();
        for (i, p) in self.prompts.iter().enumerate() {
            let ok = !p.id.is_empty()
                && p.id.len() <= 64
                && p.id.bytes().enumerate().all(|(j, b)| {
                    b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || (j > 0 && (b == b'_' || b == b'-'))
                });
            if !ok {
                out.push(format!(
                    "/prompts/{i}/id: must match ^[a-z0-9][a-z0-9_-]{{0,63}}$"
                ));
            }
            if !ids.insert(p.id.clone()) {
                out.push(format!("/prompts/{i}/id: repeats an earlier id"));
            }
            if p.token_ids.is_empty() || p.token_ids.iter().any(|&t| t < 0) {
                out.push(format!(
                    "/prompts/{i}/token_ids: must be non-empty and non-negative"
                ));
            }
        }
        out
    }
}

/// Everything a greedy oracle run needs.
#[derive(Debug, Clone)]
pub struct GreedyOptions {
    /// The engine's launch recipe (model path already applied).
    pub recipe: LaunchRecipe,
    /// Paths the engine must not write.
    pub protect: Vec<PathBuf>,
    /// The prompts.
    pub prompts: Vec<Prompt>,
    /// Greedy steps per prompt.
    pub steps: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Tokens requested per step (`n_probs`): the vocabulary for the full comparison, fewer
    /// for a top-k view ([`crate::topk`]).
    pub n_probs: usize,
    /// Engine sampling seed (greedy decoding does not use it; recorded).
    pub seed: u64,
    /// Per-request deadline.
    pub request_timeout: Duration,
    /// The reference worker (model, interpreter, program, deadline; `sequences` is filled in).
    pub reference: WorkerRequest,
    /// Where the reference tensors are written (`<prefix><prompt id>.safetensors`).
    pub reference_prefix: PathBuf,
    /// `k` of the top-k overlap.
    pub top_k: usize,
    /// Declared tolerances.
    pub tolerances: Tolerances,
}

/// What a run produced.
#[derive(Debug)]
pub struct GreedyOutcome {
    /// The result document as written.
    pub doc: serde_json::Value,
    /// The typed result.
    pub result: OracleResult,
    /// The engine's lifecycle record.
    pub lifecycle: Option<LifecycleRecord>,
    /// The reference worker's evidence.
    pub reference: Option<ReferenceEvidence>,
    /// Failures outside the comparison (engine, worker).
    pub failures: Vec<String>,
    /// Wall time.
    pub duration: Duration,
}

fn candidate_runs(
    o: &GreedyOptions,
    failures: &mut Vec<String>,
) -> (Vec<Result<GreedyRun, String>>, Option<LifecycleRecord>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            failures.push(format!("start the client runtime: {e}"));
            return (Vec::new(), None);
        }
    };
    let mut server = match OwnedServer::launch(&o.recipe, Instant::now(), &o.protect) {
        Ok(s) => s,
        Err(s) => {
            failures.extend(s.record.failures.iter().cloned());
            return (Vec::new(), Some(s.into_record()));
        }
    };
    // A recipe that declares its device (`device_report`) must see the server say so before
    // any request: ggml falls back to the CPU silently, and that is never a Vulkan oracle.
    if server.wait_ready(&rt).is_none() || !server.check_device_report() {
        let rec = server.shutdown();
        failures.extend(rec.failures.iter().cloned());
        return (Vec::new(), Some(rec));
    }
    let addr = server.addr();
    let runs: Vec<Result<GreedyRun, String>> = o
        .prompts
        .iter()
        .map(|p| {
            greedy(
                &rt,
                addr,
                &p.token_ids,
                o.steps,
                (o.vocab, o.n_probs),
                o.seed,
                o.request_timeout,
            )
        })
        .collect();
    let rec = server.shutdown();
    if !rec.passed {
        failures.extend(
            rec.failures
                .iter()
                .map(|f| format!("engine lifecycle: {f}")),
        );
    }
    (runs, Some(rec))
}

/// Runs the greedy oracle.
pub fn run(o: &GreedyOptions, tool: &str) -> GreedyOutcome {
    let start = Instant::now();
    let mut failures = Vec::new();
    let (runs, lifecycle) = candidate_runs(o, &mut failures);
    // One reference run over every prompt the engine answered.
    let mut sequences = Vec::new();
    let mut seq_of = vec![None; o.prompts.len()];
    for (i, (p, r)) in o.prompts.iter().zip(&runs).enumerate() {
        if let Ok(r) = r {
            let mut ids = p.token_ids.clone();
            ids.extend(r.tokens[..r.tokens.len() - 1].iter().map(|&t| t as i64));
            let mut out = o.reference_prefix.clone().into_os_string();
            out.push(format!("{}.safetensors", p.id));
            seq_of[i] = Some(sequences.len());
            sequences.push(Sequence {
                token_ids: ids,
                from_position: Some(p.token_ids.len() - 1),
                output: out.into(),
            });
        }
    }
    let mut reference = None;
    if !sequences.is_empty() {
        let mut req = o.reference.clone();
        req.sequences = sequences.clone();
        match worker::run(&req) {
            Ok(ev) if ev.worker.vocab == o.vocab => reference = Some(ev),
            Ok(ev) => failures.push(format!(
                "the reference vocabulary is {}, the engine's {}",
                ev.worker.vocab, o.vocab
            )),
            Err(e) => failures.push(format!("failed to {e}")),
        }
    }
    let mut cases = Vec::new();
    for (i, p) in o.prompts.iter().enumerate() {
        let case = match (&runs.get(i), seq_of[i], &reference) {
            (Some(Ok(run)), Some(s), Some(_)) => compare_prompt(p, run, &sequences[s], o),
            (Some(Err(e)), _, _) => refused(p, o, format!("engine: {e}")),
            (None, _, _) => refused(
                p,
                o,
                "engine: no completion (the engine did not start)".into(),
            ),
            _ => refused(p, o, "reference: no logits (see the failures)".into()),
        };
        cases.push(case);
    }
    let (doc, result) = result::build(tool, o.top_k, o.tolerances.clone(), cases);
    GreedyOutcome {
        doc,
        result,
        lifecycle,
        reference,
        failures,
        duration: start.elapsed(),
    }
}

fn engine_ref(o: &GreedyOptions, steps: usize, response: Option<&str>) -> TensorRef {
    TensorRef {
        source: format!("{} POST /completion", o.recipe.id),
        format: TensorFormat::Memory,
        file_sha256: response.map(str::to_string),
        bytes: None,
        shape: [steps, o.vocab],
        view: if o.n_probs < o.vocab {
            View::TopK { k: o.n_probs }
        } else {
            View::Full
        },
    }
}

fn refused(p: &Prompt, o: &GreedyOptions, reason: String) -> CaseRecord {
    CaseRecord {
        id: p.id.clone(),
        reference: TensorRef {
            source: o.reference.model.display().to_string(),
            format: TensorFormat::Memory,
            file_sha256: None,
            bytes: None,
            shape: [0, o.vocab],
            view: View::Full,
        },
        candidate: engine_ref(o, 0, None),
        input_token_ids_sha256: Some(result::token_ids_digest(&p.token_ids)),
        input_token_count: Some(p.token_ids.len()),
        outcome: CaseOutcome::Refused { reason },
        divergence: None,
        greedy: None,
    }
}

fn compare_prompt(p: &Prompt, run: &GreedyRun, seq: &Sequence, o: &GreedyOptions) -> CaseRecord {
    let file = match read_tensor_file(&seq.output) {
        Ok(f) => f,
        Err(e) => return refused(p, o, format!("reference: failed to {e}")),
    };
    let reference = &file.logits;
    let outcome = match &run.distribution {
        Distribution::Full(logprobs) => compare_full(reference, logprobs, o),
        Distribution::TopK(view) => compare_top_k(reference, view, o),
    };
    let tokens = &run.tokens;
    let text_of = |t: u32| {
        run.vocab_texts
            .get(t as usize)
            .filter(|s| !s.is_empty())
            .cloned()
    };
    let steps = tokens.len().min(reference.positions);
    let greedy = GreedyTrace {
        prompt_token_ids_sha256: result::token_ids_digest(&p.token_ids),
        prompt_token_count: p.token_ids.len(),
        tokens: tokens[..steps].to_vec(),
        texts: run.texts[..steps].to_vec(),
        reference_argmax: (0..steps)
            .map(|i| crate::compare::top_k(reference.row(i), 1)[0].token_id)
            .collect(),
    };
    let mut reference_ref = result::tensor_ref(&file);
    reference_ref.source = file.path.display().to_string();
    CaseRecord {
        id: p.id.clone(),
        reference: reference_ref,
        candidate: engine_ref(o, run.distribution.shape()[0], Some(&run.response_sha256)),
        input_token_ids_sha256: Some(result::token_ids_digest(&seq.token_ids)),
        input_token_count: Some(seq.token_ids.len()),
        outcome,
        divergence: Some(first_divergence(reference, tokens, &text_of)),
        greedy: Some(greedy),
    }
}

fn compare_full(reference: &Logits, logprobs: &Logits, o: &GreedyOptions) -> CaseOutcome {
    let rows: Vec<Vec<f32>> = (0..reference.positions)
        .map(|i| log_softmax(reference.row(i)))
        .collect();
    let ref_lp = Logits::from_rows(&rows).expect("rows of one tensor");
    match compare(&ref_lp, logprobs, o.top_k) {
        Ok(positions) => {
            let summary = summarize(&positions, o.vocab, o.top_k).expect("at least one step");
            CaseOutcome::Compared {
                checks: crate::tolerance::check(&o.tolerances, &summary),
                summary,
                positions,
            }
        }
        Err(e) => CaseOutcome::Refused {
            reason: e.to_string(),
        },
    }
}

fn compare_top_k(
    reference: &Logits,
    view: &crate::topk::TopKView,
    o: &GreedyOptions,
) -> CaseOutcome {
    match crate::topk::compare(reference, view, o.top_k) {
        Ok(positions) => {
            let summary = crate::topk::summarize(&positions, o.vocab, view.k, o.top_k)
                .expect("at least one step");
            let (checks, unchecked_tolerances) = crate::topk::check(&o.tolerances, &summary);
            CaseOutcome::ComparedTopK {
                summary,
                checks,
                unchecked_tolerances,
                positions,
            }
        }
        Err(reason) => CaseOutcome::Refused { reason },
    }
}

/// One `qualification-case-result-v1` metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metric {
    /// Name.
    pub name: &'static str,
    /// Value.
    pub value: f64,
    /// Unit.
    pub unit: &'static str,
    /// How it was produced.
    pub aggregation: &'static str,
    /// Direction.
    pub lower_is_better: bool,
}

impl Metric {
    fn new(
        name: &'static str,
        value: f64,
        unit: &'static str,
        aggregation: &'static str,
        lower_is_better: bool,
    ) -> Metric {
        Metric {
            name,
            value,
            unit,
            aggregation,
            lower_is_better,
        }
    }
}

/// The case metrics of a greedy result: worst cases over every step of every compared prompt,
/// and the number of prompts whose greedy text left the reference argmax. `None` when no
/// prompt was compared.
pub fn case_metrics(r: &OracleResult) -> Option<Vec<Metric>> {
    let sums: Vec<&crate::compare::Summary> = r
        .cases
        .iter()
        .filter_map(|c| match &c.outcome {
            CaseOutcome::Compared { summary, .. } => Some(summary),
            _ => None,
        })
        .collect();
    if sums.is_empty() {
        return case_metrics_top_k(r);
    }
    let steps: usize = sums.iter().map(|s| s.positions).sum();
    let agree: usize = sums.iter().map(|s| s.argmax_agreement).sum();
    let fold = |f: &dyn Fn(&crate::compare::Summary) -> f64, max: bool| {
        sums.iter()
            .map(|s| f(s))
            .fold(if max { f64::MIN } else { f64::MAX }, |a, b| {
                if max {
                    a.max(b)
                } else {
                    a.min(b)
                }
            })
    };
    let diverged = prompts_diverged(r);
    let m = Metric::new;
    let mut v = vec![
        m(
            "argmax_agreement",
            agree as f64 / steps as f64,
            "ratio",
            "fraction_of_steps",
            false,
        ),
        m(
            "cosine_min",
            fold(&|s| s.min_cosine.value, false),
            "ratio",
            "min_over_steps",
            false,
        ),
        m(
            "kl_divergence_max",
            fold(&|s| s.max_kl_divergence.value, true),
            "nats",
            "max_over_steps",
            true,
        ),
        m(
            "max_abs_error",
            fold(&|s| s.max_abs_error.value, true),
            "log_prob",
            "max_over_steps",
            true,
        ),
        m(
            "mean_abs_error",
            fold(&|s| s.max_mean_abs_error.value, true),
            "log_prob",
            "max_over_steps",
            true,
        ),
        m("prompts_diverged", diverged as f64, "count", "count", true),
        m(
            "reference_argmax_rank_max",
            fold(&|s| s.max_reference_argmax_rank.value as f64, true),
            "rank",
            "max_over_steps",
            true,
        ),
        m(
            "top10_overlap_min",
            fold(&|s| s.min_top_k_overlap.value as f64, false),
            "count",
            "min_over_steps",
            false,
        ),
    ];
    v.sort_by_key(|x| x.name);
    Some(v)
}

fn prompts_diverged(r: &OracleResult) -> usize {
    r.cases
        .iter()
        .filter(|c| c.divergence.as_ref().is_some_and(|d| d.step.is_some()))
        .count()
}

/// The case metrics of a top-k greedy run: only what a top-k view establishes (no cosine, KL,
/// full max or mean error; the lower bounds are named as such).
fn case_metrics_top_k(r: &OracleResult) -> Option<Vec<Metric>> {
    let sums: Vec<&crate::topk::TopKSummary> = r
        .cases
        .iter()
        .filter_map(|c| match &c.outcome {
            CaseOutcome::ComparedTopK { summary, .. } => Some(summary),
            _ => None,
        })
        .collect();
    if sums.is_empty() {
        return None;
    }
    let steps: usize = sums.iter().map(|s| s.positions).sum();
    let ratio = |f: &dyn Fn(&crate::topk::TopKSummary) -> usize| {
        sums.iter().map(|s| f(s)).sum::<usize>() as f64 / steps as f64
    };
    let max = |f: &dyn Fn(&crate::topk::TopKSummary) -> f64| {
        sums.iter().map(|s| f(s)).fold(f64::MIN, f64::max)
    };
    let m = Metric::new;
    let mut v = vec![
        m(
            "argmax_agreement",
            ratio(&|s| s.argmax_agreement),
            "ratio",
            "fraction_of_steps",
            false,
        ),
        m(
            "reference_argmax_listed",
            ratio(&|s| s.reference_argmax_listed),
            "ratio",
            "fraction_of_steps",
            false,
        ),
        m(
            "top_k_overlap_min",
            sums.iter()
                .map(|s| s.min_top_k_overlap.value)
                .min()
                .unwrap_or(0) as f64,
            "count",
            "min_over_steps",
            false,
        ),
        m(
            "abs_error_listed_max",
            max(&|s| s.max_abs_logprob_error_listed.value),
            "log_prob",
            "max_over_steps",
            true,
        ),
        m(
            "kl_divergence_lower_bound_max",
            max(&|s| s.max_kl_divergence_lower_bound.value),
            "nats",
            "max_over_steps",
            true,
        ),
        m(
            "candidate_mass_outside_list_max",
            max(&|s| s.max_candidate_mass_outside_list.value),
            "ratio",
            "max_over_steps",
            true,
        ),
        m(
            "prompts_diverged",
            prompts_diverged(r) as f64,
            "count",
            "count",
            true,
        ),
    ];
    v.sort_by_key(|x| x.name);
    Some(v)
}

/// The per-prompt first divergences as one line (for the case result's `details`).
pub fn divergence_line(r: &OracleResult) -> String {
    let mut parts = Vec::new();
    for c in &r.cases {
        let Some(d) = &c.divergence else {
            parts.push(format!("{}: not compared", c.id));
            continue;
        };
        match (d.step, &d.candidate, &d.reference) {
            (Some(s), Some(cand), Some(refe)) => parts.push(format!(
                "{}: step {s} of {}, engine {} {:?} (reference rank {}), reference {} {:?}, margin {:.4}",
                c.id,
                d.steps,
                cand.token_id,
                cand.text.as_deref().unwrap_or(""),
                cand.reference_rank,
                refe.token_id,
                refe.text.as_deref().unwrap_or(""),
                d.reference_margin.unwrap_or(0.0)
            )),
            _ => parts.push(format!("{}: none in {} steps", c.id, d.steps)),
        }
    }
    format!("first divergence: {}", parts.join("; "))
}

/// Whether the outcome passed (result verdict and no failure outside the comparison).
pub fn passed(o: &GreedyOutcome) -> bool {
    o.failures.is_empty() && o.result.verdict.status == Status::Passed
}

/// The `qualification-case-result-v1` document of a greedy run: metrics sorted by name, the
/// declared tolerances restated per metric (advisory, sorted), the reasons or the first
/// divergences as `details` (at most 2048 characters).
pub fn case_result(
    case_id: &str,
    passed: bool,
    duration_seconds: f64,
    effective_config: serde_json::Value,
    r: &OracleResult,
    reasons: &[String],
    divergences: &str,
) -> serde_json::Value {
    let metrics = case_metrics(r).unwrap_or_default();
    let t = &r.tolerances;
    let mut tol: Vec<(&str, f64)> = Vec::new();
    if let Some(b) = t.min_argmax_agreement {
        tol.push(("argmax_agreement", 1.0 - b));
    }
    if let Some(b) = t.min_cosine {
        tol.push(("cosine_min", 1.0 - b));
    }
    if let Some(b) = t.max_kl_divergence {
        tol.push(("kl_divergence_max", b));
    }
    if let Some(b) = t.max_abs_error {
        tol.push(("max_abs_error", b));
    }
    if let Some(b) = t.max_mean_abs_error {
        tol.push(("mean_abs_error", b));
    }
    if let Some(b) = t.max_reference_argmax_rank {
        tol.push(("reference_argmax_rank_max", (b - 1) as f64));
    }
    if let Some(b) = t.min_top_k_overlap {
        tol.push(("top10_overlap_min", r.top_k.saturating_sub(b) as f64));
        let k = r.cases.iter().find_map(|c| match &c.outcome {
            CaseOutcome::ComparedTopK { summary, .. } => Some(summary.overlap_k),
            _ => None,
        });
        if let Some(k) = k {
            tol.push(("top_k_overlap_min", k.saturating_sub(b) as f64));
        }
    }
    tol.retain(|(n, _)| metrics.iter().any(|m| m.name == *n));
    tol.sort_by_key(|x| x.0);
    let mut details = if reasons.is_empty() {
        divergences.to_string()
    } else {
        format!("{}; {divergences}", reasons.join("; "))
    };
    if details.chars().count() > 2048 {
        details = details.chars().take(2047).collect::<String>() + "\u{2026}";
    }
    serde_json::json!({
        "schema_version": 1,
        "case_id": case_id,
        "status": if passed { "passed" } else { "failed" },
        "duration_seconds": duration_seconds,
        "effective_config": effective_config,
        "metrics": metrics,
        "tolerances": tol.iter().map(|(n, a)| serde_json::json!({
            "metric": n, "absolute_tolerance": a.max(0.0), "relative_tolerance": 0.0
        })).collect::<Vec<_>>(),
        "details": details,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare;
    use crate::result::{build, CaseRecord, TensorRef};

    fn case(id: &str, r: &Logits, c: &Logits, tokens: &[u32], t: &Tolerances) -> CaseRecord {
        let positions = compare(r, c, 2).unwrap();
        let summary = summarize(&positions, r.vocab, 2).unwrap();
        let tref = TensorRef {
            source: "x".into(),
            format: TensorFormat::Memory,
            file_sha256: None,
            bytes: None,
            shape: [r.positions, r.vocab],
            view: View::Full,
        };
        CaseRecord {
            id: id.into(),
            reference: tref.clone(),
            candidate: tref,
            input_token_ids_sha256: None,
            input_token_count: None,
            outcome: CaseOutcome::Compared {
                checks: crate::tolerance::check(t, &summary),
                summary,
                positions,
            },
            divergence: Some(first_divergence(r, tokens, &|t| Some(format!("t{t}")))),
            greedy: None,
        }
    }

    #[test]
    fn missed_bounds_say_below_a_minimum_and_above_a_maximum() {
        // Argmax disagrees at position 1 (agreement 0.5 < 1.0); the logits differ by 2.
        let r = Logits::from_rows(&[vec![0.0, 3.0, 1.0], vec![2.0, 1.9, 0.0]]).unwrap();
        let c = Logits::from_rows(&[vec![0.0, 3.0, 1.0], vec![0.0, 1.9, 0.0]]).unwrap();
        let t = Tolerances {
            min_argmax_agreement: Some(1.0),
            max_abs_error: Some(0.5),
            ..Tolerances::default()
        };
        let cases = vec![case("p", &r, &c, &[1, 0], &t)];
        let (_, res) = build("t", 2, t, cases);
        let reasons = res.verdict.reasons.join("\n");
        assert!(
            reasons.contains("case p: observed 0.5 is below min_argmax_agreement 1 at position 1"),
            "{reasons}"
        );
        assert!(
            reasons.contains("case p: observed 2 is above max_abs_error 0.5"),
            "{reasons}"
        );
        assert!(!reasons.contains("exceeded"), "{reasons}");
        // A result written with the earlier phrasing still follows from its cases.
        let old = crate::result::verdict_phrased(&res.cases, crate::result::Phrasing::Exceeded);
        assert!(old.reasons[0].contains("min_argmax_agreement 1 exceeded: observed 0.5"));
    }

    #[test]
    fn top_k_case_metrics_name_only_what_the_view_establishes() {
        use crate::topk::{Listed, TopKView};
        let r = Logits::from_rows(&[vec![0.0, 3.0, 1.0], vec![2.0, 1.9, 0.0]]).unwrap();
        let l = |token_id, logprob| Listed { token_id, logprob };
        let v = TopKView::new(
            2,
            3,
            vec![vec![l(1, -0.2), l(2, -2.0)], vec![l(1, -0.6), l(2, -2.5)]],
        )
        .unwrap();
        let positions = crate::topk::compare(&r, &v, 10).unwrap();
        let summary = crate::topk::summarize(&positions, 3, 2, 10).unwrap();
        let t = Tolerances {
            min_argmax_agreement: Some(0.5),
            min_cosine: Some(0.9),
            ..Default::default()
        };
        let (checks, unchecked_tolerances) = crate::topk::check(&t, &summary);
        let tref = TensorRef {
            source: "x".into(),
            format: TensorFormat::Memory,
            file_sha256: None,
            bytes: None,
            shape: [2, 3],
            view: View::TopK { k: 2 },
        };
        let case = CaseRecord {
            id: "a".into(),
            reference: tref.clone(),
            candidate: tref,
            input_token_ids_sha256: None,
            input_token_count: None,
            outcome: CaseOutcome::ComparedTopK {
                summary,
                checks,
                unchecked_tolerances,
                positions,
            },
            divergence: Some(first_divergence(&r, &[1, 1], &|_| None)),
            greedy: None,
        };
        let (doc, res) = build("t", 10, t, vec![case]);
        assert_eq!(res.verdict.status, Status::Passed);
        let m = case_metrics(&res).unwrap();
        let get = |n: &str| m.iter().find(|x| x.name == n).map(|x| x.value);
        assert_eq!(get("argmax_agreement"), Some(0.5));
        assert_eq!(get("reference_argmax_listed"), Some(0.5));
        assert_eq!(get("top_k_overlap_min"), Some(1.0));
        assert_eq!(get("cosine_min"), None);
        assert_eq!(get("kl_divergence_max"), None);
        assert_eq!(get("max_abs_error"), None);
        // The document validates under `oracle check`.
        let v = qual_json::Value::from_serde(&doc);
        crate::check::check_value(&v, &Default::default()).unwrap();
    }

    #[test]
    fn case_result_metrics_are_sorted_worst_cases_with_divergences_in_details() {
        let r = Logits::from_rows(&[vec![0.0, 3.0, 1.0], vec![2.0, 1.9, 0.0]]).unwrap();
        let c = Logits::from_rows(&[vec![0.0, 3.0, 1.0], vec![1.9, 2.0, 0.0]]).unwrap();
        let t = Tolerances {
            min_argmax_agreement: Some(0.5),
            max_abs_error: Some(1.0),
            ..Default::default()
        };
        let cases = vec![
            case("a", &r, &c, &[1, 1], &t),
            case("b", &r, &r, &[1, 0], &t),
        ];
        let (_, res) = build("t", 2, t, cases);
        let m = case_metrics(&res).unwrap();
        let names: Vec<&str> = m.iter().map(|x| x.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        let get = |n: &str| m.iter().find(|x| x.name == n).unwrap().value;
        assert_eq!(get("argmax_agreement"), 0.75);
        assert_eq!(get("prompts_diverged"), 1.0);
        let line = divergence_line(&res);
        assert!(
            line.contains("a: step 1 of 2, engine 1 \"t1\" (reference rank 2)"),
            "{line}"
        );
        assert!(line.contains("b: none in 2 steps"), "{line}");
        let doc = case_result("c-1", true, 1.0, serde_json::json!({}), &res, &[], &line);
        let tol: Vec<&str> = doc["tolerances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["metric"].as_str().unwrap())
            .collect();
        assert_eq!(tol, vec!["argmax_agreement", "max_abs_error"]);
        assert_eq!(doc["details"], serde_json::Value::String(line));
    }
}
