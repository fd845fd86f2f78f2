//! JUnit XML in the shape CI systems read (Ant / Jenkins / GitLab / GitHub test reporters;
//! `schemas/junit.xsd` in this crate describes it and a test validates against it).
//!
//! One `testsuite` per receipt (`name` = workload/variant/backend@host, `timestamp` = the run
//! start, `hostname` = the host id, properties = receipt id, commit, verdict, path) and one
//! `testcase` per case × repetition (`name` = `<case> r<n>`, `classname` =
//! `<workload>.<variant>.<backend>.<host>`). Without run evidence a case is one `testcase`
//! named after it with its aggregated status. A case whose aggregate failed while no
//! repetition did (a cross-repetition rule) gets one more `testcase`, `<case> (aggregate)`, so
//! no failure is lost. A failed optional case is a `failure` of `type="optional"`; a skipped
//! case is `skipped`.
//!
//! Serving campaigns: one `testsuite` per profile receipt (`campaign <id>/<engine>/<profile>`)
//! and one `testcase` per row (`c<concurrency> r<repeat>`), failed with the failed gates' names
//! and details (`type="gate"`), or — when the row passed its gates but differs from the
//! reference and the pairing is `required` — with the mismatches (`type="reference_mismatch"`);
//! receipt-level failures get one more `<profile> (receipt)` case; a profile not run after an
//! earlier failure is `skipped`.
//!
//! Bench results: one `testsuite` per document (`bench <file>`) and one `testcase` per load
//! point × run (`<label> r<repeat>`), failed when the validity gate refused the run
//! (`type="measurement_refused"`) or the document's verdict names the run as the server's
//! failure (`type="server_failed"`); a verdict that is not `passed` and names no run gets one
//! more `verdict` case, failed with the verdict's reasons.
//!
//! Text is escaped for XML: control and bidirectional characters as `\xNN` / `\u{…}` first
//! (XML 1.0 cannot carry most controls at all), then `& < > " '`.

use crate::collect::{CaseView, ReceiptView, ReportSet};
use std::fmt::Write as _;

