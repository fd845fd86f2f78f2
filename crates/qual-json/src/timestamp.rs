//! Timestamps as our documents spell them: UTC, whole seconds, `YYYY-MM-DDTHH:MM:SSZ`
//! (Kiln's `created_at_utc`, campaign receipts' and oracle results' `created_at`). One home so
//! every writer agrees on the form; readers that accept more (legacy artifacts) keep their own
//! checks.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (a time outside the calendar
/// range of the `time` crate, far beyond any clock, prints as the epoch).
pub fn format_utc(secs: i64) -> String {
    let t =
        time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Seconds since the epoch now (0 for a clock before the epoch).
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_utc() -> String {
    format_utc(now_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_785_277_535), "2026-07-28T22:25:35Z");
        assert_eq!(format_utc(i64::MAX), "1970-01-01T00:00:00Z");
        assert_eq!(now_utc().len(), 20);
    }
}
