//! Every provider's vectors (`tests/vectors/*.json`, made by the provider's own SDK or from its documentation;
//! the generators are in `tests/vectors/generate/`), run the way the receiver runs a request: the unsigned
//! handshake, the key the request points at, the signature, the signed handshake, the events, the answer. Each
//! vector is also refused with one body byte changed, with a stale clock where the provider signs a timestamp,
//! and with the wrong key. `VECTOR=name` runs one provider's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;

use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use inbox_schemes::request::spki_of_certificate;
use inbox_schemes::{Answer, Credentials, Identified, KeyRequest, PublicKey, Request, Scheme, VerifyError};
use serde::Deserialize;

#[derive(Deserialize)]
struct Vector {
    provider: String,
    made_by: String,
    #[allow(dead_code)]
    made_with: String,
    #[allow(dead_code)]
    docs: String,
    config: Config,
    wrong_config: Config,
    signs_timestamp: bool,
    /// `false` where the provider signs nothing that covers the body (a token, fields beside the events).
    #[serde(default = "yes")]
    signs_body: bool,
    tolerance_secs: u64,
    cases: Vec<Case>,
    #[serde(default)]
    certificates: BTreeMap<String, String>,
    #[serde(default)]
    jwks: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize, Default, Clone)]
struct Config {
    #[serde(default)]
    secrets: Option<Vec<String>>,
    #[serde(default)]
    public_key: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    verify_token: Option<String>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    body_base64: Option<String>,
    now: i64,
    expect: Expect,
    #[serde(default = "yes")]
    signs_body: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct Expect {
    kind: String,
    #[serde(default)]
    event_id: Option<String>,
    #[serde(default)]
    event_type: Option<String>,
    #[serde(default)]
    items: Vec<ItemExpect>,
    #[serde(default)]
    answer: Option<AnswerExpect>,
}

#[derive(Deserialize)]
struct ItemExpect {
    event_id: String,
    #[serde(default)]
    event_type: Option<String>,
}

#[derive(Deserialize)]
struct AnswerExpect {
    status: u16,
    content_type: String,
    body: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
}

fn credentials(scheme: &Scheme, config: &Config, fallback: &Config) -> Credentials {
    let secrets = config.secrets.as_ref().or(fallback.secrets.as_ref());
    let public_key = config.public_key.as_ref().or(fallback.public_key.as_ref());
    Credentials {
        secrets: secrets
            .into_iter()
            .flatten()
            .map(|s| scheme.key_from_secret(s).expect("the vector's secret is a key"))
            .collect(),
        public_key: public_key.map(|k| scheme.public_key(k).expect("the vector's public key parses")),
        url: config.url.clone().or(fallback.url.clone()),
        verify_token: config
            .verify_token
            .as_ref()
            .or(fallback.verify_token.as_ref())
            .map(|t| inbox_schemes::Key::new(t.as_bytes().to_vec())),
    }
}

/// What the receiver would do with the request: an answer (handshake or required), or the events, or a refusal.
#[derive(Debug)]
enum Outcome {
    Handshake(Answer),
    Events(Identified, Option<Answer>),
    Refused(VerifyError),
}

fn run(vector: &Vector, scheme: &Scheme, creds: &Credentials, req: &Request, now: i64) -> Outcome {
    if let Some(answer) = scheme.unsigned_handshake(creds, req) {
        return match answer {
            Ok(answer) => Outcome::Handshake(answer),
            Err(e) => Outcome::Refused(e),
        };
    }
    let fetched = match scheme.key_request(creds, req) {
        Err(e) => return Outcome::Refused(e),
        Ok(None) => None,
        Ok(Some(KeyRequest::Certificate { url, .. })) => {
            let pem = vector
                .certificates
                .get(&url)
                .unwrap_or_else(|| panic!("{}: no certificate for {url}", vector.provider));
            let der = pem::parse(pem).unwrap();
            Some(PublicKey::Rsa(spki_of_certificate(der.contents()).unwrap()))
        }
        Ok(Some(KeyRequest::Jwks { kid, .. } | KeyRequest::JwkByPost { kid, .. })) => {
            let jwk = vector
                .jwks
                .get(&kid)
                .unwrap_or_else(|| panic!("{}: no JWK {kid}", vector.provider));
            Some(PublicKey::Jwks(vec![(kid.clone(), jwk.to_string())]))
        }
    };
    let tolerance = scheme.default_tolerance_secs().unwrap_or(vector.tolerance_secs);
    if let Err(e) = scheme.verify_request(creds, req, now, tolerance, fetched.as_ref()) {
        return Outcome::Refused(e);
    }
    if let Some(answer) = scheme.signed_handshake(creds, req) {
        return Outcome::Handshake(answer);
    }
    match scheme.identify_request(req) {
        Ok(identified) => Outcome::Events(identified, scheme.required_answer(req)),
        Err(e) => panic!("{}: verified but not identified: {e}", vector.provider),
    }
}

fn check_answer(provider: &str, case: &str, got: &Answer, want: &AnswerExpect) {
    assert_eq!(got.status, want.status, "{provider} {case}: answer status");
    assert!(
        got.content_type
            .starts_with(want.content_type.split(';').next().unwrap()),
        "{provider} {case}: content type {} (want {})",
        got.content_type,
        want.content_type
    );
    assert_eq!(
        String::from_utf8_lossy(&got.body),
        want.body,
        "{provider} {case}: answer body"
    );
    let headers: Vec<(String, String)> = got
        .headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect();
    assert_eq!(headers, want.headers, "{provider} {case}: answer headers");
}

#[test]
fn every_vector_verifies_and_is_refused_when_changed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let only = std::env::var("VECTOR").ok();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut ran = 0;
    let mut by = BTreeMap::<String, Vec<String>>::new();
    for path in files {
        let vector: Vector = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if only.as_deref().is_some_and(|o| o != vector.provider) {
            continue;
        }
        let p = vector.provider.as_str();
        let scheme = Scheme::named(p).unwrap_or_else(|| panic!("{p}: no such scheme"));
        assert_eq!(
            scheme.has_timestamp(),
            vector.signs_timestamp,
            "{p}: signs a timestamp"
        );
        let creds = credentials(&scheme, &vector.config, &Config::default());
        let wrong = credentials(&scheme, &vector.wrong_config, &vector.config);
        by.entry(vector.made_by.clone()).or_default().push(p.to_owned());
        for case in &vector.cases {
            let c = case.name.as_str();
            let body = match (&case.body, &case.body_base64) {
                (_, Some(b64)) => {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD.decode(b64).unwrap()
                }
                (Some(text), None) => text.clone().into_bytes(),
                (None, None) => Vec::new(),
            };
            let uri: Uri = case.url.parse().unwrap();
            let uri: Uri = uri.path_and_query().map_or("/", |p| p.as_str()).parse().unwrap();
            let method: Method = case.method.parse().unwrap();
            let mut headers = HeaderMap::new();
            for (name, value) in &case.headers {
                headers.append(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                );
            }
            let req = Request {
                method: &method,
                uri: &uri,
                headers: &headers,
                body: &body,
                received_ms: case.now * 1000,
            };
            let outcome = run(&vector, &scheme, &creds, &req, case.now);
            match (case.expect.kind.as_str(), &outcome) {
                ("handshake", Outcome::Handshake(answer)) => {
                    check_answer(
                        p,
                        c,
                        answer,
                        case.expect.answer.as_ref().expect("a handshake's answer"),
                    );
                    // Nothing to store: a handshake is never identified as an event here.
                }
                ("event", Outcome::Events(Identified::One(id), answer)) => {
                    assert_eq!(
                        Some(&id.event_id),
                        case.expect.event_id.as_ref(),
                        "{p} {c}: event id"
                    );
                    assert_eq!(id.event_type, case.expect.event_type, "{p} {c}: event type");
                    match (&case.expect.answer, answer) {
                        (Some(want), Some(got)) => check_answer(p, c, got, want),
                        (None, None) => {}
                        (want, got) => panic!("{p} {c}: required answer {:?} vs {got:?}", want.is_some()),
                    }
                }
                ("batch", Outcome::Events(Identified::Batch(items), answer)) => {
                    let got: Vec<_> = items
                        .iter()
                        .map(|i| (i.identity.event_id.clone(), i.identity.event_type.clone()))
                        .collect();
                    let want: Vec<_> = case
                        .expect
                        .items
                        .iter()
                        .map(|i| (i.event_id.clone(), i.event_type.clone()))
                        .collect();
                    assert_eq!(got, want, "{p} {c}: the batch's items");
                    if let Some(want) = &case.expect.answer {
                        check_answer(p, c, answer.as_ref().expect("a required answer"), want);
                    }
                }
                (kind, other) => panic!("{p} {c}: expected {kind}, got {other:?}"),
            }
            // Refusals: only requests that carry a signature (an unsigned handshake answers without one).
            if scheme.unsigned_handshake(&creds, &req).is_some() {
                ran += 1;
                continue;
            }
            let refused = |what: &str, outcome: Outcome| match outcome {
                Outcome::Refused(e) => println!("{p} {c}: {what} -> 401 ({e}; reason {})", e.reason()),
                other => panic!("{p} {c}: {what} was not refused: {other:?}"),
            };
            // A token signs nothing: whoever holds it may send any body (and a case may say its provider signs
            // fields beside the body only).
            if !body.is_empty() && vector.signs_body && case.signs_body && scheme.family() != "token" {
                let mut changed = body.clone();
                let at = changed.len() / 2;
                changed[at] = if changed[at] == b'x' { b'y' } else { b'x' };
                let req = Request {
                    body: &changed,
                    ..req
                };
                refused(
                    "one body byte changed",
                    run(&vector, &scheme, &creds, &req, case.now),
                );
            }
            if vector.signs_timestamp {
                let stale = case.now
                    + vector
                        .tolerance_secs
                        .max(scheme.default_tolerance_secs().unwrap_or(0)) as i64
                    + 3600;
                refused("a stale timestamp", run(&vector, &scheme, &creds, &req, stale));
            }
            refused("the wrong key", run(&vector, &scheme, &wrong, &req, case.now));
            ran += 1;
        }
    }
    for (made_by, providers) in &by {
        println!(
            "made by {made_by}: {} providers: {}",
            providers.len(),
            providers.join(", ")
        );
    }
    assert!(ran > 0 || only.is_some(), "no vectors ran");
}

