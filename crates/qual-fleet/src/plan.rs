//! The fleet plan, `kiln-qual.fleet-plan.v1`: a small committed JSON file saying which workload
//! and variant run on which host, how each scheduler selects that host, the pushed commit to
//! run, and the public key each host signs with.
//!
//! Read once through the document layer (`qual_json::read_document`: regular file, bounded,
//! strict JSON), then every rule is checked and every violation reported with its JSON pointer
//! (closed objects, types, identifier syntax, unique ids, known hosts, parsable keys, paths under
//! `qualification/workloads/`). Typed values are built only from a plan that passed.

use qual_json::{ClosedKeys, Limits, Object, Value, Violation, Violations};
use std::collections::BTreeSet;
use std::path::Path;

/// The plan's `schema` value.
pub const PLAN_SCHEMA: &str = "kiln-qual.fleet-plan.v1";
/// Largest plan file read.
pub const MAX_PLAN_BYTES: usize = 1024 * 1024;
/// Most targets in one plan.
pub const MAX_TARGETS: usize = 1000;
/// The longest Slurm time limit a target may ask for, in minutes (one week).
pub const MAX_TIME_LIMIT_MINUTES: u64 = 7 * 24 * 60;

const TOP: ClosedKeys<'static> = ClosedKeys::new(&[
    "commit",
    "fleet_id",
    "hosts",
    "repository",
    "schema",
    "targets",
    "upstream",
]);
const HOST: ClosedKeys<'static> = ClosedKeys::new(&["host_id", "public_key", "signing_key"]);
const TARGET: ClosedKeys<'static> = ClosedKeys::with_optional(
    &["host_id", "id", "variant", "workload"],
    &["host_id", "id", "runs_on", "slurm", "variant", "workload"],
);
const SLURM: ClosedKeys<'static> = ClosedKeys::new(&[
    "constraint",
    "gres",
    "nodelist",
    "partition",
    "time_limit_minutes",
]);

/// A validated fleet plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The fleet's id (`[a-z0-9][a-z0-9._-]{0,127}`): names jobs, workflows and artifacts.
    pub fleet_id: String,
    /// What each node clones (a URL or a path the nodes can reach).
    pub repository: String,
    /// The commit every target runs: 40 lowercase hex digits, reachable from `upstream`.
    pub commit: String,
    /// The upstream branch the commit must be reachable from (`origin/main`).
    pub upstream: String,
    /// The hosts that sign, in plan order.
    pub hosts: Vec<Host>,
    /// The targets, in plan order.
    pub targets: Vec<Target>,
}

/// One host that runs targets and signs their receipts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// The host id its receipts must carry.
    pub host_id: String,
    /// Its OpenSSH Ed25519 public key line: the only key trusted for its receipts.
    pub public_key: String,
    /// Where its private signing key lies on the host itself (absolute path).
    pub signing_key: String,
}

/// One target: a workload variant on one host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The target id (`[a-z0-9][a-z0-9._-]{0,127}`): its directory in the evidence tree.
    pub id: String,
    /// The host it must run on (one of the plan's hosts).
    pub host_id: String,
    /// The workload, relative to the repository root, under `qualification/workloads/`.
    pub workload: String,
    /// The variant id.
    pub variant: String,
    /// How Slurm selects the host, when the target runs on Slurm.
    pub slurm: Option<SlurmSelect>,
    /// The runner labels GitHub Actions selects by (`runs-on`), when it runs there.
    pub runs_on: Option<Vec<String>>,
}

/// How Slurm places one target.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlurmSelect {
    /// `--partition`.
    pub partition: String,
    /// `--nodelist`, when the target names its node.
    pub nodelist: Option<String>,
    /// `--constraint` (node features: the counterpart of runner labels).
    pub constraint: Option<String>,
    /// `--gres` (e.g. `gpu:1`).
    pub gres: Option<String>,
    /// `--time`, in minutes: Slurm ends the task (state `TIMEOUT`) after it.
    pub time_limit_minutes: u64,
}

impl Plan {
    /// The host entry of `host_id`.
    pub fn host(&self, host_id: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.host_id == host_id)
    }
}

