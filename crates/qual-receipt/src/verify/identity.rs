//! Identity and time: the receipt id against `run-config.json` and the run directory (and a
//! generated id against what it names), and the receipt's timestamps and durations against the
//! recorded run.

use super::*;

pub(super) fn verify_identity(v: &mut Verifier<'_>, receipt: &Value, config: &Value) {
    let id = get(receipt, "/receipt_id");
    v.differs(
        "/receipt_id",
        id,
        get(config, "/receipt_id"),
        "run-config.json records",
    );
    let dir_name = v
        .run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    v.differs(
        "/receipt_id",
        id,
        &Value::from(dir_name.as_str()),
        "the run directory is named",
    );
    for (pointer, key) in [
        ("/qualification/backend", "/backend"),
        ("/workload/id", "/workload_id"),
        ("/workload/sha256", "/workload_sha256"),
        ("/workload/parameters/variant_id", "/variant_id"),
    ] {
        v.differs(
            pointer,
            get(receipt, pointer),
            get(config, key),
            "run-config.json records",
        );
    }
    // A generated id carries the start time and the identity of what ran.
    let id = id.as_str().unwrap_or_default();
    let ts = id.get(..22).unwrap_or_default();
    let generated = ts.len() == 22
        && ts.as_bytes()[8] == b't'
        && ts.ends_with('z')
        && ts[..8]
            .bytes()
            .chain(ts[9..21].bytes())
            .all(|b| b.is_ascii_digit());
    if !generated {
        return;
    }
    let started = get(receipt, "/qualification/started_at_utc")
        .as_str()
        .and_then(|s| parse_utc_timestamp(s).ok());
    let id_time = parse_utc_timestamp(&format!(
        "{}-{}-{}T{}:{}:{}.{}Z",
        &ts[..4],
        &ts[4..6],
        &ts[6..8],
        &ts[9..11],
        &ts[11..13],
        &ts[13..15],
        &ts[15..21]
    ))
    .ok();
    if let (Some(started), Some(id_time)) = (started, id_time) {
        if started != id_time / 1000 * 1000 {
            v.push(
                "/qualification/started_at_utc",
                format!("disagrees with the start time in receipt_id {}", jstr(id)),
            );
        }
        let at = std::time::UNIX_EPOCH
            + std::time::Duration::from_micros(u64::try_from(id_time).unwrap_or(0));
        let s = |p: &str| get(receipt, p).as_str().unwrap_or_default().to_owned();
        let expected = generate_receipt_id(
            at,
            &s("/qualification/backend"),
            &s("/environment/host_id"),
            &s("/workload/id"),
            &s("/workload/parameters/variant_id"),
        );
        if expected != id {
            v.push(
                "/receipt_id",
                format!(
                    "is {}, the receipt's backend, host, workload and variant generate {}",
                    jstr(id),
                    jstr(&expected)
                ),
            );
        }
    }
}

pub(super) fn verify_time(v: &mut Verifier<'_>, receipt: &Value) {
    let t = |p: &str| {
        get(receipt, p)
            .as_str()
            .and_then(|s| parse_utc_timestamp(s).ok())
    };
    let (Some(started), Some(finished), Some(created)) = (
        t("/qualification/started_at_utc"),
        t("/qualification/finished_at_utc"),
        t("/created_at_utc"),
    ) else {
        return;
    };
    if created != finished {
        v.push(
            "/created_at_utc",
            "differs from /qualification/finished_at_utc (the runner writes both at completion)",
        );
    }
    let Some(duration) = get(receipt, "/qualification/duration_seconds").as_f64() else {
        return;
    };
    let elapsed = (finished - started) as f64 / 1e6;
    if (elapsed - duration).abs() > 0.001 + 1e-9 {
        v.push(
            "/qualification/duration_seconds",
            format!(
                "is {}, the recorded start and finish are {} s apart (the runner derives finish from start + duration)",
                qual_json::python_float_repr(duration),
                qual_json::python_float_repr(elapsed)
            ),
        );
    }
    let cases: f64 = get(receipt, "/results")
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r| get(r, "/duration_seconds").as_f64())
                .sum()
        })
        .unwrap_or(0.0);
    if cases > duration + 1e-6 {
        v.push(
            "/qualification/duration_seconds",
            format!(
                "is {}, shorter than the {} s its results took",
                qual_json::python_float_repr(duration),
                qual_json::python_float_repr(cases)
            ),
        );
    }
}