/// Every named provider has its vectors, and every vector names a provider.
#[test]
fn every_named_provider_has_a_vector() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let missing: Vec<_> = inbox_schemes::providers::NAMES
        .iter()
        .filter(|name| !dir.join(format!("{name}.json")).exists())
        .collect();
    assert!(missing.is_empty(), "providers without a vector: {missing:?}");
}

/// A delivery signed by hand as `inbox send --source X` signs it: the scheme, the source's credentials, the
/// headers and body sent, and the time signed at; `Err` says why a provider cannot be signed by hand.
struct Sent {
    scheme: Scheme,
    creds: Credentials,
    identity: inbox_schemes::Identity,
    headers: HeaderMap,
    body: Vec<u8>,
    now: i64,
}

/// A sample body with an id and type where the provider puts them, signed as the provider signs (a fresh key pair
/// for the asymmetric ones).
fn sign_sample(name: &str) -> Result<Sent, String> {
    use aws_lc_rs::signature::{self as sig, KeyPair};
    use inbox_schemes::{Family, Identity, Key, Signer};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let vector: Vector =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    let scheme = Scheme::named(name).unwrap();
    let mut creds = credentials(&scheme, &vector.config, &Config::default());
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let family = &scheme.preset().unwrap().family;
    let signer = match family {
        Family::Ed25519(_) => {
            let pkcs8 = sig::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
            let pair = sig::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
            creds.public_key = Some(PublicKey::Ed25519(pair.public_key().as_ref().to_vec()));
            Signer::Private {
                pkcs8: Key::new(pkcs8.as_ref().to_vec()),
                key_url: None,
            }
        }
        Family::Ecdsa(_) => {
            let pkcs8 =
                sig::EcdsaKeyPair::generate_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
            let pair =
                sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
            creds.public_key = Some(PublicKey::P256(pair.public_key().as_ref().to_vec()));
            Signer::Private {
                pkcs8: Key::new(pkcs8.as_ref().to_vec()),
                key_url: None,
            }
        }
        Family::Rsa(_) => {
            let pair = sig::RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
            let pkcs8 = aws_lc_rs::encoding::AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
            creds.public_key = Some(PublicKey::Rsa(pair.public_key().as_ref().to_vec()));
            Signer::Private {
                pkcs8: Key::new(pkcs8.as_ref().to_vec()),
                key_url: None,
            }
        }
        Family::Jwt(j) if j.algorithms.iter().any(|a| *a != jsonwebtoken::Algorithm::HS256) => {
            return Err(format!(
                "{name}: signed by the provider's own key, fetched by the receiver"
            ));
        }
        _ => match creds.secrets.first() {
            Some(key) => Signer::Secret(key.clone()),
            None => return Err(format!("{name}: no secret")),
        },
    };
    let identity = Identity {
        event_id: format!("evt_{}_sample", name.replace('-', "_")),
        event_type: Some("sample.event".to_owned()),
    };
    let now = vector.cases[0].now;
    let sample = scheme.sample_at(std::slice::from_ref(&identity), now);
    let uri: Uri = "/webhooks/sample".parse().unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(sample.content_type),
    );
    for (n, v) in &sample.headers {
        headers.insert(n.clone(), HeaderValue::from_str(v).unwrap());
    }
    let req = Request::post(&uri, &headers, &sample.body);
    let Some(out) = scheme.sign_request(&signer, &creds, &req, &identity, now) else {
        return Err(format!(
            "{name}: the family cannot sign with what the source holds"
        ));
    };
    let body = out.body.unwrap_or(sample.body);
    for (n, v) in out.headers {
        headers.insert(n, HeaderValue::from_str(&v).unwrap());
    }
    Ok(Sent {
        scheme,
        creds,
        identity,
        headers,
        body,
        now,
    })
}