/// Why a plan could not be used. Messages read after "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Unreadable, too large, or not strict JSON.
    #[error("read the fleet plan: {0}")]
    Load(#[from] qual_json::LoadError),
    /// Strict JSON, but not a valid plan; every violation is listed.
    #[error("validate the fleet plan {path}: {} violation(s)", .violations.len())]
    Invalid {
        /// The plan path.
        path: String,
        /// Every violation, with its JSON pointer.
        violations: Vec<Violation>,
    },
}

/// Reads and validates the plan at `path`.
pub fn load(path: &Path) -> Result<Plan, PlanError> {
    let limits = Limits {
        max_bytes: MAX_PLAN_BYTES,
        ..Limits::default()
    };
    let doc = qual_json::read_document(path, limits)?;
    parse(&doc.value).map_err(|violations| PlanError::Invalid {
        path: path.display().to_string(),
        violations,
    })
}

/// Validates a parsed plan, reporting every violation.
pub fn parse(v: &Value) -> Result<Plan, Vec<Violation>> {
    let mut out = Violations::new();
    let Some(top) = v.as_object() else {
        out.push("", "must be a JSON object");
        return Err(out.into_vec());
    };
    out.keys("", &TOP.check(top), &qual_json::keys::MISSING_UNKNOWN);
    if top.contains_key("schema") && top.get("schema").and_then(Value::as_str) != Some(PLAN_SCHEMA)
    {
        out.push("/schema", format!("must be {PLAN_SCHEMA:?}"));
    }
    let fleet_id = id(&mut out, top, "", "fleet_id");
    let repository = text(&mut out, top, "", "repository");
    let commit = text(&mut out, top, "", "commit");
    if top.contains_key("commit") && !qual_git::is_commit_id(&commit) {
        out.push(
            "/commit",
            "must be a full commit id (40 lowercase hex digits), never a branch or a dirty tree",
        );
    }
    let upstream = text(&mut out, top, "", "upstream");
    if upstream.starts_with('-') {
        out.push("/upstream", "must not start with '-'");
    }
    let hosts = hosts(&mut out, top.get("hosts"));
    let known: BTreeSet<&str> = hosts.iter().map(|h| h.host_id.as_str()).collect();
    let targets = targets(&mut out, top.get("targets"), &known);
    let plan = Plan {
        fleet_id,
        repository,
        commit,
        upstream,
        hosts,
        targets,
    };
    out.finish(plan)
}

fn text(out: &mut Violations, o: &Object, at: &str, key: &str) -> String {
    match o.get(key) {
        None => String::new(),
        Some(Value::String(s)) if s.is_empty() => {
            out.push(format!("{at}/{key}"), "must not be empty");
            String::new()
        }
        Some(Value::String(s)) if s.chars().any(char::is_control) => {
            out.push(format!("{at}/{key}"), "must not contain control characters");
            String::new()
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            out.push(format!("{at}/{key}"), "must be a string");
            String::new()
        }
    }
}

fn optional_text(out: &mut Violations, o: &Object, at: &str, key: &str) -> Option<String> {
    match o.get(key) {
        Some(Value::Null) | None => None,
        Some(_) => Some(text(out, o, at, key)),
    }
}

fn id(out: &mut Violations, o: &Object, at: &str, key: &str) -> String {
    let s = text(out, o, at, key);
    if !s.is_empty() && !qual_receipt::validate::is_result_id(&s) {
        out.push(
            format!("{at}/{key}"),
            "must match ^[a-z0-9][a-z0-9._-]{0,127}$",
        );
    }
    s
}

fn array<'v>(out: &mut Violations, v: Option<&'v Value>, at: &str) -> &'v [Value] {
    match v {
        None => &[],
        Some(Value::Array(items)) if items.is_empty() => {
            out.push(at, "must not be empty");
            &[]
        }
        Some(Value::Array(items)) if items.len() > MAX_TARGETS => {
            out.push(at, format!("must have at most {MAX_TARGETS} entries"));
            &[]
        }
        Some(Value::Array(items)) => items,
        Some(_) => {
            out.push(at, "must be an array");
            &[]
        }
    }
}

