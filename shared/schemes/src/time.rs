//! RFC 3339 times as providers write them in signed headers and bodies (Box, Zendesk, Twitch, PayPal): read to
//! unix seconds with their offsets, and written in UTC. Pure arithmetic on the proleptic Gregorian calendar; the
//! caller's clock, as everywhere in this crate.

/// Unix seconds of an RFC 3339 date-time (`2023-11-14T14:13:20-08:00`, `2023-11-14T22:13:20.5Z`; a fraction is
/// dropped); `None` if it is not one.
pub(crate) fn unix_of_rfc3339(text: &str) -> Option<i64> {
    let b = text.trim().as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let digits = b.get(from..to)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset = match *b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b.get(i + 3) == Some(&b':') => {
            let (h, m) = (num(i + 1, i + 3)?, num(i + 4, i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let o = h * 3600 + m * 60;
            if sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// `unix` as RFC 3339 in UTC, to the second (`2023-11-14T22:13:20Z`).
pub(crate) fn rfc3339_utc(unix: i64) -> String {
    rfc3339_utc_with(unix, "")
}

/// `unix` as RFC 3339 in UTC with `fraction` after the seconds (`".000000000"`, as Twitch writes nanoseconds).
pub(crate) fn rfc3339_utc_with(unix: i64, fraction: &str) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{fraction}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_read_with_their_offsets() {
        assert_eq!(unix_of_rfc3339("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(unix_of_rfc3339("2023-11-14T14:13:20-08:00"), Some(1_700_000_000));
        assert_eq!(
            unix_of_rfc3339("2023-11-15T03:43:20.123+05:30"),
            Some(1_700_000_000)
        );
        assert_eq!(unix_of_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_of_rfc3339("2024-02-29T00:00:00Z"), Some(1_709_164_800));
        for bad in [
            "",
            "1700000000",
            "2023-11-14 22:13:20Z",
            "2023-11-14T22:13:20",
            "2023-13-14T22:13:20Z",
            "2023-11-14T22:13:20+0800",
            "2023-11-14T22:13:20.Z",
            "2023-11-14T22:13:20Zjunk",
            "２023-11-14T22:13:20Z",
        ] {
            assert_eq!(unix_of_rfc3339(bad), None, "{bad:?}");
        }
        for t in [0, 951_782_400, 1_700_000_000, 4_102_444_800, -86_400] {
            assert_eq!(unix_of_rfc3339(&rfc3339_utc(t)), Some(t));
        }
    }

    #[test]
    fn fractions_and_offsets_both_ways() {
        assert_eq!(
            unix_of_rfc3339("2023-11-14T22:13:20.123456789Z"),
            Some(1_700_000_000)
        );
        assert_eq!(unix_of_rfc3339("2000-02-29T12:00:00-01:30"), Some(951_831_000));
        for t in [0, 951_782_400, 1_700_000_000, 4_102_444_800] {
            assert_eq!(unix_of_rfc3339(&rfc3339_utc(t)), Some(t));
            assert_eq!(unix_of_rfc3339(&rfc3339_utc_with(t, ".000000000")), Some(t));
        }
    }
}
