//! Property tests: exact decimal arithmetic, timestamp parsing round trips, and the validator's
//! totality (any edit of a valid receipt yields a verdict, never a panic, and a re-serialised
//! valid receipt stays valid).

use crate::common;

use proptest::prelude::*;
use qual_receipt::decimal::Decimal;
use qual_receipt::validate;
use std::cmp::Ordering;

fn civil_to_text(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64, ms: i64) -> String {
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

proptest! {
    #[test]
    fn decimal_add_then_sub_is_exact(a in any::<i64>(), b in any::<i64>(), ea in -30i64..30, eb in -30i64..30) {
        let x = Decimal::parse(&format!("{a}e{ea}")).unwrap();
        let y = Decimal::parse(&format!("{b}e{eb}")).unwrap();
        prop_assert_eq!(x.add(&y).sub(&y).cmp_value(&x), Ordering::Equal);
        prop_assert_eq!(x.sub(&y).cmp_value(&y.sub(&x).mul(&Decimal::parse("-1").unwrap())), Ordering::Equal);
    }

    #[test]
    fn decimal_order_agrees_with_float_order(a in -1e12f64..1e12, b in -1e12f64..1e12) {
        let (x, y) = (Decimal::from_f64(a), Decimal::from_f64(b));
        prop_assert_eq!(x.cmp_value(&y), a.partial_cmp(&b).unwrap());
    }

    #[test]
    fn decimal_text_round_trips(a in any::<i64>(), e in -40i64..40) {
        let x = Decimal::parse(&format!("{a}e{e}")).unwrap();
        let again = Decimal::parse(&x.to_string()).unwrap();
        prop_assert_eq!(x.cmp_value(&again), Ordering::Equal);
    }

    #[test]
    fn timestamps_are_ordered_like_their_fields(
        y in 1970i64..2400, mo in 1i64..=12, d in 1i64..=28, h in 0i64..24, mi in 0i64..60,
        s in 0i64..60, ms in 0i64..1000, step in 1i64..100_000_000,
    ) {
        let t = validate::parse_utc_timestamp(&civil_to_text(y, mo, d, h, mi, s, ms)).unwrap();
        prop_assert_eq!(t.rem_euclid(1_000_000), i128::from(ms) * 1000);
        let later = t + i128::from(step) * 1000;
        prop_assert!(later > t);
        // The basic (compact) form names the same instant.
        let compact = format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}.{ms:03}Z");
        prop_assert_eq!(validate::parse_utc_timestamp(&compact).unwrap(), t);
    }

    #[test]
    fn validator_is_total_under_random_edits(
        pointer_choice in 0usize..12,
        replacement in prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            (-1e300f64..1e300).prop_map(serde_json::Value::from),
            "[a-z_ ]{0,12}".prop_map(serde_json::Value::from),
            Just(serde_json::json!([])),
            Just(serde_json::json!({})),
        ],
    ) {
        let pointers = [
            "/schema_version", "/receipt_id", "/created_at_utc", "/source/tree_hash",
            "/qualification/verdict", "/qualification/duration_seconds", "/environment/device",
            "/environment/device/memory_bytes", "/results/0/status", "/results/0/metrics/0/value",
            "/artifacts/0/bytes", "/effective_config/x",
        ];
        let mut r = common::environment_json();
        common::set(&mut r, pointers[pointer_choice], replacement);
        let v = common::strict(&r);
        let first = validate::validate(&v);
        // Deterministic, and every violation names a path inside the receipt.
        prop_assert_eq!(&first, &validate::validate(&v));
        for violation in &first {
            prop_assert!(violation.pointer.starts_with("receipt"), "{}", validate::Dotted(violation));
            prop_assert!(!violation.message.is_empty());
        }
    }
}

#[test]
fn valid_receipt_survives_canonical_round_trip() {
    let v = common::environment();
    assert!(validate::validate(&v).is_empty());
    let text = qual_json::to_canonical_string(&v);
    let again = qual_json::from_str(&text).unwrap();
    assert_eq!(qual_json::to_canonical_string(&again), text);
    assert!(validate::validate(&again).is_empty());
}
