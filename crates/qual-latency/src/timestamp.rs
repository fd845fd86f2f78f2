//! `created_at_utc`: writing and checking the artifact timestamp.
//!
//! Writing: UTC now without sub-seconds, `YYYY-MM-DDTHH:MM:SSZ`.
//!
//! Checking: the original accepts a string ending in `Z` that Python 3.11
//! `datetime.fromisoformat` parses after replacing `Z` with `+00:00`, with a zero offset. This
//! module accepts the forms that matter for real artifacts: a calendar date (`YYYY-MM-DD` or
//! `YYYYMMDD`), a `T` or space separator, and a time `HH`, `HH:MM`, `HH:MM:SS`, or the basic
//! forms `HHMM`, `HHMMSS`, each seconds form optionally followed by `.` or `,` and 1 to 6
//! fraction digits. A date alone, a `+00:00` suffix without `Z`, and any other offset are
//! refused. ISO week dates (`2026-W23-6`) are not accepted (a documented narrowing).

pub use qual_json::timestamp::{format_utc, now_secs, now_utc};

/// Formats seconds since the epoch as `YYYYmmddTHHMMSSZ` (raw-log names).
pub fn format_utc_compact(secs: i64) -> String {
    format_utc(secs).replace(['-', ':'], "")
}

fn digits(s: &str, n: usize) -> Option<u32> {
    (s.len() == n && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn valid_date(s: &str) -> bool {
    let (y, m, d) = match s.len() {
        10 if s.as_bytes()[4] == b'-' && s.as_bytes()[7] == b'-' => (
            digits(&s[0..4], 4),
            digits(&s[5..7], 2),
            digits(&s[8..10], 2),
        ),
        8 => (
            digits(&s[0..4], 4),
            digits(&s[4..6], 2),
            digits(&s[6..8], 2),
        ),
        _ => return false,
    };
    let (Some(y), Some(m), Some(d)) = (y, m, d) else {
        return false;
    };
    if y == 0 || !(1..=12).contains(&m) || d == 0 {
        return false;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    d <= days
}

fn valid_time(s: &str) -> bool {
    let (main, frac) = match s.find(['.', ',']) {
        Some(p) => (&s[..p], Some(&s[p + 1..])),
        None => (s, None),
    };
    let hms: Vec<Option<u32>> = if main.contains(':') {
        main.split(':').map(|p| digits(p, 2)).collect()
    } else {
        if main.len() % 2 != 0 || main.is_empty() || main.len() > 6 {
            return false;
        }
        (0..main.len() / 2)
            .map(|i| digits(&main[2 * i..2 * i + 2], 2))
            .collect()
    };
    if hms.is_empty() || hms.len() > 3 || hms.iter().any(Option::is_none) {
        return false;
    }
    if let Some(f) = frac {
        if hms.len() != 3 || f.is_empty() || f.len() > 6 || !f.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    let limits = [23, 59, 59];
    hms.iter()
        .zip(limits)
        .all(|(v, max)| v.is_some_and(|v| v <= max))
}

/// Whether `created_at_utc` is an ISO-8601 UTC timestamp ending in `Z` (see module docs).
pub fn is_valid_created_at(s: &str) -> bool {
    let Some(body) = s.strip_suffix('Z') else {
        return false;
    };
    if body.contains('Z') || body.contains('+') {
        return false;
    }
    let Some(sep) = body.find(['T', ' ']) else {
        return false;
    };
    valid_date(&body[..sep]) && valid_time(&body[sep + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_780_866_057), "2026-06-07T21:00:57Z");
        assert_eq!(format_utc_compact(1_780_866_030), "20260607T210030Z");
        assert!(is_valid_created_at(&now_utc()));
    }

    #[test]
    fn accepts_and_rejects_like_the_original() {
        for ok in [
            "2026-06-06T12:00:00Z",
            "2026-06-06T12:00:00.5Z",
            "2026-06-06 12:00:00Z",
            "20260606T120000Z",
            "2026-06-06T12:00Z",
            "2024-02-29T00:00:00Z",
        ] {
            assert!(is_valid_created_at(ok), "{ok}");
        }
        for bad in [
            "2026-06-06Z",
            "2026-06-06T12:00:00+00:00",
            "2026-06-06T12:00:00-07:00",
            "2026-06-06T12:00:00-07:00Z",
            "2026-06-06T12:00:00",
            "2025-02-29T00:00:00Z",
            "2026-06-06T25:00:00Z",
            "2026-13-06T12:00:00Z",
            "",
            "Z",
        ] {
            assert!(!is_valid_created_at(bad), "{bad}");
        }
    }
}
