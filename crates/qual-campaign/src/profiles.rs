//! The five fixed request profiles. Each profile owns its prompt shape, sampling and
//! comparison mode; a campaign cannot override them (a conflicting value is refused before
//! any traffic), so two engines run under one profile name always run the same workload.

use crate::prompts::PromptProfile;
use serde::{Deserialize, Serialize};

/// A fixed profile, in campaign order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Short prompts, greedy.
    GreedyShort,
    /// Short prompts at the API default temperature 1.0 (seeded); compared on inputs only.
    ApiDefaultSampled,
    /// A long shared prefill, greedy.
    LongPrefill,
    /// A shared prefix meant to hit a prefix cache, greedy.
    PrefixHit,
    /// Prompt lengths varying by request, greedy.
    Mixed,
}

/// How prompt-token counts within a row must look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptTokens {
    /// Exactly one distinct value.
    Uniform,
    /// More than one distinct value (enforced only when concurrency > 1).
    Mixed,
}

/// What a reference comparison compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonMode {
    /// Prompts, prompt tokens and the exact output bytes.
    ExactOutput,
    /// Prompts and prompt tokens only (sampled outputs legitimately differ).
    InputsOnly,
}

/// The contract of one profile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Contract {
    /// Prompt shape.
    pub prompt_profile: PromptProfile,
    /// Sampling temperature.
    pub temperature: f64,
    /// Nucleus sampling.
    pub top_p: f64,
    /// Prompt-token shape within a row.
    pub prompt_tokens: PromptTokens,
    /// Comparison mode against a reference.
    pub comparison_mode: ComparisonMode,
}

impl Profile {
    /// Every profile, in campaign order.
    pub const ALL: [Profile; 5] = [
        Profile::GreedyShort,
        Profile::ApiDefaultSampled,
        Profile::LongPrefill,
        Profile::PrefixHit,
        Profile::Mixed,
    ];

    /// The profile's name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::GreedyShort => "greedy-short",
            Profile::ApiDefaultSampled => "api-default-sampled",
            Profile::LongPrefill => "long-prefill",
            Profile::PrefixHit => "prefix-hit",
            Profile::Mixed => "mixed",
        }
    }

    /// Parses a profile name.
    pub fn parse(s: &str) -> Result<Profile, String> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown profile {}; known: {}",
                    qual_json::show::quote(s),
                    qual_json::show::list(&Profile::ALL.map(|p| p.name()))
                )
            })
    }

    /// The profile's contract.
    pub fn contract(self) -> Contract {
        let (prompt_profile, temperature, prompt_tokens, comparison_mode) = match self {
            Profile::GreedyShort => (
                PromptProfile::Short,
                0.0,
                PromptTokens::Uniform,
                ComparisonMode::ExactOutput,
            ),
            Profile::ApiDefaultSampled => (
                PromptProfile::Short,
                1.0,
                PromptTokens::Uniform,
                ComparisonMode::InputsOnly,
            ),
            Profile::LongPrefill => (
                PromptProfile::LongPrefill,
                0.0,
                PromptTokens::Uniform,
                ComparisonMode::ExactOutput,
            ),
            Profile::PrefixHit => (
                PromptProfile::PrefixHit,
                0.0,
                PromptTokens::Uniform,
                ComparisonMode::ExactOutput,
            ),
            Profile::Mixed => (
                PromptProfile::Mixed,
                0.0,
                PromptTokens::Mixed,
                ComparisonMode::ExactOutput,
            ),
        };
        Contract {
            prompt_profile,
            temperature,
            top_p: 1.0,
            prompt_tokens,
            comparison_mode,
        }
    }
}

/// Parses a comma-separated profile list (unique, kept in campaign order).
pub fn parse_list(s: &str) -> Result<Vec<Profile>, String> {
    let mut v = Vec::new();
    for part in s.split(',') {
        let p = Profile::parse(part.trim())?;
        if v.contains(&p) {
            return Err(format!("profile {} is listed twice", p.name()));
        }
        v.push(p);
    }
    v.sort();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_pin_sampling_and_comparison() {
        let names: Vec<_> = Profile::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(
            names,
            [
                "greedy-short",
                "api-default-sampled",
                "long-prefill",
                "prefix-hit",
                "mixed"
            ]
        );
        let s = Profile::ApiDefaultSampled.contract();
        assert_eq!((s.temperature, s.top_p), (1.0, 1.0));
        assert_eq!(s.comparison_mode, ComparisonMode::InputsOnly);
        assert_eq!(Profile::Mixed.contract().prompt_tokens, PromptTokens::Mixed);
        assert_eq!(Profile::GreedyShort.contract().temperature, 0.0);
        assert_eq!(
            parse_list("mixed,greedy-short").unwrap(),
            [Profile::GreedyShort, Profile::Mixed]
        );
        assert!(parse_list("mixed,mixed").is_err());
        assert!(Profile::parse("fast")
            .unwrap_err()
            .contains("unknown profile \"fast\""));
    }
}
