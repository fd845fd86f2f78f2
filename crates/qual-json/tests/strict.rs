//! The original implementation's strict-JSON test cases, plus property tests.

use proptest::prelude::*;
use qual_json::{from_slice, from_str, to_canonical_string, Limits, Number, Reason, Value};

fn reason(text: &str) -> Reason {
    from_str(text).unwrap_err().reason
}

#[test]
fn exact_values_are_preserved() {
    let v = from_str(r#"{"a": 9007199254740993, "b": 0.5, "c": true}"#).unwrap();
    assert_eq!(
        v.get("a").unwrap().as_int().unwrap().to_string(),
        "9007199254740993"
    );
    assert_eq!(v.get("b").unwrap(), &Value::Number(Number::Float(0.5)));
    assert_eq!(v.get("c").unwrap(), &Value::Bool(true));
}

#[test]
fn negative_zero_becomes_positive_zero() {
    let v = from_str("[0.0,-0.0]").unwrap();
    for item in v.as_array().unwrap() {
        match item {
            Value::Number(Number::Float(f)) => assert!(f.is_sign_positive() && *f == 0.0),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn duplicate_keys_are_found_in_small_and_large_objects() {
    // Objects switch from a linear scan to a hash set past 16 keys; a duplicate is found at
    // every position on both sides of that switch, with its pointer.
    for n in [1usize, 2, 15, 16, 17, 40, 300] {
        for dup_of in [0, n / 2, n - 1] {
            let mut body: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {i}")).collect();
            body.push(format!("\"k{dup_of}\": 0"));
            let e = from_str(&format!("{{{}}}", body.join(", "))).unwrap_err();
            assert_eq!(
                e.reason,
                Reason::DuplicateKey,
                "{n} keys, duplicate of k{dup_of}"
            );
            assert_eq!(e.message, format!("duplicate JSON object key: k{dup_of}"));
            assert_eq!(e.pointer, format!("/k{dup_of}"));
        }
        let unique: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {i}")).collect();
        let v = from_str(&format!("{{{}}}", unique.join(", "))).unwrap();
        assert_eq!(v.as_object().unwrap().len(), n);
    }
}

#[test]
fn duplicate_keys_are_rejected_at_every_depth() {
    let e = from_str(r#"{"outer": {"value": 1, "\u0076alue": 2}}"#).unwrap_err();
    assert_eq!(e.reason, Reason::DuplicateKey);
    assert_eq!(e.message, "duplicate JSON object key: value");
    assert_eq!(e.pointer, "/outer/value");
}

#[test]
fn non_finite_and_lossy_floats_have_stable_errors() {
    for (text, msg) in [
        ("NaN", "non-finite JSON number is not allowed: NaN"),
        ("Infinity", "non-finite JSON number is not allowed: Infinity"),
        ("-Infinity", "non-finite JSON number is not allowed: -Infinity"),
        ("1e400", "JSON number overflows finite float range: 1e400"),
        ("1e-4000", "JSON number underflows finite float range: 1e-4000"),
        ("8.9999999999999999", "JSON number is not exactly representable: 8.9999999999999999"),
        ("9007199254740993.0", "JSON number is not exactly representable: 9007199254740993.0"),
        ("4e-324", "JSON number is not exactly representable: 4e-324"),
        (
            "0.1000000000000000055511151231257827021181583404541015625",
            "JSON number is not exactly representable: 0.1000000000000000055511151231257827021181583404541015625",
        ),
    ] {
        let e = from_str(&format!("[{text}]")).unwrap_err();
        assert_eq!(e.message, msg);
        assert_eq!(e.pointer, "/0");
    }
}

#[test]
fn exact_floats_are_accepted() {
    for text in [
        "0.10", "1e5", "1.0", "1e2", "0.1", "5e-324", "-0.0", "0e10", "1E+2",
    ] {
        assert!(from_str(text).is_ok(), "{text}");
    }
}

#[test]
fn integer_digit_limit_is_exact() {
    let ok = format!("1{}", "0".repeat(4095));
    assert!(from_str(&ok).is_ok());
    assert!(from_str(&format!("-{ok}")).is_ok());
    let e = from_str(&format!("1{}", "0".repeat(4096))).unwrap_err();
    assert_eq!(e.reason, Reason::IntegerTooLong);
    assert_eq!(e.message, "JSON integer exceeds 4096 digits");
}

#[test]
fn encodings_other_than_plain_utf8_are_refused() {
    assert_eq!(
        from_slice(b"\xEF\xBB\xBF{}").unwrap_err().reason,
        Reason::Bom
    );
    assert_eq!(
        from_slice(b"\xFF{}").unwrap_err().reason,
        Reason::InvalidUtf8
    );
    let utf16: Vec<u8> = "\u{feff}{\"a\":1}"
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    assert!(from_slice(&utf16).is_err());
}

#[test]
fn syntax_errors() {
    for text in [
        "",
        "{",
        "[1,]",
        "{\"a\" 1}",
        "01",
        "1 2",
        "\"a\nb\"",
        "tru",
        "{'a':1}",
        "[1.]",
    ] {
        assert!(from_str(text).is_err(), "{text:?}");
    }
    assert_eq!(reason("1 2"), Reason::TrailingData);
    assert_eq!(reason("\"\\ud800\""), Reason::LoneSurrogate);
}

#[test]
fn depth_and_size_limits_hold() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(reason(&deep), Reason::TooDeep);
    let limits = Limits {
        max_bytes: 10,
        ..Limits::default()
    };
    assert_eq!(
        qual_json::from_slice_with(b"[1,2,3,4,5,6]", limits)
            .unwrap_err()
            .reason,
        Reason::TooLarge
    );
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-zé~/]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn canonical_text_round_trips(v in arb_value()) {
        let text = to_canonical_string(&v);
        let back = from_str(&text).unwrap();
        prop_assert_eq!(to_canonical_string(&back), text);
    }

    #[test]
    fn canonical_agrees_with_serde_json_on_parse(v in arb_value()) {
        let text = to_canonical_string(&v);
        let serde: serde_json::Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(Value::from_serde(&serde).to_serde(), v.to_serde());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = from_slice(&bytes);
    }
}
