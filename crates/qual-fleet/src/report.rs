//! The fleet report: host × workload/variant with each target's verdict, failures first
//! (refused, then failed, then passed), the missing targets named with what the scheduler
//! said about them, and for each admitted receipt the key that signed it.

use crate::collect::{Collection, Outcome, RefusalKind, TargetReport};
use std::collections::BTreeMap;

fn rank(t: &TargetReport) -> u8 {
    match &t.outcome {
        Outcome::Refused { .. } => 0,
        Outcome::Verified { verdict, .. } if verdict != "passed" => 1,
        Outcome::Verified { .. } => 2,
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The report in Markdown. `scheduler` gives, per target id, what the scheduler said (its
/// job state), shown for every target that did not verify.
pub fn markdown(c: &Collection, scheduler: &BTreeMap<String, String>) -> String {
    let mut rows: Vec<&TargetReport> = c.targets.iter().collect();
    rows.sort_by_key(|t| {
        (
            rank(t),
            t.host_id.clone(),
            t.workload.clone(),
            t.variant.clone(),
        )
    });
    let verified = c.targets.iter().filter(|t| !t.is_refused()).count();
    let mut out = format!(
        "# Fleet {}\n\ncommit `{}`: {} of {} targets verified\n\n",
        c.fleet_id,
        c.commit,
        verified,
        c.targets.len()
    );
    out.push_str("| host | workload / variant | target | verdict | signed by | scheduler |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for t in &rows {
        let (verdict, signer) = match &t.outcome {
            Outcome::Verified { verdict, keyid, .. } => (verdict.clone(), keyid.clone()),
            Outcome::Refused { reasons } => {
                let kinds: Vec<String> = reasons
                    .iter()
                    .map(|r| r.kind.as_str().to_owned())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                (format!("refused ({})", kinds.join(", ")), "—".into())
            }
        };
        let sched = scheduler.get(&t.target).map(String::as_str).unwrap_or("—");
        out.push_str(&format!(
            "| {} | {} / {} | {} | {} | {} | {} |\n",
            cell(&t.host_id),
            cell(&t.workload),
            cell(&t.variant),
            cell(&t.target),
            cell(&verdict),
            cell(&signer),
            cell(sched)
        ));
    }
    let missing: Vec<&&TargetReport> = rows
        .iter()
        .filter(|t| matches!(&t.outcome, Outcome::Refused { reasons } if reasons.iter().any(|r| r.kind == RefusalKind::Missing)))
        .collect();
    if !missing.is_empty() {
        out.push_str("\n## Missing targets\n\n");
        for t in missing {
            let sched = scheduler
                .get(&t.target)
                .map(String::as_str)
                .unwrap_or("no scheduler state");
            out.push_str(&format!("- `{}` on `{}`: {}\n", t.target, t.host_id, sched));
        }
    }
    let refused: Vec<&&TargetReport> = rows.iter().filter(|t| t.is_refused()).collect();
    if !refused.is_empty() {
        out.push_str("\n## Refused\n\n");
        for t in refused {
            if let Outcome::Refused { reasons } = &t.outcome {
                out.push_str(&format!("- `{}`:\n", t.target));
                for r in reasons {
                    out.push_str(&format!("  - {}: {}\n", r.kind.as_str(), r.message));
                }
            }
        }
    }
    out
}
