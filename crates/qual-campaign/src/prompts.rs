//! The deterministic prompt generator (`fixed-serving-profiles-v2`).
//!
//! Owns the exact prompt text of every request of every profile, so that two engines (and
//! two runs) sent the same prompt set id send byte-identical prompts. Prompts depend only on
//! the prompt-set id, the phase label, the request index and the prompt profile — never on
//! a run id. Markers: the 24 fixed words sorted by the SHA-256 of
//! `"{prompt_set_id}\0{phase}\0{request_index}\0{marker}"`, joined by `" | "`, so every
//! prompt holds the same marker multiset in a request-specific order. Golden prompt hashes
//! from the original implementation are pinned in the tests.

use qual_json::{canonical_digest, sha256_prefixed, Object, Value};
use sha2::{Digest, Sha256};

/// Template version written into the workload.
pub const TEMPLATE_VERSION: &str = "fixed-serving-profiles-v2";
/// Long-block repetitions of the v2 template.
pub const LONG_PROMPT_REPETITIONS: usize = 61;

const MARKERS: [&str; 24] = [
    "amber", "birch", "cobalt", "delta", "ember", "frost", "granite", "harbor", "indigo",
    "juniper", "keystone", "linen", "maple", "nickel", "onyx", "prairie", "quartz", "raven",
    "silver", "timber", "umber", "violet", "willow", "zinc",
];

const SHORT_BODY: &str = "Write a detailed technical paragraph explaining why deterministic, reproducible performance measurements need controlled workloads, explicit error accounting, and tail-latency reporting. Continue until the response limit; do not mention these instructions.";

const LONG_BLOCK: &str = "A production inference system must preserve request identity, bounded resource ownership, deterministic accounting, explicit cancellation, and observable phase transitions. Measurements must distinguish admission, prefill, decode, streaming, and teardown while retaining errors and tail latency. Shared prefixes exercise cache reuse only when every byte before the unique suffix is identical. ";

const PREFIX_HIT_LEAD: &str = "Shared prefix for a cache-reuse workload. ";
const SUFFIX_LEAD: &str = "\nUnique request suffix follows.\n";

/// The prompt shape of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptProfile {
    /// The short instruction alone.
    Short,
    /// A long shared block before the short instruction.
    LongPrefill,
    /// A fixed lead plus the long block before the short instruction.
    PrefixHit,
    /// 0, 4, 16 or all blocks by request index (mod 4).
    Mixed,
}

/// The warmup phase label (`warmup-c%03d`, concurrency = warmup count).
pub fn warmup_phase(warmup: usize) -> String {
    format!("warmup-c{warmup:03}")
}

/// The measured phase label (`measure-c%03d-r%03d`).
pub fn measured_phase(concurrency: usize, repeat: usize) -> String {
    format!("measure-c{concurrency:03}-r{repeat:03}")
}

