//! Box (webhooks v2): `Box-Signature-Primary` and `Box-Signature-Secondary`, each the base64 HMAC-SHA256 of the
//! raw body bytes followed by the `Box-Delivery-Timestamp` bytes, under the app's primary and secondary signature
//! keys (`secrets = [primary, secondary]`; either header may match either key, so a rotation in any order
//! passes). Only `Box-Signature-Version: 1` with `HmacSHA256` exists. The timestamp is RFC 3339 with an offset,
//! refused past 10 minutes. The id is the body's `id` (kept across retries; `Box-Delivery-Id` changes per
//! delivery), the type `trigger` (`FILE.UPLOADED`).
//! <https://developer.box.com/guides/webhooks/v2/signatures-v2/>

use http::HeaderName;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Request, Signed};
use crate::{decode, encode, header_first, mac, malformed, verify_mac, Algorithm, Clock, Encoding, Identity};
use crate::{Key, VerifyError};

static TIMESTAMP: HeaderName = HeaderName::from_static("box-delivery-timestamp");
static PRIMARY: HeaderName = HeaderName::from_static("box-signature-primary");
static SECONDARY: HeaderName = HeaderName::from_static("box-signature-secondary");
static VERSION: HeaderName = HeaderName::from_static("box-signature-version");
static ALGORITHM: HeaderName = HeaderName::from_static("box-signature-algorithm");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset {
        tolerance_secs: Some(600),
        kept: vec![HeaderName::from_static("box-delivery-id"), TIMESTAMP.clone()],
        ..Preset::new("box", family, Identify::at("json:/id", Some("json:/trigger")))
    }
}

fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    let timestamp = header_first(req.headers, &TIMESTAMP)?;
    let unix = unix_of_rfc3339(timestamp).ok_or_else(|| malformed(&TIMESTAMP, "not an RFC 3339 time"))?;
    clock.check_unix(unix)?;
    if header_first(req.headers, &VERSION)?.trim() != "1" {
        return Err(malformed(&VERSION, "not 1"));
    }
    if header_first(req.headers, &ALGORITHM)?.trim() != "HmacSHA256" {
        return Err(malformed(&ALGORITHM, "not HmacSHA256"));
    }
    let candidates: Vec<Vec<u8>> = [&PRIMARY, &SECONDARY]
        .into_iter()
        .filter_map(|name| req.headers.get(name))
        .filter_map(|v| std::str::from_utf8(v.as_bytes()).ok())
        .filter_map(|v| decode(Encoding::Base64, v))
        .collect();
    if req.headers.get(&PRIMARY).is_none() && req.headers.get(&SECONDARY).is_none() {
        return Err(VerifyError::MissingHeader(PRIMARY.to_string()));
    }
    verify_mac(
        Algorithm::Sha256,
        &creds.secrets,
        &[req.body, timestamp.as_bytes()],
        &candidates,
        &PRIMARY,
    )
}

/// Signs like Box with one key: the primary signature, the delivery timestamp and the version headers.
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let timestamp = rfc3339_utc(now_unix);
    Signed {
        headers: vec![
            (TIMESTAMP.clone(), timestamp.clone()),
            (VERSION.clone(), "1".to_owned()),
            (ALGORITHM.clone(), "HmacSHA256".to_owned()),
            (PRIMARY.clone(), tag(key, req.body, &timestamp)),
        ],
        body: None,
    }
}

fn tag(key: &Key, body: &[u8], timestamp: &str) -> String {
    encode(
        Encoding::Base64,
        &mac(Algorithm::Sha256, key, &[body, timestamp.as_bytes()]),
    )
}

/// Unix seconds of an RFC 3339 date-time (`2023-11-14T14:13:20-08:00`, `2023-11-14T22:13:20.5Z`; a fraction is
/// dropped); `None` if it is not one.
pub(super) fn unix_of_rfc3339(text: &str) -> Option<i64> {
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
pub(super) fn rfc3339_utc(unix: i64) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
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
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn rfc3339_times_read_with_their_offsets() {
        assert_eq!(unix_of_rfc3339("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(unix_of_rfc3339("2023-11-14T14:13:20-08:00"), Some(1_700_000_000));
        assert_eq!(unix_of_rfc3339("2023-11-15T03:43:20.123+05:30"), Some(1_700_000_000));
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
    fn a_signed_delivery_verifies_under_either_key() {
        let key = Key::new(b"SamplePrimaryKey0123456789abcdef".to_vec());
        let body = br#"{"type":"webhook_event","id":"e1","trigger":"FILE.UPLOADED"}"#;
        let uri = http::Uri::from_static("/webhooks/box");
        let mut headers = HeaderMap::new();
        let req = Request::post(&uri, &headers, body);
        let signed = sign(
            &Signer::Secret(key.clone()),
            &Credentials::default(),
            &req,
            &Identity {
                event_id: "e1".to_owned(),
                event_type: None,
            },
            1_700_000_000,
        );
        for (name, value) in signed.headers {
            headers.insert(name, HeaderValue::from_str(&value).unwrap());
        }
        let other = Key::new(b"SampleSecondaryKey0123456789abcd".to_vec());
        let creds = Credentials::secrets(vec![other, key]);
        let clock = Clock {
            now_unix: 1_700_000_000,
            tolerance_secs: 600,
        };
        verify(&creds, &Request::post(&uri, &headers, body), clock).unwrap();
    }
}