/// The objects of the array at `at`, each with its pointer, their keys checked against
/// `keys`; an entry that is not an object is a violation and left out.
fn closed_objects<'v>(
    out: &mut Violations,
    v: Option<&'v Value>,
    at: &str,
    keys: &ClosedKeys<'_>,
) -> Vec<(String, &'v Object)> {
    let mut objects = Vec::new();
    for (i, item) in array(out, v, at).iter().enumerate() {
        let at = format!("{at}/{i}");
        match item.as_object() {
            Some(o) => {
                out.keys(&at, &keys.check(o), &qual_json::keys::MISSING_UNKNOWN);
                objects.push((at, o));
            }
            None => out.push(at, "must be an object"),
        }
    }
    objects
}

fn hosts(out: &mut Violations, v: Option<&Value>) -> Vec<Host> {
    let mut hosts: Vec<Host> = Vec::new();
    for (at, o) in closed_objects(out, v, "/hosts", &HOST) {
        let host_id = text(out, o, &at, "host_id");
        if !host_id.is_empty() && !qual_receipt::validate::is_host_id(&host_id) {
            out.push(
                format!("{at}/host_id"),
                "must match ^[a-z0-9][a-z0-9._-]{1,63}$",
            );
        }
        if hosts
            .iter()
            .any(|h| !host_id.is_empty() && h.host_id == host_id)
        {
            out.push(format!("{at}/host_id"), format!("repeats {host_id:?}"));
        }
        let public_key = text(out, o, &at, "public_key");
        if !public_key.is_empty() {
            if let Err(e) = qual_attest::parse_public_key(&public_key) {
                out.push(format!("{at}/public_key"), e);
            } else if let Some(other) = hosts.iter().find(|h| h.public_key == public_key) {
                out.push(
                    format!("{at}/public_key"),
                    format!(
                        "is also the key of {:?}: each host signs with its own",
                        other.host_id
                    ),
                );
            }
        }
        let signing_key = text(out, o, &at, "signing_key");
        if !signing_key.is_empty() && !signing_key.starts_with('/') {
            out.push(
                format!("{at}/signing_key"),
                "must be an absolute path on the host",
            );
        }
        hosts.push(Host {
            host_id,
            public_key,
            signing_key,
        });
    }
    hosts
}

fn targets(out: &mut Violations, v: Option<&Value>, known: &BTreeSet<&str>) -> Vec<Target> {
    let mut targets: Vec<Target> = Vec::new();
    for (at, o) in closed_objects(out, v, "/targets", &TARGET) {
        let id = id(out, o, &at, "id");
        if targets.iter().any(|t| !id.is_empty() && t.id == id) {
            out.push(format!("{at}/id"), format!("repeats {id:?}"));
        }
        let host_id = text(out, o, &at, "host_id");
        if !host_id.is_empty() && !known.contains(host_id.as_str()) {
            out.push(
                format!("{at}/host_id"),
                format!("{host_id:?} is not a host of the plan"),
            );
        }
        let workload = text(out, o, &at, "workload");
        if !workload.is_empty() && !is_workload_path(&workload) {
            out.push(
                format!("{at}/workload"),
                "must be a relative path qualification/workloads/<name>.json (no '..', no '\\')",
            );
        }
        let variant = text(out, o, &at, "variant");
        if !variant.is_empty() && !qual_receipt::validate::is_result_id(&variant) {
            out.push(
                format!("{at}/variant"),
                "must match ^[a-z0-9][a-z0-9._-]{0,127}$",
            );
        }
        let slurm = o
            .get("slurm")
            .and_then(|s| slurm(out, s, &format!("{at}/slurm")));
        let runs_on = o
            .get("runs_on")
            .map(|l| labels(out, l, &format!("{at}/runs_on")));
        if !o.contains_key("slurm") && !o.contains_key("runs_on") {
            out.push(at, "must say where it runs: slurm, runs_on, or both");
        }
        targets.push(Target {
            id,
            host_id,
            workload,
            variant,
            slurm,
            runs_on,
        });
    }
    targets
}

