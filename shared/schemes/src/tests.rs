//! Tests across all schemes: the provider-signed vectors, round trips, rotation, clocks and hostile input.

use std::collections::BTreeMap;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;

use super::*;

pub(super) fn key() -> Key {
    Key::new(b"test-secret".to_vec())
}

pub(super) fn identity(id: &str, event_type: Option<&str>) -> Identity {
    Identity {
        event_id: id.to_owned(),
        event_type: event_type.map(str::to_owned),
    }
}

/// A header map from (name, value) pairs; repeated names append.
pub(super) fn map(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_bytes(value.as_bytes()).unwrap(),
        );
    }
    headers
}

fn generic(algorithm: Algorithm, encoding: Encoding, prefix: &str) -> Scheme {
    Scheme::from(HmacParams {
        header: HeaderName::from_static("x-acme-signature"),
        algorithm,
        encoding,
        prefix: prefix.to_owned(),
        id: "header:X-Acme-Delivery".parse().unwrap(),
        event_type: Some("json:/kind".parse().unwrap()),
    })
}

/// One of every scheme, with a key made from a secret the way configuration does.
fn all_schemes() -> Vec<(Scheme, Key)> {
    let secret_for = |scheme: &Scheme| match scheme {
        Scheme::StandardWebhooks | Scheme::Svix => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        Scheme::Stripe => "whsec_stripe_style",
        _ => "plain secret",
    };
    let mut schemes = vec![
        Scheme::Github,
        Scheme::Stripe,
        Scheme::StandardWebhooks,
        Scheme::Svix,
        Scheme::Shopify,
        Scheme::Slack,
    ];
    for algorithm in [Algorithm::Sha1, Algorithm::Sha256, Algorithm::Sha512] {
        for encoding in [Encoding::Hex, Encoding::Base64] {
            for prefix in ["", "sha256=", "v1 "] {
                schemes.push(generic(algorithm, encoding, prefix));
            }
        }
    }
    schemes
        .into_iter()
        .map(|scheme| {
            let key = scheme.key_from_secret(secret_for(&scheme)).unwrap();
            (scheme, key)
        })
        .collect()
}

/// A body that carries the id where body-id schemes look for it.
const BODY: &[u8] = "{\"id\":\"evt_1\",\"event_id\":\"evt_1\",\"type\":\"thing.done\",\"kind\":\"thing.done\",\"note\":\"Café 🎉\"}".as_bytes();
const NOW: i64 = 1_766_254_257;

fn signed(scheme: &Scheme, key: &Key, body: &[u8], now: i64) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.extend(scheme.sign(key, body, &identity("evt_1", Some("thing.done")), now));
    headers
}

// ---------------------------------------------------------------------------------------------------------
// The vectors, signed by each provider's own SDK.

#[derive(Deserialize)]
struct Vectors {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    provider: String,
    secret: String,
    now: i64,
    headers: BTreeMap<String, String>,
    body: String,
    expect: String,
    reason: Option<String>,
    event_id: Option<String>,
    event_type: Option<String>,
}

