//! `oracle check` against the Kiln corpus (`../shared/kiln-corpus/oracles/` and the v2 schema):
//! the retained v1 result is refused with the v1 reason (its self-hash still verifies); a v2
//! document built from the schema out of the retained evidence validates, with the request
//! contract bound (rule 2); and mutating any bound field breaks its self-hash. Without the
//! corpus every trial is reported ignored, and fails with `KIQ_REQUIRE_CORPUS=1`.

use qual_json::Value;
use qual_oracle::check::{check_value, CheckOptions, KILN_V2_SCHEMA, V1_REASON};
use qual_test_fixtures::harness::{self, Trial};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kiln-corpus")
}

fn needs_corpus() -> Result<(), String> {
    harness::needs_dir(&corpus().join("oracles"), "the Kiln corpus")
}

const RESULT: &str =
    "oracles/20260719t003452-rocm-strix-halo-hf-next-token-first-divergence-v1.json";
const REQUEST: &str = "oracles/rocm-strix-halo-greedy-c1-first-divergence-v1.json";

fn load(rel: &str) -> Value {
    qual_json::load_file(&corpus().join(rel), qual_json::Limits::default())
        .expect("corpus file loads strictly")
        .0
}

fn obj(v: &Value) -> qual_json::Object {
    v.as_object().expect("object").clone()
}

fn int(i: i64) -> Value {
    Value::Number(qual_json::Number::Int(i.into()))
}

fn float(f: f64) -> Value {
    Value::Number(qual_json::Number::Float(f))
}

fn process_evidence() -> Value {
    let mut p = qual_json::Object::new();
    p.insert("elapsed_seconds", float(9.5));
    p.insert("schema", Value::from("kiln.hf-process-containment.v1"));
    p.insert("timeout_seconds", float(570.0));
    p.insert("worker_exit_code", int(0));
    Value::Object(p)
}

/// The `required` list of a schema object (top level or a `$defs` entry).
fn required(schema: &Value, def: Option<&str>) -> Vec<String> {
    let node = match def {
        None => schema,
        Some(d) => schema.get("$defs").and_then(|x| x.get(d)).expect("def"),
    };
    let mut r: Vec<String> = node
        .get("required")
        .and_then(Value::as_array)
        .expect("required")
        .iter()
        .map(|v| v.as_str().expect("string").to_string())
        .collect();
    r.sort();
    r
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    k.sort();
    k
}

/// A v2 result: the retained evidence, reshaped to the v2 schema's required key sets
/// (process-runner implementation hash, process containment, fingerprint evidence), re-hashed.
fn v2_document() -> Value {
    let v1 = load(RESULT);
    let mut doc = obj(&v1);
    doc.insert("schema", Value::from(KILN_V2_SCHEMA));
    let mut imp = obj(v1.get("implementation").unwrap());
    let sup = imp.remove("supervisor_sha256").unwrap();
    imp.insert("process_runner_sha256", sup);
    let py = imp.get("python_sha256").unwrap().clone();
    doc.insert("implementation", Value::Object(imp));
    let mut con = qual_json::Object::new();
    con.insert("host_available_before_gib", int(25));
    con.insert("network", Value::from("forbidden"));
    con.insert("service", process_evidence());
    doc.insert("containment", Value::Object(con));
    let mut fp = qual_json::Object::new();
    fp.insert(
        "implementation_sha256",
        Value::from(qual_json::sha256_prefixed(
            b"model-fingerprint implementation",
        )),
    );
    fp.insert("python_sha256", py);
    fp.insert("process", process_evidence());
    doc.insert("model_fingerprint", Value::Object(fp));
    let mut v = Value::Object(doc);
    let h = qual_json::self_digest(&v, "result_sha256").unwrap();
    if let Value::Object(o) = &mut v {
        o.insert("result_sha256", Value::from(h));
    }
    v
}

/// A repository root holding the request contract at its `contract_path`.
fn repo_with_request(doc: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cp = doc
        .get("request")
        .and_then(|r| r.get("contract_path"))
        .and_then(Value::as_str)
        .unwrap();
    let dest = dir.path().join(cp);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(corpus().join(REQUEST), &dest).unwrap();
    dir
}

fn v1_is_refused_with_the_v1_reason() {
    let v1 = load(RESULT);
    // The file itself is intact: its self-hash verifies (§9.1).
    assert_eq!(
        qual_json::self_digest(&v1, "result_sha256").unwrap(),
        v1.get("result_sha256").unwrap().as_str().unwrap()
    );
    let errs = qual_oracle::check::check_file(&corpus().join(RESULT), &CheckOptions::default())
        .unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains(V1_REASON), "{errs:?}");
    assert!(errs[0].contains("machine-temperature policy"));
}