/// What `inbox send --source X` does for every provider: a sample body with an id and type where the provider puts
/// them, signed as the provider signs (a fresh key pair for the asymmetric ones), then verified and identified as
/// the receiver does. Providers that cannot be signed by hand say why, and are listed.
#[test]
fn every_provider_signs_what_it_verifies() {
    let mut unsigned = Vec::new();
    let mut signed = 0;
    for name in inbox_schemes::providers::NAMES {
        let sent = match sign_sample(name) {
            Ok(sent) => sent,
            Err(why) => {
                unsigned.push(why);
                continue;
            }
        };
        let (scheme, creds, now) = (&sent.scheme, &sent.creds, sent.now);
        let uri: Uri = "/webhooks/sample".parse().unwrap();
        let req = Request::post(&uri, &sent.headers, &sent.body);
        let tolerance = scheme.default_tolerance_secs().unwrap_or(300);
        if scheme.key_request(creds, &req).ok().flatten().is_some() {
            unsigned.push(format!(
                "{name}: verified with a certificate the receiver fetches (end-to-end tests)"
            ));
            continue;
        }
        match scheme.verify_request(creds, &req, now, tolerance, None) {
            Ok(()) => {}
            Err(e) => {
                unsigned.push(format!("{name}: its own signature does not verify: {e}"));
                continue;
            }
        }
        if let Err(e) = scheme.identify_request(&req) {
            unsigned.push(format!("{name}: the sample is signed but not identified: {e}"));
            continue;
        }
        signed += 1;
    }
    println!(
        "signed, verified and identified: {signed} of {}",
        inbox_schemes::providers::NAMES.len()
    );
    for why in &unsigned {
        println!("  not signed by hand: {why}");
    }
    // The providers a hand cannot sign for: their signature is made by a key only the provider holds and the
    // receiver fetches (a certificate, a JWK), which the end-to-end tests sign with a test key of their own.
    let by_the_provider = ["aws-sns", "paypal", "plaid", "google-pubsub"];
    let others: Vec<_> = unsigned
        .iter()
        .filter(|why| !by_the_provider.iter().any(|p| why.starts_with(&format!("{p}:"))))
        .collect();
    assert!(others.is_empty(), "inbox send cannot sign for these: {others:#?}");
}