fn is_workload_path(p: &str) -> bool {
    p.strip_prefix("qualification/workloads/")
        .is_some_and(|rest| {
            rest.ends_with(".json")
                && !p.contains('\\')
                && rest
                    .split('/')
                    .all(|c| !c.is_empty() && c != "." && c != "..")
        })
}

/// A Slurm word: letters, digits and `._-:,[]=+@` (names, lists, `gpu:1`, `node[1-2]`).
fn is_slurm_word(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"._-:,[]=+@&|".contains(&c))
}

fn slurm(out: &mut Violations, v: &Value, at: &str) -> Option<SlurmSelect> {
    let Some(o) = v.as_object() else {
        out.push(at, "must be an object");
        return None;
    };
    out.keys(at, &SLURM.check(o), &qual_json::keys::MISSING_UNKNOWN);
    let partition = text(out, o, at, "partition");
    let nodelist = optional_text(out, o, at, "nodelist");
    let constraint = optional_text(out, o, at, "constraint");
    let gres = optional_text(out, o, at, "gres");
    for (key, value) in [
        ("partition", Some(&partition)),
        ("nodelist", nodelist.as_ref()),
        ("constraint", constraint.as_ref()),
        ("gres", gres.as_ref()),
    ] {
        if let Some(s) = value.filter(|s| !s.is_empty() && !is_slurm_word(s)) {
            out.push(
                format!("{at}/{key}"),
                format!("{s:?} is not a Slurm name (letters, digits and ._-:,[]=+@&|)"),
            );
        }
    }
    let minutes = match o.get("time_limit_minutes") {
        None => 0,
        Some(v) => match v.as_int().and_then(|i| i.as_u64()) {
            Some(m) if (1..=MAX_TIME_LIMIT_MINUTES).contains(&m) => m,
            _ => {
                out.push(
                    format!("{at}/time_limit_minutes"),
                    format!("must be an integer from 1 to {MAX_TIME_LIMIT_MINUTES}"),
                );
                0
            }
        },
    };
    Some(SlurmSelect {
        partition,
        nodelist,
        constraint,
        gres,
        time_limit_minutes: minutes,
    })
}