fn request_hash_matches_the_spec() {
    let req = load(REQUEST);
    let h = qual_json::canonical_digest(&req);
    assert!(h.starts_with("sha256:fbe61941"), "{h}");
    assert!(h.ends_with("36c4"), "{h}");
}

fn v2_built_from_the_schema_validates_with_its_request() {
    let schema = load("schemas/rocm-hf-next-token-oracle-v2.schema.json");
    let doc = v2_document();
    assert_eq!(keys(&doc), required(&schema, None));
    for (field, def) in [
        ("oracle", "oracleEvidence"),
        ("model_fingerprint", "modelFingerprintEvidence"),
        ("model_identity", "modelIdentity"),
    ] {
        assert_eq!(
            keys(doc.get(field).unwrap()),
            required(&schema, Some(def)),
            "{field}"
        );
    }
    assert_eq!(
        keys(doc.get("containment").unwrap().get("service").unwrap()),
        required(&schema, Some("processEvidence"))
    );
    let repo = repo_with_request(&doc);
    let opts = CheckOptions {
        repo_root: Some(repo.path().to_path_buf()),
        verify_inputs: false,
    };
    let ok = check_value(&doc, &opts).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(ok.schema, KILN_V2_SCHEMA);
    // Rule 2 binds: a request whose candidates differ is refused.
    let mut req = obj(&load(REQUEST));
    req.insert("id", Value::from("another-request"));
    let cp = repo
        .path()
        .join("qualification/oracles/rocm-strix-halo-greedy-c1-first-divergence-v1.json");
    std::fs::remove_file(&cp).unwrap();
    std::fs::write(&cp, qual_json::to_canonical_string(&Value::Object(req))).unwrap();
    let errs = check_value(&doc, &opts).unwrap_err();
    assert!(
        errs.iter().any(|e| e.starts_with("/request/sha256")),
        "{errs:?}"
    );
    assert!(
        errs.iter().any(|e| e.starts_with("/request/id")),
        "{errs:?}"
    );
}

/// Every leaf (JSON pointer, value) of a document.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => o
            .iter()
            .for_each(|(k, x)| leaves(x, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| leaves(x, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

fn mutate(v: &mut Value, path: &[&str]) {
    let Some((first, rest)) = path.split_first() else {
        let new = match &*v {
            Value::Bool(b) => Value::Bool(!*b),
            Value::String(s) => Value::String(format!("{s}x")),
            Value::Number(n) => float(n.as_f64().unwrap() + 1.5),
            Value::Null => Value::Bool(true),
            other => other.clone(),
        };
        *v = new;
        return;
    };
    match v {
        Value::Object(o) => {
            let mut x = o.get(first).unwrap().clone();
            mutate(&mut x, rest);
            o.insert(*first, x);
        }
        Value::Array(a) => mutate(&mut a[first.parse::<usize>().unwrap()], rest),
        _ => unreachable!(),
    }
}

fn every_mutated_bound_field_breaks_the_self_hash() {
    let doc = v2_document();
    let mut ptrs = Vec::new();
    leaves(&doc, String::new(), &mut ptrs);
    assert!(ptrs.len() > 80, "{}", ptrs.len());
    for p in ptrs.iter().filter(|p| *p != "/result_sha256") {
        let parts: Vec<&str> = p[1..].split('/').collect();
        let mut m = doc.clone();
        mutate(&mut m, &parts);
        let errs = check_value(&m, &CheckOptions::default()).unwrap_err();
        if p == "/schema" {
            // Another schema is dispatched elsewhere: refused as unsupported before hashing.
            assert!(
                errs[0].contains("unsupported oracle-result schema"),
                "{errs:?}"
            );
            continue;
        }
        assert!(
            errs.iter().any(|e| e.starts_with("/result_sha256")),
            "mutating {p} did not break the self-hash: {errs:?}"
        );
    }
}

fn main() {
    harness::run(vec![
        Trial::new(
            "v1_is_refused_with_the_v1_reason",
            v1_is_refused_with_the_v1_reason,
        )
        .needs_corpus(needs_corpus()),
        Trial::new(
            "request_hash_matches_the_spec",
            request_hash_matches_the_spec,
        )
        .needs_corpus(needs_corpus()),
        Trial::new(
            "v2_built_from_the_schema_validates_with_its_request",
            v2_built_from_the_schema_validates_with_its_request,
        )
        .needs_corpus(needs_corpus()),
        Trial::new(
            "every_mutated_bound_field_breaks_the_self_hash",
            every_mutated_bound_field_breaks_the_self_hash,
        )
        .needs_corpus(needs_corpus()),
    ])
}