#[test]
fn provider_vectors() {
    let text = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/signatures.json"));
    let vectors: Vectors = serde_json::from_str(text).unwrap();
    let mut per_provider: BTreeMap<&str, usize> = BTreeMap::new();
    let mut checked = 0;
    for case in &vectors.cases {
        let scheme = match case.provider.as_str() {
            "github" => Scheme::Github,
            "stripe" => Scheme::Stripe,
            "standard-webhooks" => Scheme::StandardWebhooks,
            "svix" => Scheme::Svix,
            "shopify" => Scheme::Shopify,
            "slack" => Scheme::Slack,
            other => panic!("{}: unknown provider {other}", case.name),
        };
        assert_eq!(scheme.name(), case.provider);
        let key = scheme.key_from_secret(&case.secret).unwrap();
        let pairs: Vec<(&str, &str)> = case
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let headers = map(&pairs);
        let body = case.body.as_bytes();
        let verified = scheme.verify(std::slice::from_ref(&key), &headers, body, case.now, 300);
        match (case.expect.as_str(), case.reason.as_deref()) {
            ("accept", None) => {
                assert!(verified.is_ok(), "{}: {verified:?}", case.name);
                let found = scheme.identify(&headers, body).unwrap();
                assert_eq!(Some(&found.event_id), case.event_id.as_ref(), "{}", case.name);
                if case.event_type.is_some() {
                    assert_eq!(found.event_type, case.event_type, "{}", case.name);
                }
                // A key of another secret must not accept it.
                let other = Key::new(b"another key".to_vec());
                assert!(scheme.verify(&[other], &headers, body, case.now, 300).is_err());
            }
            ("reject", Some("event_id")) => {
                assert!(verified.is_ok(), "{}: {verified:?}", case.name);
                let found = scheme.identify(&headers, body);
                assert!(found.is_err(), "{}: {found:?}", case.name);
            }
            ("reject", Some(reason)) => {
                let err = verified.unwrap_err();
                assert_eq!(err.reason(), reason, "{}: {err:?}", case.name);
            }
            (expect, reason) => panic!("{}: unknown expectation {expect} {reason:?}", case.name),
        }
        *per_provider.entry(scheme.name()).or_default() += 1;
        checked += 1;
    }
    assert_eq!(checked, text.matches("\"expect\"").count());
    assert_eq!(checked, vectors.cases.len());
    for provider in [
        "github",
        "stripe",
        "standard-webhooks",
        "svix",
        "shopify",
        "slack",
    ] {
        assert!(per_provider.get(provider).copied().unwrap_or(0) > 0, "{provider}");
    }
}

// ---------------------------------------------------------------------------------------------------------
// Round trips.

#[test]
fn sign_then_verify_every_scheme() {
    for (scheme, key) in all_schemes() {
        let headers = signed(&scheme, &key, BODY, NOW);
        scheme
            .verify(std::slice::from_ref(&key), &headers, BODY, NOW, 300)
            .unwrap_or_else(|err| panic!("{scheme:?}: {err}"));
        assert_eq!(
            scheme.identify(&headers, BODY).unwrap(),
            identity("evt_1", Some("thing.done")),
            "{scheme:?}"
        );
        // Sign puts no secret material in the open, and signature headers are never kept.
        let kept = scheme.kept_headers();
        assert_eq!(kept[0], http::header::CONTENT_TYPE);
        for (name, _) in scheme.sign(&key, BODY, &identity("evt_1", None), NOW) {
            let is_signature = name.as_str().contains("signature") || name.as_str().contains("hmac");
            assert!(!(is_signature && kept.contains(&name)), "{scheme:?} keeps {name}");
        }
    }
}

#[test]
fn sign_with_empty_body_and_no_type() {
    for (scheme, key) in all_schemes() {
        let headers = scheme.sign(&key, b"", &identity("e", None), NOW);
        let mut map = HeaderMap::new();
        map.extend(headers);
        scheme.verify(&[key], &map, b"", NOW, 0).unwrap();
    }
}

#[test]
fn rotation_accepts_any_key() {
    for (scheme, key) in all_schemes() {
        let headers = signed(&scheme, &key, BODY, NOW);
        let old = Key::new(b"old secret".to_vec());
        scheme
            .verify(&[old.clone(), key.clone()], &headers, BODY, NOW, 300)
            .unwrap_or_else(|err| panic!("{scheme:?}: {err}"));
        let err = scheme.verify(&[old], &headers, BODY, NOW, 300).unwrap_err();
        assert!(matches!(err, VerifyError::Mismatch), "{scheme:?}: {err:?}");
        let err = scheme.verify(&[], &headers, BODY, NOW, 300).unwrap_err();
        assert!(matches!(err, VerifyError::Mismatch), "{scheme:?}: {err:?}");
    }
}

#[test]
fn tampered_body_is_rejected() {
    for (scheme, key) in all_schemes() {
        let headers = signed(&scheme, &key, BODY, NOW);
        let mut tampered = BODY.to_vec();
        tampered[1] ^= 1;
        for body in [&tampered[..], &BODY[..BODY.len() - 1], b""] {
            let err = scheme
                .verify(std::slice::from_ref(&key), &headers, body, NOW, 300)
                .unwrap_err();
            assert!(matches!(err, VerifyError::Mismatch), "{scheme:?}: {err:?}");
            assert_eq!(err.reason(), "signature");
        }
    }
}