/// The ids of a delivery's events, as the receiver finds them.
fn ids(identified: Identified) -> Vec<String> {
    match identified {
        Identified::One(identity) => vec![identity.event_id],
        Identified::Batch(items) => items.into_iter().map(|i| i.identity.event_id).collect(),
    }
}

/// A captured delivery sent again with its body and signature untouched but under a fresh id (the id's header
/// changed, or the same bytes a minute later) must be looked for as a resent body wherever its signature still
/// verifies: the provider's preset says `resendable`, so the receiver's resent-body guard marks it (`resent_of`)
/// instead of taking it for a new event. A provider whose signature covers the id refuses the changed header, and
/// one whose id is the body's (or a signed part's) finds the same id: neither needs the guard.
#[test]
fn a_delivery_replayed_under_a_fresh_id_is_looked_for_as_a_resent_body() {
    let mut unguarded = Vec::new();
    let mut replayable = Vec::new();
    for name in inbox_schemes::providers::NAMES {
        let Ok(sent) = sign_sample(name) else { continue };
        let (scheme, creds, now) = (&sent.scheme, &sent.creds, sent.now);
        let uri: Uri = "/webhooks/sample".parse().unwrap();
        let req = Request::post(&uri, &sent.headers, &sent.body);
        let tolerance = scheme.default_tolerance_secs().unwrap_or(300);
        if scheme.key_request(creds, &req).ok().flatten().is_some()
            || scheme.verify_request(creds, &req, now, tolerance, None).is_err()
        {
            continue;
        }
        let first = ids(scheme.identify_request(&req).unwrap());
        // The same bytes with every header that carries the id given a fresh one, then the same bytes arriving a
        // minute later (a replay of the original when it was received later).
        let fresh = sent.identity.event_id.replace("_sample", "_replayed");
        let mut renamed = sent.headers.clone();
        for value in renamed.values_mut() {
            let text = value.to_str().unwrap_or_default();
            if text.contains(&sent.identity.event_id) {
                *value = HeaderValue::from_str(&text.replace(&sent.identity.event_id, &fresh)).unwrap();
            }
        }
        let replays = [
            (
                "a fresh id header",
                Request::post(&uri, &renamed, &sent.body),
                now,
            ),
            (
                "a minute later",
                Request {
                    received_ms: req.received_ms + 61_000,
                    ..Request::post(&uri, &sent.headers, &sent.body)
                },
                now + 61,
            ),
        ];
        for (how, replay, at) in replays {
            if scheme
                .verify_request(creds, &replay, at, tolerance, None)
                .is_err()
            {
                continue;
            }
            let again = ids(scheme.identify_request(&replay).unwrap());
            if again != first {
                replayable.push(format!("{name} ({how})"));
                if !scheme.signs_body_but_not_id() {
                    unguarded.push(format!("{name}: {how}: {first:?} then {again:?}"));
                }
            }
        }
    }
    println!("replayable under a fresh id, and guarded: {replayable:?}");
    assert!(
        unguarded.is_empty(),
        "a captured delivery verifies under a fresh id, and its scheme does not look for resent bodies:\n{}",
        unguarded.join("\n")
    );
}

