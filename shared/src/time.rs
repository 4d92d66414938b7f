//! Durations as written in the config ("200ms", "5s", "15m", "24h", "30d"), RFC 3339 in and out, and the system
//! clock's reading for the tools and the tests.

use std::time::{Duration, UNIX_EPOCH};

use crate::clock::Clock;

/// UTC milliseconds since the epoch on the system's clock ([`crate::clock::SystemClock`]), for the operator's tools,
/// the bench and the tests. The core's decisions never read it: they take a [`Clock`] (a [`crate::clock::World`]).
pub fn now_ms() -> i64 {
    crate::clock::SystemClock.now_ms()
}

/// Milliseconds in a duration, saturating (durations in the config are far below the limit).
pub fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Parses a duration as `humantime` reads it: "250ms", "5s", "15m", "24h", "30d", also "1h 30m", "1.5s" or "2w";
/// a bare "0" is zero. "M" is months and "y" years (30.44 and 365.25 days). Refused: no unit, an unknown unit, a
/// sign, or a length humantime cannot hold (sub-second units past ~584 years) or past `u64::MAX` milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let d = humantime::parse_duration(t).map_err(|e| format!("{text:?}: {e}"))?;
    if u64::try_from(d.as_millis()).is_err() {
        return Err(format!("{text:?} is too long"));
    }
    Ok(d)
}

/// The last millisecond `humantime` formats (9999-12-31T23:59:59.999Z); it formats nothing before the epoch.
const LAST_MS: i64 = 253_402_300_799_999;

/// Formats UTC milliseconds as RFC 3339 with milliseconds, e.g. `2026-11-30T05:50:44.123Z`. Instants outside
/// 1970..=9999 (only a corrupt record holds one: every stored time comes from [`now_ms`]) are clamped to that range,
/// so the output is always valid RFC 3339 and never panics.
pub fn rfc3339(ms: i64) -> String {
    let clamped = u64::try_from(ms.clamp(0, LAST_MS)).unwrap_or(0);
    let at = UNIX_EPOCH
        .checked_add(Duration::from_millis(clamped))
        .unwrap_or(UNIX_EPOCH);
    humantime::format_rfc3339_millis(at).to_string()
}

/// Parses an RFC 3339 instant in UTC (`2021-05-12T20:33:44Z`, `…44.123Z`), as GitHub writes `delivered_at`, into
/// UTC milliseconds. `None` for anything else (offsets other than `Z` included: no provider here writes them).
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let at = humantime::parse_rfc3339(text).ok()?;
    i64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        // humantime's grammar, looser than the hand-written parser's and unambiguous: spaces, compounds,
        // fractions and weeks.
        assert_eq!(parse_duration("5 s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1_500)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        for bad in [
            "",
            "5",
            "s",
            "-5s",
            "5x",
            "5 parsecs",
            "99999999999999999999d",
            "18446744073709552s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        let no_unit = parse_duration("5").unwrap_err();
        assert!(no_unit.contains("time unit needed"), "{no_unit}");
        let unknown = parse_duration("5x").unwrap_err();
        assert!(unknown.contains("unknown time unit \"x\""), "{unknown}");
    }

    #[test]
    fn rfc3339_matches_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_766_254_257_123), "2025-12-20T18:10:57.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_017_844_123), "2026-11-30T05:50:44.123Z");
        // Outside what humantime formats: clamped, never a panic.
        assert_eq!(rfc3339(-1), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(i64::MIN), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(LAST_MS), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(i64::MAX), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn rfc3339_parses_what_providers_write() {
        for ms in [0, 1_766_254_257_123, 951_782_400_000, 1_620_851_624_000] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(parse_rfc3339("2021-05-12T20:33:44Z"), Some(1_620_851_624_000));
        assert_eq!(parse_rfc3339("2021-05-12T20:33:44.5Z"), Some(1_620_851_624_500));
        for bad in [
            "",
            "2021-05-12",
            "2021-05-12T20:33:44",
            "2021-13-12T20:33:44Z",
            "x021-05-12T20:33:44Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }
}