fn labels(out: &mut Violations, v: &Value, at: &str) -> Vec<String> {
    let mut labels = Vec::new();
    for (i, item) in array(out, Some(v), at).iter().enumerate() {
        match item.as_str() {
            Some(s)
                if !s.is_empty()
                    && s.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c)) =>
            {
                if labels.iter().any(|l| l == s) {
                    out.push(format!("{at}/{i}"), format!("repeats {s:?}"));
                }
                labels.push(s.to_owned());
            }
            _ => out.push(
                format!("{at}/{i}"),
                "must be a runner label (letters, digits and ._-)",
            ),
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHCrEiq7YcGhHhjG02jplSiTo5Uyf//iabjCyycQ1v87 node1";

    fn good() -> String {
        format!(
            r#"{{"schema": "kiln-qual.fleet-plan.v1", "fleet_id": "cpu-smoke",
  "repository": "/srv/git/kiln-qual.git", "commit": "0123456789abcdef0123456789abcdef01234567",
  "upstream": "origin/main",
  "hosts": [{{"host_id": "node1", "public_key": "{KEY}", "signing_key": "/etc/kiln-qual/key"}}],
  "targets": [{{"id": "smoke", "host_id": "node1", "workload": "qualification/workloads/cpu-smoke-v1.json",
    "variant": "cpu", "runs_on": ["self-hosted", "node1"],
    "slurm": {{"partition": "qual", "nodelist": "node1", "constraint": null, "gres": null, "time_limit_minutes": 5}}}}]}}"#
        )
    }

    fn violations(text: &str) -> Vec<String> {
        match parse(&qual_json::from_str(text).unwrap()) {
            Ok(_) => Vec::new(),
            Err(v) => v.iter().map(ToString::to_string).collect(),
        }
    }

    /// `schemas/fleet-plan-v1.schema.json` names exactly the validator's keys.
    #[test]
    fn the_schema_keys_are_the_validators() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/fleet-plan-v1.schema.json");
        let schema = qual_json::read_document(&path, Limits::default())
            .unwrap()
            .value;
        let keys = |pointer: &str| -> Vec<String> {
            let mut k: Vec<String> = schema
                .at_pointer(pointer)
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            k.sort();
            k
        };
        let want = |c: &[&str]| -> Vec<String> {
            let mut k: Vec<String> = c.iter().map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        assert_eq!(
            keys("/properties"),
            want(&[
                "commit",
                "fleet_id",
                "hosts",
                "repository",
                "schema",
                "targets",
                "upstream"
            ])
        );
        assert_eq!(
            keys("/definitions/host/properties"),
            want(&["host_id", "public_key", "signing_key"])
        );
        assert_eq!(
            keys("/definitions/target/properties"),
            want(&["host_id", "id", "runs_on", "slurm", "variant", "workload"])
        );
        assert_eq!(
            keys("/definitions/target/properties/slurm/properties"),
            want(&[
                "constraint",
                "gres",
                "nodelist",
                "partition",
                "time_limit_minutes"
            ])
        );
        for (o, c) in [
            (&TOP, "/properties"),
            (&HOST, "/definitions/host/properties"),
            (&SLURM, "/definitions/target/properties/slurm/properties"),
        ] {
            let obj = schema.at_pointer(c).as_object().unwrap();
            assert!(o.check(obj).is_empty(), "{c}");
        }
    }

    #[test]
    fn the_committed_example_is_valid() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../qualification/fleets/cpu-smoke.json");
        let plan = load(&path).unwrap();
        assert_eq!(plan.targets.len(), 3);
        assert!(plan.targets[2].slurm.is_none());
    }

    #[test]
    fn a_good_plan_parses() {
        let plan = parse(&qual_json::from_str(&good()).unwrap()).unwrap();
        assert_eq!(
            plan.targets[0].slurm.as_ref().unwrap().time_limit_minutes,
            5
        );
        assert_eq!(
            plan.host("node1").unwrap().signing_key,
            "/etc/kiln-qual/key"
        );
    }

    #[test]
    fn every_violation_is_reported_with_its_pointer() {
        let bad = good()
            .replace("\"cpu-smoke\"", "\"Cpu Smoke\"")
            .replace("0123456789abcdef0123456789abcdef01234567", "main")
            .replace(
                "\"host_id\": \"node1\", \"workload\"",
                "\"host_id\": \"node9\", \"workload\"",
            )
            .replace(
                "qualification/workloads/cpu",
                "qualification/workloads/../cpu",
            )
            .replace(
                "\"time_limit_minutes\": 5",
                "\"time_limit_minutes\": 0, \"extra\": 1",
            )
            .replace("\"self-hosted\"", "\"self hosted\"");
        assert_eq!(
            violations(&bad),
            [
                "/fleet_id: must match ^[a-z0-9][a-z0-9._-]{0,127}$",
                "/commit: must be a full commit id (40 lowercase hex digits), never a branch or a dirty tree",
                "/targets/0/host_id: \"node9\" is not a host of the plan",
                "/targets/0/workload: must be a relative path qualification/workloads/<name>.json (no '..', no '\\')",
                "/targets/0/slurm: has unknown keys: extra",
                "/targets/0/slurm/time_limit_minutes: must be an integer from 1 to 10080",
                "/targets/0/runs_on/0: must be a runner label (letters, digits and ._-)",
            ]
        );
    }

    #[test]
    fn missing_and_unknown_keys_and_bad_keys_are_refused() {
        assert_eq!(
            violations(r#"{"schema": "x", "surprise": 1, "hosts": [{"host_id": "node1", "public_key": "ssh-rsa AAAA", "signing_key": "key"}], "targets": []}"#),
            [
                "missing keys: commit, fleet_id, repository, upstream",
                "has unknown keys: surprise",
                "/schema: must be \"kiln-qual.fleet-plan.v1\"",
                "/hosts/0/public_key: not an OpenSSH public key line: Base64 encoding error: invalid Base64 length",
                "/hosts/0/signing_key: must be an absolute path on the host",
                "/targets: must not be empty",
            ]
        );
    }
}