#[test]
fn timestamps_outside_tolerance_both_ways() {
    for (scheme, key) in all_schemes() {
        let headers = signed(&scheme, &key, BODY, NOW);
        for (now, skew) in [
            (NOW + 301, 301),
            (NOW - 301, -301),
            (NOW + 300, 0),
            (NOW - 300, 0),
        ] {
            let result = scheme.verify(std::slice::from_ref(&key), &headers, BODY, now, 300);
            match result {
                Err(VerifyError::Timestamp { skew_secs }) if scheme.has_timestamp() => {
                    assert_eq!(skew_secs, skew, "{scheme:?}");
                    assert_eq!(result.unwrap_err().reason(), "timestamp");
                }
                Ok(()) if skew == 0 || !scheme.has_timestamp() => {}
                other => panic!("{scheme:?} at {now}: {other:?}"),
            }
        }
        // Extreme clocks and tolerances saturate instead of overflowing.
        for now in [i64::MIN, i64::MAX, 0, -1] {
            let result = scheme.verify(std::slice::from_ref(&key), &headers, BODY, now, 300);
            assert_eq!(result.is_ok(), !scheme.has_timestamp(), "{scheme:?} at {now}");
        }
        assert!(scheme
            .verify(std::slice::from_ref(&key), &headers, BODY, i64::MIN, u64::MAX)
            .is_ok());
    }
}

#[test]
fn timestamp_is_checked_before_the_signature() {
    // GIVEN a stale timestamp and a wrong signature THEN the failure is the timestamp.
    let headers = map(&[("stripe-signature", "t=1,v1=00")]);
    let err = Scheme::Stripe
        .verify(&[key()], &headers, b"", NOW, 300)
        .unwrap_err();
    assert!(matches!(err, VerifyError::Timestamp { skew_secs } if skew_secs == NOW - 1));
}

#[test]
fn huge_and_odd_timestamps_never_panic() {
    let huge = "9".repeat(40);
    for ts in [
        huge.as_str(),
        "9223372036854775807",
        "9223372036854775808",
        "0",
        "-1",
        "+5",
        " 5",
        "1.5",
        "",
        "١٢",
    ] {
        let cases = [
            (
                Scheme::Stripe,
                vec![("stripe-signature".to_owned(), format!("t={ts},v1=00"))],
            ),
            (
                Scheme::Slack,
                vec![
                    ("x-slack-request-timestamp".to_owned(), ts.to_owned()),
                    ("x-slack-signature".to_owned(), "v0=00".to_owned()),
                ],
            ),
            (
                Scheme::Svix,
                vec![
                    ("svix-id".to_owned(), "m".to_owned()),
                    ("svix-timestamp".to_owned(), ts.to_owned()),
                    ("svix-signature".to_owned(), "v1,AA==".to_owned()),
                ],
            ),
        ];
        for (scheme, pairs) in cases {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                let Ok(value) = HeaderValue::from_str(&value) else {
                    continue;
                };
                headers.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), value);
            }
            for now in [NOW, i64::MIN, i64::MAX] {
                let result = scheme.verify(&[key()], &headers, b"", now, 300);
                assert!(result.is_err(), "{scheme:?} {ts:?}");
            }
        }
    }
    // A timestamp beyond i64 is far in the future, not a malformed header.
    let headers = map(&[("stripe-signature", &format!("t={huge},v1=00"))]);
    let err = Scheme::Stripe
        .verify(&[key()], &headers, b"", NOW, 300)
        .unwrap_err();
    assert!(matches!(err, VerifyError::Timestamp { skew_secs: i64::MIN }));
}

#[test]
fn non_utf8_header_values_are_malformed() {
    let raw = HeaderValue::from_bytes(b"sha256=\xff\xfe").unwrap();
    for (scheme, name) in [
        (Scheme::Github, "x-hub-signature-256"),
        (Scheme::Shopify, "x-shopify-hmac-sha256"),
        (Scheme::Stripe, "stripe-signature"),
    ] {
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static(name), raw.clone());
        let err = scheme.verify(&[key()], &headers, b"", NOW, 300).unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedHeader(_)),
            "{scheme:?}: {err:?}"
        );
    }
    let mut headers = HeaderMap::new();
    headers.insert("x-github-delivery", HeaderValue::from_bytes(b"\xc3\x28").unwrap());
    assert!(matches!(
        Scheme::Github.identify(&headers, b""),
        Err(IdError::Invalid(_))
    ));
    // Non-ASCII but valid UTF-8 ids are fine.
    headers.insert(
        "x-github-delivery",
        HeaderValue::from_bytes("dé".as_bytes()).unwrap(),
    );
    assert_eq!(Scheme::Github.identify(&headers, b"").unwrap().event_id, "dé");
}