/// The signature compare is the constant-time one: every HMAC a scheme checks goes through `verify_mac`, which
/// compares with `subtle::ConstantTimeEq` and does not stop at the first match, and no scheme or provider compares
/// a MAC with `==`. (A static check of the code: timing itself cannot be measured reliably in a test.)
#[test]
fn signatures_are_compared_in_constant_time() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let read = |f: &Path| std::fs::read_to_string(f).unwrap_or_default();
    let mac_rs = read(&src.join("mac.rs"));
    let helper = mac_rs
        .split("fn verify_mac(")
        .nth(1)
        .and_then(|rest| rest.split("\n}\n").next())
        .unwrap_or_default();
    assert!(
        helper.contains("ct_eq("),
        "verify_mac no longer compares with subtle's ct_eq"
    );
    assert!(
        !helper.contains("return Ok"),
        "verify_mac stops at the first match"
    );
    let mut files: Vec<_> = [
        "github.rs",
        "stripe.rs",
        "standard.rs",
        "shopify.rs",
        "slack.rs",
        "families/hmac.rs",
    ]
    .iter()
    .map(|f| src.join(f))
    .collect();
    files.extend(
        std::fs::read_dir(src.join("providers"))
            .unwrap()
            .map(|e| e.unwrap().path()),
    );
    let mut checked = 0;
    for f in &files {
        let text = read(f);
        assert!(!text.is_empty(), "{} not found", f.display());
        // Every file that makes a MAC to check verifies it through verify_mac (a signer only makes one).
        let verifies = text.contains("fn verify(") || f.ends_with("families/hmac.rs");
        // A call of `mac(` itself, not of `hmac(` or `verify_mac(`.
        let makes_mac = text.match_indices("mac(").any(|(i, _)| {
            i == 0 || !text.as_bytes()[i - 1].is_ascii_alphanumeric() && text.as_bytes()[i - 1] != b'_'
        });
        if verifies && makes_mac {
            assert!(
                text.contains("verify_mac("),
                "{} checks a MAC without verify_mac",
                f.display()
            );
            checked += 1;
        }
        for bad in [
            "== expected",
            "expected ==",
            "== mac",
            "mac ==",
            "== sig",
            "sig ==",
            "== candidate",
            "== tag",
        ] {
            assert!(
                !text.contains(bad),
                "{} compares a signature with `==`: {bad:?}",
                f.display()
            );
        }
    }
    assert!(checked > 10, "only {checked} files checked");
}
