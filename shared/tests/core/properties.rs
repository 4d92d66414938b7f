//! Hostile input, as properties (`proptest`, no nightly toolchain here so no cargo-fuzz): what a request
//! or a file can hold never panics the signature schemes, the duration and config parsers or the event id, and a
//! valid signature stops verifying when any single body byte changes. The case counts are in `CASES_*`, which
//! RELIABILITY.md quotes.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use inbox_core::config::Config;
use inbox_core::model::EventId;
use inbox_core::schemes::{Algorithm, Encoding, HmacParams, Identity, Key, Locator, Scheme};
use inbox_core::time::parse_duration;
use proptest::prelude::*;

/// Cases per property in the suite, times `INBOX_PROPTEST_SCALE` (default 1): the longer documented run is
/// `INBOX_PROPTEST_SCALE=100 cargo test --release -p inbox-core --test core properties::`.
fn cases(base: u32) -> u32 {
    let scale: u32 = std::env::var("INBOX_PROPTEST_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    base.saturating_mul(scale.max(1))
}

const CASES_RANDOM_REQUESTS: u32 = 3_000;
const CASES_BYTE_FLIPS: u32 = 2_000;
const CASES_DURATIONS: u32 = 3_000;
const CASES_CONFIGS: u32 = 3_000;
const CASES_EVENT_IDS: u32 = 3_000;

/// Every scheme, the generic HMAC one in both encodings and with its id in a header and in the body.
fn schemes() -> Vec<Scheme> {
    vec![
        Scheme::Github,
        Scheme::Stripe,
        Scheme::StandardWebhooks,
        Scheme::Svix,
        Scheme::Shopify,
        Scheme::Slack,
        Scheme::from(HmacParams {
            header: HeaderName::from_static("x-signature"),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: "sha256=".into(),
            id: Locator::Json("id".into()),
            event_type: Some(Locator::Json("type".into())),
        }),
        Scheme::from(HmacParams {
            header: HeaderName::from_static("x-signature"),
            algorithm: Algorithm::Sha512,
            encoding: Encoding::Base64,
            prefix: String::new(),
            id: Locator::Header(HeaderName::from_static("x-event-id")),
            event_type: None,
        }),
        Scheme::from(HmacParams {
            header: HeaderName::from_static("x-signature"),
            algorithm: Algorithm::Sha1,
            encoding: Encoding::Hex,
            prefix: String::new(),
            id: Locator::BodySha256,
            event_type: None,
        }),
    ]
}

/// The header names the schemes read, and a few they do not.
const NAMES: &[&str] = &[
    "x-hub-signature-256",
    "x-github-delivery",
    "x-github-event",
    "stripe-signature",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "x-shopify-hmac-sha256",
    "x-shopify-webhook-id",
    "x-shopify-topic",
    "x-shopify-triggered-at",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "x-signature",
    "x-event-id",
    "content-type",
    "x-other",
];

/// Header values: random bytes, and shapes close to real signatures (the parsers' interesting edges).
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..120),
        "(t=-?[0-9]{0,20},?)?(v[0-9]=[0-9a-f]{0,70},? ?){0,4}".prop_map(String::into_bytes),
        "(v[0-9a]?,[A-Za-z0-9+/=]{0,90} ?){0,4}".prop_map(String::into_bytes),
        "(sha(1|256|512)=)?[0-9a-fA-F]{0,130}".prop_map(String::into_bytes),
        "v0=[0-9a-f]{0,70}".prop_map(String::into_bytes),
        "-?[0-9]{0,25}".prop_map(String::into_bytes),
        "[ -~]{0,60}".prop_map(String::into_bytes),
    ]
}

/// Bodies: random bytes, and JSON-ish text with ids of every shape.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        "\\{(\"(id|type|challenge|event_id)\": ?(\"[^\"]{0,40}\"|-?[0-9]{1,30}|null|\\[\\]|\\{\\}|true),? ?){0,5}\\}?"
            .prop_map(String::into_bytes),
        "\\{\"type\": ?\"url_verification\", ?\"challenge\": ?\"[a-z]{0,20}\"\\}".prop_map(String::into_bytes),
    ]
}