#[test]
fn sign_drops_ids_that_cannot_be_header_values() {
    let sent = Scheme::Github.sign(&key(), b"", &identity("a\nb", Some("dé")), NOW);
    let names: Vec<&str> = sent.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["x-hub-signature-256", "x-github-event"]);
    let mut headers = HeaderMap::new();
    headers.extend(sent);
    assert_eq!(
        Scheme::Github.identify(&headers, b"").unwrap_err().to_string(),
        "event id not found: header x-github-delivery"
    );
    headers.insert("x-github-delivery", HeaderValue::from_static("d"));
    assert_eq!(
        Scheme::Github
            .identify(&headers, b"")
            .unwrap()
            .event_type
            .as_deref(),
        Some("dé")
    );
}

#[test]
fn first_header_value_is_the_id() {
    let headers = map(&[("x-github-delivery", "first"), ("x-github-delivery", "second")]);
    assert_eq!(Scheme::Github.identify(&headers, b"").unwrap().event_id, "first");
}

#[test]
fn hostile_bodies_and_headers_never_panic() {
    let bodies: [&[u8]; 6] = [
        b"",
        b"\xff\xfe",
        b"null",
        b"{\"id\":",
        b"[1,2]",
        b"{\"id\":{\"a\":1}}",
    ];
    let junk = ["", "v1=", "t=,v1=,", "v1,", "sha256=zz", "v0=0", "==", "🎉"];
    for (scheme, key) in all_schemes() {
        for body in bodies {
            let _ = scheme.identify(&HeaderMap::new(), body);
            let _ = scheme.handshake(body);
            for value in junk {
                let mut headers = HeaderMap::new();
                for name in [
                    "stripe-signature",
                    "x-hub-signature-256",
                    "webhook-signature",
                    "svix-signature",
                    "x-slack-signature",
                    "x-shopify-hmac-sha256",
                    "x-acme-signature",
                    "webhook-timestamp",
                    "svix-timestamp",
                    "x-slack-request-timestamp",
                    "webhook-id",
                    "svix-id",
                ] {
                    headers.append(name, HeaderValue::from_bytes(value.as_bytes()).unwrap());
                }
                assert!(scheme
                    .verify(std::slice::from_ref(&key), &headers, body, NOW, 300)
                    .is_err());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Identification.

#[test]
fn json_numbers_become_decimal_text() {
    let scheme = Scheme::from(HmacParams {
        header: HeaderName::from_static("x-sig"),
        algorithm: Algorithm::Sha256,
        encoding: Encoding::Hex,
        prefix: String::new(),
        id: "json:/order/id".parse().unwrap(),
        event_type: Some("header:X-Topic".parse().unwrap()),
    });
    let headers = map(&[("x-topic", "orders/create")]);
    let found = scheme
        .identify(&headers, br#"{"order":{"id":273853956671}}"#)
        .unwrap();
    assert_eq!(found, identity("273853956671", Some("orders/create")));
    let err = scheme
        .identify(&headers, br#"{"order":{"id":true}}"#)
        .unwrap_err();
    assert!(matches!(err, IdError::Missing(ref place) if place == "json /order/id"));
    assert!(matches!(
        scheme.identify(&headers, b"<xml/>"),
        Err(IdError::MalformedBody)
    ));
    // Slack ids are body ids too.
    let found = Scheme::Slack
        .identify(&HeaderMap::new(), br#"{"event_id":12,"type":"event_callback"}"#)
        .unwrap();
    assert_eq!(found, identity("12", Some("event_callback")));
}

#[test]
fn body_sha256_locator() {
    let scheme = Scheme::from(HmacParams {
        header: HeaderName::from_static("x-sig"),
        algorithm: Algorithm::Sha256,
        encoding: Encoding::Hex,
        prefix: String::new(),
        id: "sha256".parse().unwrap(),
        event_type: None,
    });
    let found = scheme.identify(&HeaderMap::new(), b"").unwrap();
    assert_eq!(
        found.event_id,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(found.event_type, None);
    assert_eq!(scheme.kept_headers(), vec![http::header::CONTENT_TYPE]);
}

#[test]
fn control_characters_and_long_ids_are_invalid() {
    for id in ["a\nb", "tab\there", "\u{0}", "x\u{85}"] {
        let body = serde_json::to_vec(&serde_json::json!({ "id": id })).unwrap();
        let err = Scheme::Stripe.identify(&HeaderMap::new(), &body).unwrap_err();
        assert!(matches!(err, IdError::Invalid(_)), "{id:?}: {err:?}");
        assert!(!err.to_string().contains(id));
    }
    let body = serde_json::to_vec(&serde_json::json!({ "id": "é".repeat(129) })).unwrap();
    assert!(matches!(
        Scheme::Stripe.identify(&HeaderMap::new(), &body),
        Err(IdError::Invalid(_))
    ));
    let body = serde_json::to_vec(&serde_json::json!({ "id": "" })).unwrap();
    assert!(matches!(
        Scheme::Stripe.identify(&HeaderMap::new(), &body),
        Err(IdError::Missing(_))
    ));
}

#[test]
fn kept_headers_per_scheme() {
    let names = |scheme: Scheme| -> Vec<String> {
        scheme
            .kept_headers()
            .iter()
            .map(|n| n.as_str().to_owned())
            .collect()
    };
    assert_eq!(
        names(Scheme::Github),
        ["content-type", "x-github-delivery", "x-github-event"]
    );
    assert_eq!(names(Scheme::Stripe), ["content-type"]);
    assert_eq!(
        names(Scheme::StandardWebhooks),
        ["content-type", "webhook-id", "webhook-timestamp"]
    );
    assert_eq!(names(Scheme::Svix), ["content-type", "svix-id", "svix-timestamp"]);
    assert_eq!(
        names(Scheme::Slack),
        ["content-type", "x-slack-request-timestamp"]
    );
    assert!(names(Scheme::Shopify).contains(&"x-shopify-webhook-id".to_owned()));
    assert_eq!(
        names(generic(Algorithm::Sha1, Encoding::Hex, "")),
        ["content-type", "x-acme-delivery"]
    );
}

#[test]
fn names_and_timestamps() {
    let expected = [
        (Scheme::Github, "github", false),
        (Scheme::Stripe, "stripe", true),
        (Scheme::StandardWebhooks, "standard-webhooks", true),
        (Scheme::Svix, "svix", true),
        (Scheme::Shopify, "shopify", false),
        (Scheme::Slack, "slack", true),
        (generic(Algorithm::Sha256, Encoding::Hex, ""), "hmac", false),
    ];
    for (scheme, name, timestamped) in expected {
        assert_eq!(scheme.name(), name);
        assert_eq!(scheme.has_timestamp(), timestamped, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------------------
// Keys, configuration strings, and what errors may show.

#[test]
fn key_from_secret_errors() {
    for scheme in [Scheme::StandardWebhooks, Scheme::Svix] {
        assert!(matches!(scheme.key_from_secret(""), Err(KeyError::Empty)));
        assert!(matches!(scheme.key_from_secret("whsec_"), Err(KeyError::Empty)));
        let err = scheme.key_from_secret("whsec_not*base64!").unwrap_err();
        assert!(matches!(err, KeyError::NotBase64 { .. }));
        assert!(!err.to_string().contains("not*base64"));
        assert!(!format!("{err:?}").contains("not*base64"));
        // The prefix is optional, as in Svix's own libraries.
        let with = scheme.key_from_secret("whsec_c2VjcmV0").unwrap();
        let without = scheme.key_from_secret("c2VjcmV0").unwrap();
        assert_eq!(with.expose(), b"secret");
        assert_eq!(without.expose(), b"secret");
    }
    for scheme in [
        Scheme::Github,
        Scheme::Stripe,
        Scheme::Shopify,
        Scheme::Slack,
        generic(Algorithm::Sha1, Encoding::Hex, ""),
    ] {
        assert!(matches!(scheme.key_from_secret(""), Err(KeyError::Empty)));
    }
    // Stripe keys with the whole string, prefix included.
    let stripe = Scheme::Stripe.key_from_secret("whsec_abc").unwrap();
    assert_eq!(stripe.expose(), b"whsec_abc");
}

#[test]
fn key_debug_is_redacted() {
    let key = Key::new(b"hunter2".to_vec());
    assert_eq!(format!("{key:?}"), "Key([redacted])");
    assert_eq!(format!("{:?}", std::slice::from_ref(&key)), "[Key([redacted])]");
}

#[test]
fn errors_never_show_signatures_or_bodies() {
    let (scheme, key) = (Scheme::Github, key());
    let body = b"{\"secret_body\":1}";
    let mut headers = signed(&scheme, &key, body, NOW);
    let signature = headers["x-hub-signature-256"].to_str().unwrap().to_owned();
    headers.insert("x-hub-signature-256", HeaderValue::from_static("sha256=abc"));
    headers.append("x-hub-signature-256", HeaderValue::from_str(&signature).unwrap());
    let err = scheme.verify(&[key], &headers, b"other", NOW, 300).unwrap_err();
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(
            !text.contains(&signature[7..]) && !text.contains("abc") && !text.contains("other"),
            "{text}"
        );
    }
}

#[test]
fn locator_parsing() {
    assert_eq!(
        "header:X-Acme-Delivery".parse::<Locator>().unwrap(),
        Locator::Header(HeaderName::from_static("x-acme-delivery"))
    );
    assert_eq!(
        "json:/id".parse::<Locator>().unwrap(),
        Locator::Json("/id".to_owned())
    );
    assert_eq!(
        "json:/a~1b/0".parse::<Locator>().unwrap(),
        Locator::Json("/a~1b/0".to_owned())
    );
    assert_eq!("sha256".parse::<Locator>().unwrap(), Locator::BodySha256);
    for bad in [
        "",
        "header:",
        "header:bad name",
        "json:id",
        "json:",
        "body",
        "Header:x",
        "sha1",
    ] {
        let err = bad.parse::<Locator>().unwrap_err();
        assert!(!err.to_string().is_empty(), "{bad}");
    }
    let err = "json:id".parse::<Locator>().unwrap_err().to_string();
    assert!(err.contains("must start with '/'"), "{err}");
    let err = "body".parse::<Locator>().unwrap_err().to_string();
    assert!(err.contains("header:NAME"), "{err}");
}

#[test]
fn algorithm_and_encoding_parsing() {
    assert_eq!("sha1".parse::<Algorithm>().unwrap(), Algorithm::Sha1);
    assert_eq!("sha256".parse::<Algorithm>().unwrap(), Algorithm::Sha256);
    assert_eq!("sha512".parse::<Algorithm>().unwrap(), Algorithm::Sha512);
    assert!("md5"
        .parse::<Algorithm>()
        .unwrap_err()
        .to_string()
        .contains("sha256"));
    assert!("SHA256".parse::<Algorithm>().is_err());
    assert_eq!("hex".parse::<Encoding>().unwrap(), Encoding::Hex);
    assert_eq!("base64".parse::<Encoding>().unwrap(), Encoding::Base64);
    assert!("b64"
        .parse::<Encoding>()
        .unwrap_err()
        .to_string()
        .contains("base64"));
}

#[test]
fn generic_hmac_known_answer() {
    // RFC 4231 test case 2 (HMAC-SHA-256 and -512) and RFC 2202 test case 2 (HMAC-SHA-1): key "Jefe".
    let body = b"what do ya want for nothing?";
    let key = Key::new(b"Jefe".to_vec());
    for (algorithm, hex_tag) in [
        (Algorithm::Sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
        (Algorithm::Sha256, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (Algorithm::Sha512, "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"),
    ] {
        let scheme = generic(algorithm, Encoding::Hex, "sig=");
        let headers = map(&[("x-acme-signature", &format!("sig={hex_tag}"))]);
        scheme.verify(std::slice::from_ref(&key), &headers, body, 0, 0).unwrap();
        // Upper-case hex is the same signature; a missing prefix is not.
        let headers = map(&[("x-acme-signature", &format!("sig={}", hex_tag.to_uppercase()))]);
        scheme.verify(std::slice::from_ref(&key), &headers, body, 0, 0).unwrap();
        let headers = map(&[("x-acme-signature", hex_tag)]);
        assert!(scheme.verify(std::slice::from_ref(&key), &headers, body, 0, 0).is_err());
    }
}
