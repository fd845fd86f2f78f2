//! Helpers shared by the CLI integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Kiln corpus (`../shared/kiln-corpus` beside the repository), when present.
/// A user's clone has no `../shared`: callers skip with a printed message.
pub fn corpus() -> Option<PathBuf> {
    let p = repo_root().join("../shared/kiln-corpus");
    p.is_dir().then_some(p)
}

/// One deliberate difference from `compat/deliberate-differences.json`.
#[derive(serde::Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    pub corpus: String,
    pub file: String,
    pub reason: String,
}

/// The reasoned list of deliberate verdict differences.
pub fn deliberate_differences() -> Vec<Difference> {
    let text = std::fs::read_to_string(repo_root().join("compat/deliberate-differences.json"))
        .expect("compat/deliberate-differences.json exists");
    let list: Vec<Difference> = serde_json::from_str(&text).expect("valid differences list");
    for d in &list {
        assert!(
            !d.reason.trim().is_empty(),
            "difference for {} has no reason",
            d.file
        );
    }
    list
}

/// Compares verdicts with labels, prints `N/M verdicts agree`, and panics on any
/// disagreement that is not a listed deliberate difference.
pub fn assert_verdicts(corpus_name: &str, verdicts: &[(String, bool, bool, String)]) {
    let allowed = deliberate_differences();
    let mut agree = 0;
    let mut unexpected = Vec::new();
    for (file, ours, label, detail) in verdicts {
        if ours == label {
            agree += 1;
            if allowed
                .iter()
                .any(|d| d.corpus == corpus_name && &d.file == file)
            {
                println!(
                    "note: {corpus_name}/{file} is listed as a deliberate difference but agrees"
                );
            }
        } else if let Some(d) = allowed
            .iter()
            .find(|d| d.corpus == corpus_name && &d.file == file)
        {
            println!("deliberate difference {corpus_name}/{file}: {}", d.reason);
        } else {
            unexpected.push(format!(
                "  {file}: ours={} label={} ({detail})",
                if *ours { "valid" } else { "invalid" },
                if *label { "valid" } else { "invalid" }
            ));
        }
    }
    println!("{corpus_name}: {agree}/{} verdicts agree", verdicts.len());
    assert!(
        unexpected.is_empty(),
        "{} unexplained disagreement(s) in {corpus_name}:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}