fn markers(prompt_set_id: &str, phase: &str, index: usize) -> String {
    let mut keyed: Vec<([u8; 32], &str)> = MARKERS
        .iter()
        .map(|m| {
            let d = Sha256::digest(format!("{prompt_set_id}\0{phase}\0{index}\0{m}").as_bytes());
            (d.into(), *m)
        })
        .collect();
    keyed.sort();
    keyed
        .iter()
        .map(|(_, m)| *m)
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The prompt of request `index` in `phase`.
pub fn prompt(
    prompt_set_id: &str,
    phase: &str,
    index: usize,
    profile: PromptProfile,
    repetitions: usize,
) -> String {
    let short = format!(
        "{SHORT_BODY}\nBenchmark run: {prompt_set_id}; phase: {phase}.\nMarker sequence: {}.",
        markers(prompt_set_id, phase, index)
    );
    let prefix = match profile {
        PromptProfile::Short => return short,
        PromptProfile::LongPrefill => LONG_BLOCK.repeat(repetitions),
        PromptProfile::PrefixHit => format!("{PREFIX_HIT_LEAD}{}", LONG_BLOCK.repeat(repetitions)),
        PromptProfile::Mixed => LONG_BLOCK.repeat([0, 4, 16, repetitions][index % 4]),
    };
    format!("{prefix}{SUFFIX_LEAD}{short}")
}

/// `sha256:` of a text's UTF-8 bytes.
pub fn text_sha256(s: &str) -> String {
    sha256_prefixed(s.as_bytes())
}

/// The prompts of one row (indices `0..n`); refuses duplicates.
pub fn row_prompts(
    prompt_set_id: &str,
    phase: &str,
    n: usize,
    profile: PromptProfile,
    repetitions: usize,
) -> Result<Vec<String>, String> {
    let v: Vec<String> = (0..n)
        .map(|i| prompt(prompt_set_id, phase, i, profile, repetitions))
        .collect();
    let mut seen: Vec<&String> = v.iter().collect();
    seen.sort();
    seen.dedup();
    if seen.len() != v.len() {
        return Err(format!("phase {phase} generated duplicate prompts"));
    }
    Ok(v)
}

/// Canonical hash of `[{index, prompt_sha256}]`.
pub fn prompt_set_sha256(prompts: &[String]) -> String {
    let items = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut o = Object::new();
            o.insert("index", Value::from(i as u64));
            o.insert("prompt_sha256", Value::from(text_sha256(p)));
            Value::Object(o)
        })
        .collect();
    canonical_digest(&Value::Array(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden(profile: PromptProfile, name: &str) -> String {
        text_sha256(&prompt(
            &format!("cuda-rtx4090-laptop-performance-v1-{name}"),
            &measured_phase(64, 0),
            63,
            profile,
            LONG_PROMPT_REPETITIONS,
        ))
    }

    #[test]
    fn golden_prompt_hashes_of_the_v2_template() {
        assert_eq!(
            golden(PromptProfile::LongPrefill, "long-prefill"),
            "sha256:107ee7303c2e3bfc91b7c111bbceb3c9a56db5c4d30682ec94e4e6574d675561"
        );
        assert_eq!(
            golden(PromptProfile::PrefixHit, "prefix-hit"),
            "sha256:b952c83c6c3c66da690781f5644b8d4077c1380742aa66a210449cb46eb3d668"
        );
        assert_eq!(
            golden(PromptProfile::Mixed, "mixed"),
            "sha256:982ad94da2170bc57d6f607018b1690b16618e86db2c956b1a278a69722ff576"
        );
    }

    #[test]
    fn golden_short_prompt_of_the_retained_oracle_request() {
        let p = prompt(
            "20260718t232632-rocm-strix-halo-greedy-c1-divergence-v1",
            "measure-c001-r000",
            0,
            PromptProfile::Short,
            LONG_PROMPT_REPETITIONS,
        );
        assert_eq!(
            text_sha256(&p),
            "sha256:32c72cd7932333fd79d060e1622b6c349445416049cb75ab5075efbdcfe9742c"
        );
    }

    #[test]
    fn golden_historical_prompt_set_hashes_with_64_repetitions() {
        for (profile, name, want) in [
            (
                PromptProfile::LongPrefill,
                "long-prefill",
                "sha256:e8490e64330d2efa4288e173b238ac4df81afa9faebf9f315270c6f98a739fd9",
            ),
            (
                PromptProfile::PrefixHit,
                "prefix-hit",
                "sha256:5bfd3abdce210aba417f0d7787fc777a5f89765bf4220a7e7bb0f1be2d39a795",
            ),
        ] {
            let ps = format!("cuda-rtx4090-laptop-performance-v1-{name}");
            let prompts = row_prompts(&ps, &measured_phase(1, 0), 1, profile, 64).unwrap();
            assert_eq!(prompt_set_sha256(&prompts), want, "{name}");
        }
    }

    #[test]
    fn prompts_are_unique_and_keep_the_marker_multiset() {
        let ps = row_prompts("set-a", "measure-c008-r001", 8, PromptProfile::Short, 61).unwrap();
        let mut sorted_sets: Vec<Vec<&str>> = ps
            .iter()
            .map(|p| {
                let line = p.lines().last().unwrap();
                let m = line
                    .trim_start_matches("Marker sequence: ")
                    .trim_end_matches('.');
                let mut v: Vec<&str> = m.split(" | ").collect();
                v.sort();
                v
            })
            .collect();
        sorted_sets.dedup();
        assert_eq!(sorted_sets.len(), 1);
        assert_eq!(sorted_sets[0].len(), 24);
        // Identity depends on the prompt set, not on anything else.
        assert_ne!(
            prompt("set-a", "p", 0, PromptProfile::Short, 61),
            prompt("set-b", "p", 0, PromptProfile::Short, 61)
        );
    }
}