fn headers(pairs: &[(usize, Vec<u8>)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        // A value a client could not send (CR, LF, NUL…) never reaches the receiver: the HTTP layer refuses it.
        if let Ok(value) = HeaderValue::from_bytes(value) {
            map.append(HeaderName::from_static(NAMES[name % NAMES.len()]), value);
        }
    }
    map
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(CASES_RANDOM_REQUESTS)))]

    /// Random (and repeated) headers and bodies never panic `verify`, `identify` or `handshake`, under any key
    /// set (none, one, several), clock and tolerance; and random junk never verifies.
    #[test]
    fn random_requests_never_panic_any_scheme(
        pairs in proptest::collection::vec((any::<usize>(), header_value()), 0..8),
        body in body(),
        keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..40), 0..3),
        now in prop_oneof![Just(1_764_480_000i64), any::<i64>()],
        tolerance in prop_oneof![Just(300u64), any::<u64>()],
    ) {
        let headers = headers(&pairs);
        let keys: Vec<Key> = keys.into_iter().map(Key::new).collect();
        for scheme in schemes() {
            let verified = scheme.verify(&keys, &headers, &body, now, tolerance);
            prop_assert!(
                verified.is_err() || !keys.is_empty(),
                "{} verified with no key at all", scheme.name()
            );
            let _ = scheme.identify(&headers, &body);
            let _ = scheme.handshake(&body);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(CASES_BYTE_FLIPS)))]

    /// A signature made by the scheme verifies, and the same request with any single body byte changed (any bit
    /// pattern) never does, for every scheme.
    #[test]
    fn one_flipped_body_byte_never_verifies(
        secret in proptest::collection::vec(any::<u8>(), 1..64),
        body in proptest::collection::vec(any::<u8>(), 1..400),
        at in any::<usize>(),
        mask in 1u8..=255,
        id in "[A-Za-z0-9_-]{1,40}",
        now in 1_000_000_000i64..4_000_000_000,
    ) {
        let key = Key::new(secret);
        let identity = Identity { event_id: id, event_type: Some("push".into()) };
        let mut flipped = body.clone();
        let i = at % flipped.len();
        flipped[i] ^= mask;
        for scheme in schemes() {
            let mut headers = HeaderMap::new();
            for (name, value) in scheme.sign(&key, &body, &identity, now) {
                headers.append(name, value);
            }
            let keys = [key.clone()];
            prop_assert!(
                scheme.verify(&keys, &headers, &body, now, 300).is_ok(),
                "{}: its own signature does not verify", scheme.name()
            );
            prop_assert!(
                scheme.verify(&keys, &headers, &flipped, now, 300).is_err(),
                "{}: verified with byte {i} flipped by {mask:#04x}", scheme.name()
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(CASES_DURATIONS)))]

    /// Any text: `parse_duration` answers (never panics, never overflows).
    #[test]
    fn parse_duration_never_panics(text in prop_oneof![
        any::<String>(),
        "[0-9]{0,30}(ms|s|m|h|d|x|)".prop_map(|s| s),
        " ?-?[0-9]{0,5} ?(ms|s|m|h|d)? ?".prop_map(|s| s),
    ]) {
        let _ = parse_duration(&text);
    }

    /// Every well-formed duration parses to its value, or is refused as too long; never a wrong value. "Too long"
    /// starts at 2^64 ns for humantime's sub-second units (~584 years) and at 2^64 ms for the others.
    #[test]
    fn parse_duration_reads_what_it_is_given(n in any::<u64>(), unit in 0usize..5) {
        let (suffix, ms) = [("ms", 1u64), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)][unit];
        let text = format!("{n}{suffix}");
        let total = n.checked_mul(ms);
        match parse_duration(&text) {
            Ok(d) => prop_assert_eq!(Some(d), total.map(Duration::from_millis)),
            Err(_) => prop_assert!(total.is_none_or(|t| t > u64::MAX / 1_000_000), "{text} refused"),
        }
    }
}

/// TOML-ish text: lines built from the config's own section names, keys and values, plus junk.
fn tomlish() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("[server]".to_owned()),
        Just("[retry]".to_owned()),
        Just("[sweeper]".to_owned()),
        Just("[alarm]".to_owned()),
        "\\[sources\\.[a-z_\\-]{0,12}\\]".prop_map(|s| s),
        "\\[sources\\.[a-z]{1,8}\\.handler\\]".prop_map(|s| s),
        "(scheme|secrets|handler|kind|url|timeout|tolerance|max_body_bytes|listen|workers|max_pending_writes|\
          read_timeout|base|cap|max_attempts|max_age|interval|grace|retention_days|notify_url|header|algorithm|\
          encoding|prefix|id|event_type|name) = (\"[ -~]{0,20}\"|-?[0-9]{1,22}|\\[\"[a-z:_]{0,12}\"\\]|\
          \\{ ?kind ?= ?\"[a-z]{0,8}\" ?\\}|true|\"(github|stripe|standard-webhooks|svix|shopify|slack|hmac)\"|\
          \"env:[A-Z_]{0,8}\"|\"[0-9]{0,6}(ms|s|m|h|d)\")".prop_map(|s| s),
        any::<String>(),
    ];
    proptest::collection::vec(line, 0..14).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(CASES_CONFIGS)))]

    /// Any TOML-ish text: `Config::from_toml` accepts it or names what is wrong; it never panics.
    #[test]
    fn config_from_toml_never_panics(text in tomlish()) {
        if let Err(e) = Config::from_toml(&text) {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(CASES_EVENT_IDS)))]

    /// `EventId::parse` takes exactly 1–256 bytes without control characters, and keeps them unchanged.
    #[test]
    fn event_id_parse_is_exactly_the_rule(id in prop_oneof![
        any::<String>(),
        "[ -~]{0,300}".prop_map(|s| s),
        "[a-z]{250,260}".prop_map(|s| s),
        "[\\x00-\\x1f\\x7f\u{80}-\u{9f}a-z]{0,8}".prop_map(|s| s),
    ]) {
        let valid = !id.is_empty() && id.len() <= 256 && !id.chars().any(char::is_control);
        match EventId::parse(&id) {
            Ok(parsed) => {
                prop_assert!(valid, "{id:?} was accepted");
                prop_assert_eq!(parsed.as_str(), id.as_str());
            }
            Err(_) => prop_assert!(!valid, "{id:?} was refused"),
        }
    }
}
