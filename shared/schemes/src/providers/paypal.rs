//! PayPal: `PAYPAL-TRANSMISSION-SIG` is base64 SHA256withRSA over
//! `{PAYPAL-TRANSMISSION-ID}|{PAYPAL-TRANSMISSION-TIME}|{webhook id}|{CRC32 of the raw body, unsigned decimal}`,
//! checked with the certificate at `PAYPAL-CERT-URL`, fetched only from a certificate's path on PayPal's API hosts
//! and used only if issued to PayPal's name (`messageverificationcerts.paypal.com`). The webhook id (shown
//! per webhook in the app's settings) is the source's secret. The transmission time (RFC 3339) is checked
//! against 300 s: PayPal documents none, and each retry is a new transmission. Id `id`, type `event_type`. No
//! handshake.
//! <https://developer.paypal.com/api/rest/webhooks/rest/>

use http::HeaderName;

use crate::families::asymmetric::{OwnMessage, RsaMessage};
use crate::families::{Asymmetric, At, Family, Rsa, RsaAlgorithm, RsaKey, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, HttpsUrl, KeyRequest, Request};
use crate::time::unix_of_rfc3339;
use crate::clock::Clock;
use crate::encoding::Encoding;
use crate::errors::VerifyError;

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
            admit: certificate,
        },
        message: Some(message),
        message_signer: Some(sign),
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

/// PayPal's API hosts, live and sandbox, where its certificates are served.
const HOSTS: &[&str] = &[
    "api.paypal.com",
    "api-m.paypal.com",
    "api.sandbox.paypal.com",
    "api-m.sandbox.paypal.com",
];

/// Where PayPal serves a webhook certificate on those hosts: `/v1/notifications/certs/CERT-` and the certificate's
/// id, groups of lower-case hex joined by hyphens (`CERT-360caa42-fca2a594-a5cafa77` in PayPal's examples,
/// `CERT-360caa42-fca2a594-1d93a270` in the test of PayPal's Java SDK, `rest-api-sdk/.../ValidateCertTest.java`).
const CERT_PATH: &str = "/v1/notifications/certs/CERT-";

/// The certificate a `PAYPAL-CERT-URL` names, if it is a certificate's path on one of PayPal's API hosts, with no
/// query: any other URL is not PayPal's certificate, and fetching it would only let a request choose what this
/// receiver asks PayPal's hosts for.
fn certificate(url: &str) -> Option<KeyRequest> {
    let url = HttpsUrl::parse(url)?;
    let id = url.path.strip_prefix(CERT_PATH)?;
    let id_shape = (1..=64).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-');
    (HOSTS.contains(&url.host.as_str()) && id_shape && url.query.is_none()).then(|| KeyRequest::Certificate {
        url: url.canonical(),
        names: NAMES.iter().map(|n| (*n).to_owned()).collect(),
    })
}

/// The names PayPal's webhook certificates are issued to. `messageverificationcerts.paypal.com` is the subject
/// (CN and subjectAltName DNS name) of the certificate PayPal serves for verification today, as printed on
/// <https://developer.paypal.com/api/orders/v2/certs-get> (issued by DigiCert's EV server CA). PayPal's own Java
/// SDK accepts `CN=messageverificationcerts*.paypal.com` (`SSLUtil.validateCertificateChain`, paypal/PayPal-Java-SDK
/// `rest-api-sdk/src/main/java/com/paypal/base/SSLUtil.java`), which takes in the sandbox's
/// `messageverificationcerts.sandbox.paypal.com`. Both domains are PayPal's alone: nobody else can be issued a
/// certificate for them, which is what the check is for.
const NAMES: &[&str] = &[
    "messageverificationcerts.paypal.com",
    "messageverificationcerts.sandbox.paypal.com",
];

fn header<'r>(req: &Request<'r>, name: &'static str) -> Result<&'r str, VerifyError> {
    crate::headers::header_first(req.headers, &HeaderName::from_static(name))
}

fn message(req: &Request, creds: &Credentials, clock: Clock) -> Result<RsaMessage, VerifyError> {
    match req.header("paypal-auth-algo") {
        None | Some("SHA256withRSA") => {}
        Some(_) => return Err(crate::headers::malformed(&HeaderName::from_static("paypal-auth-algo"), "not SHA256withRSA")),
    }
    let id = header(req, ID)?;
    let time = header(req, TIME)?;
    let unix = unix_of_rfc3339(time)
        .ok_or_else(|| crate::headers::malformed(&HeaderName::from_static(TIME), "not an RFC 3339 time"))?;
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
        signatures: crate::encoding::decode(Encoding::Base64, signature).into_iter().collect(),
        algorithm: RsaAlgorithm::Pkcs1Sha256,
    })
}

/// Signs as PayPal does: a transmission id and time, the certificate URL and the algorithm beside the signature
/// of `id|time|webhook_id|crc32(body)`, the webhook id being the source's first secret.
fn sign(
    req: &Request,
    creds: &Credentials,
    key_url: Option<&str>,
    now_unix: i64,
) -> Option<OwnMessage> {
    let webhook_id = creds.secrets.first()?;
    let id = format!("{:08x}-{:04x}-11ef-8d7c-{:012x}", now_unix, req.body.len() & 0xffff, crc32(req.body));
    let time = crate::time::rfc3339_utc(now_unix);
    let mut message = format!("{id}|{time}|").into_bytes();
    message.extend_from_slice(webhook_id.expose());
    message.extend_from_slice(format!("|{}", crc32(req.body)).as_bytes());
    let mut headers = vec![
        (HeaderName::from_static(ID), id),
        (HeaderName::from_static(TIME), time),
        (HeaderName::from_static("paypal-auth-algo"), "SHA256withRSA".to_owned()),
    ];
    if let Some(url) = key_url {
        headers.push((HeaderName::from_static("paypal-cert-url"), url.to_owned()));
    }
    Some(OwnMessage { message, headers })
}

/// CRC-32 (IEEE 802.3, as zlib's `crc32`), PayPal's checksum of the body.
fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
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
            // PayPal's host, but not a certificate's path: a request may not choose what is fetched there.
            ("https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77?n=1", false),
            ("https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77#x", false),
            ("https://api.paypal.com/v1/notifications/certs/CERT-360CAA42-fca2a594-a5cafa77", false),
            ("https://api.paypal.com/v1/notifications/certs/CERT-360caa42/../../oauth2/token", false),
            ("https://api.paypal.com/v1/notifications/certs/CERT-%33%36", false),
            ("https://api.paypal.com/v1/notifications/certs/CERT-", false),
            ("https://api.paypal.com/v1/notifications/certs/", false),
            ("https://api.paypal.com/v1/oauth2/token", false),
            ("https://api.paypal.com/", false),
            (&format!("https://api.paypal.com/v1/notifications/certs/CERT-{}", "a".repeat(65)), false),
        ] {
            let mut headers = http::HeaderMap::new();
            headers.insert("paypal-cert-url", url.parse().unwrap());
            let got = rsa.key_request(&Request::post(&uri, &headers, body));
            assert_eq!(got.is_ok(), ok, "{url}");
        }
    }
}
