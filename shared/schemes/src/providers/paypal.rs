//! PayPal: `PAYPAL-TRANSMISSION-SIG` is base64 SHA256withRSA over
//! `{PAYPAL-TRANSMISSION-ID}|{PAYPAL-TRANSMISSION-TIME}|{webhook id}|{CRC32 of the raw body, unsigned decimal}`,
//! checked with the certificate at `PAYPAL-CERT-URL`, fetched only from PayPal's API hosts. The webhook id (shown
//! per webhook in the app's settings) is the source's secret. The transmission time (RFC 3339) is checked
//! against 300 s: PayPal documents none, and each retry is a new transmission. Id `id`, type `event_type`. No
//! handshake.
//! <https://developer.paypal.com/api/rest/webhooks/rest/>

use http::HeaderName;

use crate::families::asymmetric::RsaMessage;
use crate::families::{Asymmetric, At, Family, Rsa, RsaAlgorithm, RsaKey, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Request};
use crate::{Clock, Encoding, VerifyError};

const ID: &str = "paypal-transmission-id";
const TIME: &str = "paypal-transmission-time";
const SIG: &str = "paypal-transmission-sig";

pub(super) fn preset() -> Preset {
    let family = Family::Rsa(Rsa {
        spec: Asymmetric {
            signature: Signature::header(SIG, "", Encoding::Base64),
            signed: Template::body(), // the message is built by `message`
            timestamp: Some(Timestamp::header(TIME)),
        },
        algorithm: RsaAlgorithm::Pkcs1Sha256,
        key: RsaKey::Certificate {
            at: At::Header(HeaderName::from_static("paypal-cert-url")),
            hosts: vec![
                "api.paypal.com",
                "api-m.paypal.com",
                "api.sandbox.paypal.com",
                "api-m.sandbox.paypal.com",
            ],
        },
        message: Some(message),
    });
    Preset {
        kept: vec![HeaderName::from_static(ID), HeaderName::from_static(TIME)],
        ..Preset::new(
            "paypal",
            family,
            Identify::at("json:/id", Some("json:/event_type")),
        )
    }
}

fn header<'r>(req: &Request<'r>, name: &'static str) -> Result<&'r str, VerifyError> {
    crate::header_first(req.headers, &HeaderName::from_static(name))
}

fn message(req: &Request, creds: &Credentials, clock: Clock) -> Result<RsaMessage, VerifyError> {
    match req.header("paypal-auth-algo") {
        None | Some("SHA256withRSA") => {}
        Some(_) => return Err(crate::malformed(&HeaderName::from_static("paypal-auth-algo"), "not SHA256withRSA")),
    }
    let id = header(req, ID)?;
    let time = header(req, TIME)?;
    let unix = unix_of_rfc3339(time)
        .ok_or_else(|| crate::malformed(&HeaderName::from_static(TIME), "not an RFC 3339 time"))?;
    clock.check_unix(unix)?;
    let signature = header(req, SIG)?;
    let crc = crc32(req.body);
    let messages = creds
        .secrets
        .iter()
        .map(|webhook_id| {
            let mut m = format!("{id}|{time}|").into_bytes();
            m.extend_from_slice(webhook_id.expose());
            m.extend_from_slice(format!("|{crc}").as_bytes());
            m
        })
        .collect();
    Ok(RsaMessage {
        messages,
        signatures: crate::decode(Encoding::Base64, signature).into_iter().collect(),
        algorithm: RsaAlgorithm::Pkcs1Sha256,
    })
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`).
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// `2023-11-14T22:13:20Z` (fraction and a `±hh:mm` offset allowed) as unix seconds.
fn unix_of_rfc3339(text: &str) -> Option<i64> {
    let b = text.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter().all(u8::is_ascii_digit).then(|| std::str::from_utf8(part).ok()?.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &b[19..];
    if rest.first() == Some(&b'.') {
        let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        rest = &rest[1 + digits..];
    }
    let offset = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v = |d: &[u8]| i64::from(d[0] - b'0') * 10 + i64::from(d[1] - b'0');
            let secs = v(&digits[..2]) * 3600 + v(&digits[2..]) * 60;
            if *sign == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn crc32_is_zlibs() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn transmission_times_read_as_unix_seconds() {
        assert_eq!(unix_of_rfc3339("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(unix_of_rfc3339("2023-11-14T22:13:20.123Z"), Some(1_700_000_000));
        assert_eq!(unix_of_rfc3339("2023-11-15T00:13:20+02:00"), Some(1_700_000_000));
        assert_eq!(unix_of_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_of_rfc3339("2024-02-29T00:00:00Z"), Some(1_709_164_800));
        for bad in ["", "1700000000", "2023-11-14 22:13", "2023-13-14T22:13:20Z", "2023-11-14T22:13:20"] {
            assert_eq!(unix_of_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_certificate_comes_only_from_paypal() {
        let preset = preset();
        let Family::Rsa(rsa) = &preset.family else { panic!("rsa") };
        let (uri, body) = (http::Uri::from_static("/"), b"{}");
        for (url, ok) in [
            ("https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77", true),
            ("https://api.sandbox.paypal.com/v1/notifications/certs/CERT-1", true),
            ("http://api.paypal.com/v1/notifications/certs/CERT-1", false),
            ("https://paypal.com.certs.example.net/v1/notifications/certs/CERT-1", false),
            ("https://api.paypal.com:8443/v1/notifications/certs/CERT-1", false),
        ] {
            let mut headers = http::HeaderMap::new();
            headers.insert("paypal-cert-url", url.parse().unwrap());
            let got = rsa.key_request(&Request::post(&uri, &headers, body));
            assert_eq!(got.is_ok(), ok, "{url}");
        }
    }
}