/// Text escaped for XML content and attribute values.
pub fn xml(s: &str) -> String {
    let plain = crate::plain(s);
    let mut out = String::with_capacity(plain.len());
    for c in plain.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\u{FFFE}' | '\u{FFFF}' => {
                let _ = write!(out, "\\u{{{:04X}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

struct Case {
    name: String,
    time: f64,
    status: String,
    required: bool,
    reason: Option<String>,
}

fn cases_of(c: &CaseView) -> Vec<Case> {
    if c.repetitions.is_empty() {
        return vec![Case {
            name: c.id.clone(),
            time: c.duration_seconds,
            status: c.status.clone(),
            required: c.required,
            reason: c.details.clone(),
        }];
    }
    let mut out: Vec<Case> = c
        .repetitions
        .iter()
        .map(|p| Case {
            name: format!("{} r{}", c.id, p.number),
            time: p.duration_seconds,
            status: p.status.clone(),
            required: c.required,
            reason: p.details.clone().or_else(|| c.details.clone()),
        })
        .collect();
    if c.status == "failed" && !out.iter().any(|k| k.status == "failed") {
        out.push(Case {
            name: format!("{} (aggregate)", c.id),
            time: 0.0,
            status: "failed".into(),
            required: c.required,
            reason: c.details.clone(),
        });
    }
    out
}

/// `2026-07-28T22:25:35` (the Ant schema's timestamp has no zone; it is UTC).
fn timestamp(r: &ReceiptView) -> String {
    r.started_at
        .get(..19)
        .unwrap_or("1970-01-01T00:00:00")
        .to_owned()
}

/// A JUnit test case of a campaign or a bench result.
pub(crate) struct JunitCase {
    /// `c<concurrency> r<repeat>`, or a profile-level name.
    pub name: String,
    /// Elapsed seconds.
    pub time: f64,
    /// `(type, message, body)` of a failure.
    pub failure: Option<(String, String, String)>,
    /// Skip message.
    pub skipped: Option<String>,
}

/// A suite of [`JunitCase`]s (campaign profiles, bench results).
pub(crate) struct Suite {
    /// Suite name.
    pub name: String,
    /// Each case's `classname` (and the suite's `package`).
    pub classname: String,
    /// `(name, value)` properties, in order.
    pub properties: Vec<(&'static str, String)>,
    /// The cases.
    pub cases: Vec<JunitCase>,
}

/// Writes one [`Suite`] as `testsuite` number `id`; returns its (failures, skipped, time).
fn write_suite(out: &mut String, id: usize, suite: &Suite) -> (usize, usize, f64) {
    let failures = suite.cases.iter().filter(|k| k.failure.is_some()).count();
    let skipped = suite.cases.iter().filter(|k| k.skipped.is_some()).count();
    let time: f64 = suite.cases.iter().map(|k| k.time).sum();
    let classname = xml(&suite.classname);
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{time:.3}\" timestamp=\"1970-01-01T00:00:00\" hostname=\"-\" id=\"{id}\" package=\"{classname}\">",
        xml(&suite.name),
        suite.cases.len(),
    );
    let _ = writeln!(out, "    <properties>");
    for (k, v) in &suite.properties {
        let _ = writeln!(out, "      <property name=\"{k}\" value=\"{}\"/>", xml(v));
    }
    let _ = writeln!(out, "    </properties>");
    for k in &suite.cases {
        let open = format!(
            "    <testcase name=\"{}\" classname=\"{classname}\" time=\"{:.3}\"",
            xml(&k.name),
            k.time
        );
        match (&k.failure, &k.skipped) {
            (Some((kind, message, body)), _) => {
                let _ = writeln!(
                    out,
                    "{open}>\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                    xml(message),
                    xml(kind),
                    xml(body)
                );
            }
            (None, Some(m)) => {
                let _ = writeln!(
                    out,
                    "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                    xml(m)
                );
            }
            (None, None) => {
                let _ = writeln!(out, "{open}/>");
            }
        }
    }
    let _ = writeln!(out, "  </testsuite>");
    (failures, skipped, time)
}

/// Renders the JUnit XML document.
pub fn render(set: &ReportSet) -> String {
    let mut suites = String::new();
    let (mut all_tests, mut all_failures, mut all_skipped, mut all_time) = (0, 0, 0, 0.0);
    for (i, r) in set.receipts.iter().enumerate() {
        let cases: Vec<Case> = r.cases.iter().flat_map(cases_of).collect();
        let failures = cases.iter().filter(|c| c.status == "failed").count();
        let skipped = cases.iter().filter(|c| c.status == "skipped").count();
        let time: f64 = cases.iter().map(|c| c.time).sum();
        all_tests += cases.len();
        all_failures += failures;
        all_skipped += skipped;
        all_time += time;
        let classname = xml(&format!(
            "{}.{}.{}.{}",
            r.workload, r.variant, r.backend, r.host
        ));
        let _ = writeln!(
            suites,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{time:.3}\" timestamp=\"{}\" hostname=\"{}\" id=\"{i}\" package=\"{classname}\">",
            xml(&format!("{}/{}/{}@{}", r.workload, r.variant, r.backend, r.host)),
            cases.len(),
            xml(&timestamp(r)),
            xml(&r.host),
        );
        let _ = writeln!(suites, "    <properties>");
        for (k, v) in [
            ("receipt_id", r.receipt_id.as_str()),
            ("commit", r.commit.as_str()),
            ("verdict", r.verdict.as_str()),
            ("started_at_utc", r.started_at.as_str()),
            ("path", &r.path.to_string_lossy()),
        ] {
            let _ = writeln!(
                suites,
                "      <property name=\"{k}\" value=\"{}\"/>",
                xml(v)
            );
        }
        let _ = writeln!(suites, "    </properties>");
        for c in &cases {
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{classname}\" time=\"{:.3}\"",
                xml(&c.name),
                c.time
            );
            let reason = c.reason.as_deref().unwrap_or("no details recorded");
            match c.status.as_str() {
                "failed" => {
                    let kind = if c.required { "failed" } else { "optional" };
                    let message = reason.lines().next().unwrap_or("");
                    let _ = writeln!(
                        suites,
                        "{open}>\n      <failure message=\"{}\" type=\"{kind}\">{}</failure>\n    </testcase>",
                        xml(message),
                        xml(reason)
                    );
                }
                "skipped" => {
                    let _ = writeln!(
                        suites,
                        "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                        xml(reason)
                    );
                }
                _ => {
                    let _ = writeln!(suites, "{open}/>");
                }
            }
        }
        let _ = writeln!(suites, "  </testsuite>");
    }
    let mut id = set.receipts.len();
    let mut extra: Vec<Suite> = Vec::new();
    for c in &set.campaigns {
        for (name, classname, path, verdict, cases) in crate::campaign::junit_suites(c) {
            extra.push(Suite {
                name,
                classname,
                properties: vec![
                    ("campaign_id", c.campaign_id.clone()),
                    ("engine", c.engine.clone()),
                    ("verdict", verdict),
                    ("path", path),
                ],
                cases,
            });
        }
    }
    extra.extend(set.benches.iter().map(crate::bench::junit_suite));
    for suite in &extra {
        let (failures, skipped, time) = write_suite(&mut suites, id, suite);
        id += 1;
        all_tests += suite.cases.len();
        all_failures += failures;
        all_skipped += skipped;
        all_time += time;
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"kiln-qual\" tests=\"{all_tests}\" failures=\"{all_failures}\" errors=\"0\" skipped=\"{all_skipped}\" time=\"{all_time:.3}\">\n{suites}</testsuites>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_controls_are_escaped() {
        assert_eq!(xml("a<b&\"c'"), "a&lt;b&amp;&quot;c&apos;");
        assert_eq!(xml("x\u{1b}y"), "x\\x1by");
    }
}
