//! Bounded `details` text (at most [`DETAILS_LIMIT`] characters).
//!
//! [`join_details`] drops empty parts and exact duplicates (first occurrence wins). When no
//! part is a JSON object the parts are joined with `; `. Otherwise the first JSON-object part
//! is the envelope: later JSON objects go to its `additional_case_details` list and plain-text
//! parts to its `runner_failures` list; the merged object is written as canonical JSON.
//!
//! [`compact`] bounds the text: plain text keeps its head and tail around the marker
//! `...[truncated sha256:<hex of the full text> chars=<n>]...`; a JSON object gains
//! `_truncation: {characters, omitted_fields, sha256}`, its longest strings are shortened (each
//! keeps a marker), then its largest unprotected fields are removed (`_truncation`, `error`
//! and `milestones` are protected), so the result still parses as an object.

use qual_json::{Object, Value};

/// Largest `details` length in characters.
pub const DETAILS_LIMIT: usize = 2048;
const PROTECTED: [&str; 3] = ["_truncation", "error", "milestones"];

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn marker(full: &str) -> String {
    format!(
        "...[truncated {} chars={}]...",
        qual_json::sha256_prefixed(full.as_bytes()),
        chars(full)
    )
}

fn compact_plain(text: &str, max: usize) -> String {
    let n = chars(text);
    if n <= max {
        return text.to_string();
    }
    let m = marker(text);
    let room = max.saturating_sub(chars(&m));
    let head = room / 2;
    let tail = room - head;
    let head_s: String = text.chars().take(head).collect();
    let tail_s: String = text.chars().skip(n - tail).collect();
    format!("{head_s}{m}{tail_s}")
}

/// Shortens a JSON object until its canonical text fits `max`.
fn compact_object(mut obj: Object, full: &str, max: usize) -> String {
    let mut omitted = 0u64;
    let trunc = |omitted: u64| {
        let mut t = Object::new();
        t.insert("characters", Value::from(chars(full) as u64));
        t.insert("omitted_fields", Value::from(omitted));
        t.insert(
            "sha256",
            Value::from(qual_json::sha256_prefixed(full.as_bytes())),
        );
        Value::Object(t)
    };
    let text_of = |o: &Object| qual_json::to_canonical_string(&Value::Object(o.clone()));
    obj.insert("_truncation", trunc(0));
    // 1. Shorten every long string, then the longest repeatedly.
    let cap = 512.min(160.max(max / 3));
    let mut v = Value::Object(obj);
    shorten_strings(&mut v, cap);
    let Value::Object(mut obj) = v else {
        unreachable!()
    };
    for _ in 0..64 {
        let t = text_of(&obj);
        if chars(&t) <= max {
            return t;
        }
        let mut v = Value::Object(obj);
        let changed = shorten_longest(&mut v, chars(&t) - max);
        let Value::Object(o) = v else { unreachable!() };
        obj = o;
        if !changed {
            break;
        }
    }
    // 2. Remove the largest unprotected fields.
    loop {
        let t = text_of(&obj);
        if chars(&t) <= max {
            return t;
        }
        let victim = obj
            .iter()
            .filter(|(k, _)| !PROTECTED.contains(&k.as_str()))
            .max_by_key(|(_, v)| chars(&qual_json::to_canonical_string(v)))
            .map(|(k, _)| k.clone());
        let Some(k) = victim else { break };
        obj.remove(&k);
        omitted += 1;
        obj.insert("_truncation", trunc(omitted));
    }
    // 3. Minimal envelope.
    let mut min = Object::new();
    min.insert(
        "_truncation",
        trunc(omitted + obj.len().saturating_sub(1) as u64),
    );
    for k in ["error", "milestones"] {
        if let Some(v) = obj.get(k) {
            min.insert(k, v.clone());
        }
    }
    let t = text_of(&min);
    if chars(&t) <= max {
        return t;
    }
    let mut v = Value::Object(min);
    shorten_strings(&mut v, 96);
    let t = qual_json::to_canonical_string(&v);
    if chars(&t) <= max {
        t
    } else {
        compact_plain(full, max)
    }
}

fn shorten_text(s: &str, keep: usize) -> String {
    compact_plain(s, keep.max(chars(&marker(s)) + 16))
}

fn map_strings(v: &mut Value, f: &mut dyn FnMut(&mut String) -> bool) -> bool {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => {
            let mut changed = false;
            for x in a.iter_mut() {
                changed |= map_strings(x, f);
            }
            changed
        }
        Value::Object(o) => {
            let entries: Vec<(String, Value)> =
                o.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let mut changed = false;
            let mut rebuilt = Object::new();
            for (k, mut child) in entries {
                if k != "_truncation" {
                    changed |= map_strings(&mut child, f);
                }
                rebuilt.insert(k, child);
            }
            *o = rebuilt;
            changed
        }
        _ => false,
    }
}

fn shorten_strings(v: &mut Value, cap: usize) {
    map_strings(v, &mut |s| {
        if chars(s) > cap {
            *s = shorten_text(s, cap);
            true
        } else {
            false
        }
    });
}

fn shorten_longest(v: &mut Value, excess: usize) -> bool {
    let mut longest = 0usize;
    map_strings(&mut v.clone(), &mut |s| {
        longest = longest.max(chars(s));
        false
    });
    if longest <= 96 {
        return false;
    }
    let target = 96
        .max(longest.saturating_sub(excess + 32))
        .min(longest / 2 + 1)
        .max(96);
    let mut done = false;
    map_strings(v, &mut |s| {
        if !done && chars(s) == longest {
            done = true;
            *s = shorten_text(s, target);
            true
        } else {
            false
        }
    })
}

/// Bounds `text` to `max` characters (see module docs).
pub fn compact(text: &str, max: usize) -> String {
    if chars(text) <= max {
        return text.to_string();
    }
    match qual_json::from_str(text) {
        Ok(Value::Object(o)) => compact_object(o, text, max),
        _ => compact_plain(text, max),
    }
}

/// Joins detail parts (see module docs); `None` when nothing remains.
pub fn join_details<S: AsRef<str>>(parts: &[S]) -> Option<String> {
    let mut kept: Vec<&str> = Vec::new();
    for p in parts {
        let p = p.as_ref();
        if !p.is_empty() && !kept.contains(&p) {
            kept.push(p);
        }
    }
    if kept.is_empty() {
        return None;
    }
    let parsed: Vec<Option<Object>> = kept
        .iter()
        .map(|p| match qual_json::from_str(p) {
            Ok(Value::Object(o)) => Some(o),
            _ => None,
        })
        .collect();
    let Some(first) = parsed.iter().position(Option::is_some) else {
        return Some(compact(&kept.join("; "), DETAILS_LIMIT));
    };
    let mut env = parsed[first].clone().expect("object");
    let mut additional = Vec::new();
    let mut failures: Vec<Value> = match env.get("runner_failures") {
        None => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(|x| x.as_str().is_some()) => a.clone(),
        Some(other) => vec![Value::from(format!(
            "malformed prior runner_failures={}",
            qual_json::to_canonical_string(other)
        ))],
    };
    for (i, (p, o)) in kept.iter().zip(&parsed).enumerate() {
        if i == first {
            continue;
        }
        match o {
            Some(o) => additional.push(Value::Object(o.clone())),
            None => {
                let v = Value::from(*p);
                if !failures.contains(&v) {
                    failures.push(v);
                }
            }
        }
    }
    if !additional.is_empty() {
        env.insert("additional_case_details", Value::Array(additional));
    }
    if !failures.is_empty() {
        env.insert("runner_failures", Value::Array(failures));
    }
    let text = qual_json::to_canonical_string(&Value::Object(env));
    Some(compact(&text, DETAILS_LIMIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_parts_join_and_deduplicate() {
        assert_eq!(join_details::<&str>(&[]), None);
        assert_eq!(join_details(&["", ""]), None);
        assert_eq!(join_details(&["a", "b", "a"]).as_deref(), Some("a; b"));
    }

    #[test]
    fn long_plain_text_keeps_head_tail_and_marker() {
        let t = "x".repeat(5000);
        let c = compact(&t, DETAILS_LIMIT);
        assert!(chars(&c) <= DETAILS_LIMIT);
        assert!(c.contains("[truncated sha256:"));
        assert!(c.contains("chars=5000"));
    }

    #[test]
    fn json_details_keep_their_object_shape() {
        let obj = format!(
            r#"{{"error":"{}","milestones":["a"],"other":"y"}}"#,
            "e".repeat(4000)
        );
        let j = join_details(&[obj.as_str(), "exit code 1 not in [0]"]).unwrap();
        assert!(chars(&j) <= DETAILS_LIMIT);
        let v = qual_json::from_str(&j).unwrap();
        let o = v.as_object().unwrap();
        assert!(o.contains_key("milestones"));
        assert_eq!(
            o.get("runner_failures").unwrap().as_array().unwrap()[0].as_str(),
            Some("exit code 1 not in [0]")
        );
        assert!(o
            .get("error")
            .unwrap()
            .as_str()
            .unwrap()
            .contains("[truncated sha256:"));
        let t = o.get("_truncation").unwrap();
        assert!(qual_json::is_sha256_digest(
            t.get("sha256").unwrap().as_str().unwrap()
        ));
    }

    #[test]
    fn second_object_goes_to_additional_details() {
        let j = join_details(&[r#"{"a":1}"#, r#"{"b":2}"#]).unwrap();
        assert_eq!(j, r#"{"a":1,"additional_case_details":[{"b":2}]}"#);
    }
}
