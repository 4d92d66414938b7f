//! The keys requests point at, under a flood (docs/DESIGN.md "Providers: who can send"). Anyone can post a request
//! naming a certificate URL or a key id, signed or not: a flood of invented ones makes at most each source's budget
//! of fetches, counted at a local HTTPS host standing in for PayPal, SNS and Plaid; real deliveries whose key is
//! cached are accepted through it, and one whose certificate was never fetched waits for the budget (503, never
//! 401); forgeries refused for their key are refused signatures in delivery health and the metrics; and the log
//! counts all of it once a minute instead of a line a request.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inbox_core::keys::FETCHES_PER_MINUTE;
use inbox_core::schemes::{Credentials, Identity, Key, Request, Scheme, Signer as KeySigner};
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{json, Value};

use crate::common::*;
use crate::providers::{der, keys, p256_jwk, plaid_token, read, sns_message, HANDLER, PLAID_KID};

const TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:orders";
const WEBHOOK_ID: &str = "8PT597110X687430LKGECATA";
/// The client ids of the two Plaid sources, told apart at the key host by the body of each key request.
const PLAID_API: &str = "client-flooded:plaid-test-secret";
const PLAID_QUIET_API: &str = "client-quiet:plaid-test-secret";
/// A certificate real PayPal deliveries name from the start, and one no request names until the flood is over.
const PAYPAL_CERT: &str = "/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77";
const PAYPAL_LATER: &str = "/v1/notifications/certs/CERT-360caa42-fca2a594-1d93a270";
const SNS_CERT: &str = "/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem";
const PLAID_KEY: &str = "/webhook_verification_key/get";
/// Forged requests of the key's shape (distinct URLs or key ids) per flooded source, and of no key's shape.
const FLOOD: usize = 1000;
const OFF_SHAPE: usize = 100;

fn config(notify: &str) -> String {
    format!(
        "[alarm]\nnotify_url = \"{notify}/alerts\"\n\
         [sources.paypal]\nscheme = \"paypal\"\nsecrets = [\"env:PAYPAL_WEBHOOK_ID\"]\n{HANDLER}\n\
         [sources.sns]\nscheme = \"aws-sns\"\nsecrets = [\"env:SNS_TOPIC\"]\n{HANDLER}\n\
         [sources.plaid]\nscheme = \"plaid\"\nsecrets = [\"env:PLAID_API\"]\n{HANDLER}\n\
         [sources.paypal-quiet]\nscheme = \"paypal\"\nsecrets = [\"env:PAYPAL_WEBHOOK_ID\"]\n{HANDLER}\n\
         [sources.plaid-quiet]\nscheme = \"plaid\"\nsecrets = [\"env:PLAID_QUIET_API\"]\n{HANDLER}\n"
    )
}

fn header(name: &str, value: &str) -> (HeaderName, HeaderValue) {
    (
        name.parse().expect("a header name"),
        value.parse().expect("a header value"),
    )
}

/// A PayPal delivery of event `id` as PayPal signs it, naming the certificate at `cert_path` on api.paypal.com.
fn paypal(id: &str, cert_path: &str) -> (String, Vec<(HeaderName, HeaderValue)>) {
    let body =
        json!({"id": id, "event_type": "PAYMENT.CAPTURE.COMPLETED", "resource": {"id": "5O190127TN364715T"}})
            .to_string();
    let signer = KeySigner::Private {
        pkcs8: Key::new(der("signer.key")),
        key_url: Some(format!("https://api.paypal.com{cert_path}")),
    };
    let creds = Credentials::secrets(vec![Key::new(WEBHOOK_ID.as_bytes().to_vec())]);
    let (uri, headers) = (http::Uri::from_static("/webhooks/paypal"), http::HeaderMap::new());
    let identity = Identity {
        event_id: id.to_owned(),
        event_type: Some("PAYMENT.CAPTURE.COMPLETED".to_owned()),
    };
    let signed = Scheme::named("paypal")
        .expect("paypal")
        .sign_request(
            &signer,
            &creds,
            &Request::post(&uri, &headers, body.as_bytes()),
            &identity,
            now_unix(),
        )
        .expect("signed as PayPal signs");
    let headers = signed
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), value.parse().expect("a header value")))
        .collect();
    (body, headers)
}

fn sns_headers() -> Vec<(HeaderName, HeaderValue)> {
    vec![header("x-amz-sns-message-type", "Notification")]
}

/// A Plaid delivery of `item` signed with the test key, naming `kid`.
fn plaid(item: &str, kid: &str) -> (String, Vec<(HeaderName, HeaderValue)>) {
    let body =
        json!({"webhook_type": "TRANSACTIONS", "webhook_code": "SYNC_UPDATES_AVAILABLE", "item_id": item})
            .to_string();
    let token = plaid_token(kid, &body, now_unix());
    (body, vec![header("plaid-verification", &token)])
}

/// One forged request: the source it goes to, its body and headers. `n` makes its key distinct; `shaped`, a key
/// of the provider's shape (a certificate's path, a UUID), else one of no key's shape.
fn forged(provider: &str, n: usize, shaped: bool) -> (String, String, Vec<(HeaderName, HeaderValue)>) {
    match provider {
        "paypal" | "paypal-quiet" => {
            let url = if shaped {
                format!("https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-{n:08x}")
            } else {
                format!("https://api.paypal.com{PAYPAL_CERT}?n={n}")
            };
            let headers = vec![
                header("paypal-cert-url", &url),
                header(
                    "paypal-transmission-id",
                    &format!("{n:08x}-0000-11ef-8d7c-000000000000"),
                ),
                header("paypal-transmission-time", "2026-01-01T00:00:00Z"),
                header("paypal-transmission-sig", "Zm9yZ2Vk"),
                header("paypal-auth-algo", "SHA256withRSA"),
            ];
            let body = json!({"id": format!("WH-FORGED-{n}"), "event_type": "PAYMENT.CAPTURE.COMPLETED"});
            (provider.to_owned(), body.to_string(), headers)
        }
        "sns" => {
            let url = if shaped {
                format!("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-{n:032x}.pem")
            } else {
                format!("https://sns.s3.amazonaws.com/SimpleNotificationService-{n:032x}.pem")
            };
            // The topic is a listed one (the worst case: a topic ARN is no secret); the signature is anything.
            let body = json!({"Type": "Notification", "MessageId": format!("forged-{n}"), "TopicArn": TOPIC,
                "Message": "{}", "Timestamp": "2026-01-01T00:00:00.000Z", "SignatureVersion": "2",
                "Signature": "Zm9yZ2Vk", "SigningCertURL": url});
            ("sns".to_owned(), body.to_string(), sns_headers())
        }
        plaid_source => {
            let kid = if shaped {
                format!("{:08x}-0000-4000-8000-{n:012x}", n + 1)
            } else {
                format!("plaid-key-{n}")
            };
            let (body, headers) = plaid(&format!("forged-{n}"), &kid);
            (plaid_source.to_owned(), body, headers)
        }
    }
}

/// Which provider a request the key host saw was for, by its path and (Plaid's POSTs) its client id.
fn fetched_for(path: &str, body: &str) -> &'static str {
    if path.starts_with("/v1/notifications/certs/") {
        "paypal"
    } else if path.starts_with("/SimpleNotificationService-") {
        "sns"
    } else if body.contains("client-quiet") {
        "plaid-quiet"
    } else {
        "plaid"
    }
}

fn fetches(host: &testkit::https::HttpsServer) -> BTreeMap<&'static str, usize> {
    let mut by = BTreeMap::new();
    for (path, body) in host.hits().iter().zip(host.bodies()) {
        *by.entry(fetched_for(path, &body)).or_default() += 1;
    }
    by
}

/// GIVEN PayPal, SNS and Plaid sources, a local HTTPS host answering as api.paypal.com,
/// sns.us-east-1.amazonaws.com and production.plaid.com with their test keys, and one real delivery each, so each
/// source's key is cached
/// WHEN 1,000 forged requests per source name keys of the provider's shape, each a distinct certificate URL or key
/// id (plus 100 each of no key's shape), and real deliveries keep coming meanwhile
/// THEN each source makes at most FETCHES_PER_MINUTE fetches in the minute, its first real delivery's included;
/// every shaped forgery is a 503 key_unavailable with Retry-After and every other a 401; the real deliveries are
/// accepted during the flood; a real delivery naming a PayPal certificate never fetched before is answered 503
/// (never 401) until the budget allows a fetch, then accepted; forgeries refused for their key raise the all-401
/// alarm on a source that sees nothing else, while 503s alone raise nothing; and the log holds a few lines a minute
/// about all of it, not one a request.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_invented_keys_makes_at_most_the_budget_of_fetches() {
    let routes = HashMap::from([
        (PAYPAL_CERT.to_owned(), read("signer.pem").into_bytes()),
        (PAYPAL_LATER.to_owned(), read("signer.pem").into_bytes()),
        (SNS_CERT.to_owned(), read("sns-signer.pem").into_bytes()),
        (
            PLAID_KEY.to_owned(),
            json!({"key": p256_jwk(PLAID_KID), "request_id": "r1"})
                .to_string()
                .into_bytes(),
        ),
    ]);
    let host =
        testkit::https::HttpsServer::start(read("host.pem").as_bytes(), read("host.key").as_bytes(), routes)
            .await;
    let notify = Sink::start(&[], 200).await;
    let roots = keys().join("root.pem");
    let connect_to = format!(
        "api.paypal.com={0},sns.us-east-1.amazonaws.com={0},production.plaid.com={0}",
        host.addr()
    );
    let app = spawn_app(
        &config(&notify.url()),
        &[
            ("PAYPAL_WEBHOOK_ID", WEBHOOK_ID),
            ("SNS_TOPIC", TOPIC),
            ("PLAID_API", PLAID_API),
            ("PLAID_QUIET_API", PLAID_QUIET_API),
            ("INBOX_TRUST_ROOTS", roots.to_str().expect("a UTF-8 path")),
            ("INBOX_CONNECT_TO", &connect_to),
        ],
    );
    let client = client();
    let sns_cert = format!("https://sns.us-east-1.amazonaws.com{SNS_CERT}");
    let real = |n: usize| {
        let (paypal_body, paypal_headers) = paypal(&format!("WH-REAL-{n}"), PAYPAL_CERT);
        let sns_body = sns_message(
            "Notification",
            TOPIC,
            &format!("real-{n}"),
            &sns_cert,
            "signer.key",
            &[],
        );
        let (plaid_body, plaid_headers) = plaid(&format!("real-{n}"), PLAID_KID);
        [
            ("paypal", paypal_body, paypal_headers),
            ("sns", sns_body, sns_headers()),
            ("plaid", plaid_body, plaid_headers),
        ]
    };

    // Each source's key, fetched and cached by a real delivery.
    for (source, body, headers) in real(0) {
        let answer = post(&client, &app.webhook_url(source), body, &headers).await;
        assert_eq!(answer.json["status"], "accepted", "{source}: {}", answer.text);
    }
    assert_eq!(
        fetches(&host),
        BTreeMap::from([("paypal", 1), ("plaid", 1), ("sns", 1)])
    );

    // The flood, 32 requests in flight at a time.
    let started = Instant::now();
    let mut requests = Vec::new();
    for (count, shaped) in [(FLOOD, true), (OFF_SHAPE, false)] {
        for n in 0..count {
            for provider in ["paypal", "sns", "plaid"] {
                requests.push((forged(provider, n, shaped), shaped));
            }
        }
    }
    let total = requests.len();
    let gate = Arc::new(tokio::sync::Semaphore::new(32));
    let mut flood = tokio::task::JoinSet::new();
    for ((source, body, headers), shaped) in requests {
        let (client, url, gate) = (client.clone(), app.webhook_url(&source), gate.clone());
        flood.spawn(async move {
            let _turn = gate.acquire().await.expect("the gate");
            let answer = post(&client, &url, body, &headers).await;
            (source, shaped, answer)
        });
    }
    // Real deliveries in the middle of it, their keys cached.
    let mut during = Vec::new();
    for n in 1..=3 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        for (source, body, headers) in real(n) {
            let answer = post(&client, &app.webhook_url(source), body, &headers).await;
            during.push(format!("{source} {} {}", answer.status, answer.json["status"]));
            assert_eq!(
                answer.json["status"], "accepted",
                "{source} during the flood: {}",
                answer.text
            );
        }
    }
    let mut answers: BTreeMap<(String, bool, u16, String), usize> = BTreeMap::new();
    let mut still_running = 0;
    while let Some(done) = flood.join_next().await {
        let (source, shaped, answer) = done.expect("a forged request");
        if shaped {
            answer.assert_error(503, &source);
            assert!(
                answer.text.contains("key_unavailable"),
                "{source}: {}",
                answer.text
            );
        } else {
            answer.assert_error(401, &source);
        }
        let code = answer.json["code"].as_str().unwrap_or("").to_owned();
        *answers.entry((source, shaped, answer.status, code)).or_default() += 1;
        still_running += 1;
    }
    let took = started.elapsed();
    assert_eq!(still_running, total);
    let fetched = fetches(&host);
    eprintln!(
        "flood: {total} forged requests ({FLOOD} of a key's shape and {OFF_SHAPE} of none per source) in {took:?}; \
         fetches at the key host, first real delivery included: {fetched:?}; answers: {answers:?}; real deliveries \
         during it: {during:?}"
    );
    for source in ["paypal", "sns", "plaid"] {
        let n = fetched.get(source).copied().unwrap_or(0);
        assert!(
            n <= FETCHES_PER_MINUTE,
            "{source}: {n} fetches in a minute, over the budget of {FETCHES_PER_MINUTE}"
        );
    }

    // A real delivery naming a certificate never fetched: it waits for the budget (503, never 401).
    let (body, headers) = paypal("WH-REAL-LATER", PAYPAL_LATER);
    let waited = Instant::now();
    let mut refused_for_now = Vec::new();
    let accepted = loop {
        let (answer, retry_after) =
            post_for_retry_after(&client, &app.webhook_url("paypal"), &body, &headers).await;
        if answer.status == 200 {
            break answer;
        }
        answer.assert_error(503, "a real delivery whose certificate was never fetched");
        assert!(answer.text.contains("key_unavailable"), "{}", answer.text);
        let retry_after = retry_after.expect("a 503 for a spent budget says when to retry");
        assert!((1..=60).contains(&retry_after), "Retry-After: {retry_after}");
        refused_for_now.push(retry_after);
        assert!(
            waited.elapsed() < Duration::from_secs(90),
            "still 503 after {:?}",
            waited.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    assert_eq!(accepted.json["status"], "accepted", "{}", accepted.text);
    assert!(
        !refused_for_now.is_empty(),
        "the budget was not spent: the certificate was fetched at once"
    );
    assert!(host.hits().contains(&PAYPAL_LATER.to_owned()));
    eprintln!(
        "a real delivery naming a certificate never fetched: {} x 503 key_unavailable (Retry-After {refused_for_now:?}), \
         then 200 after {:?}",
        refused_for_now.len(),
        waited.elapsed()
    );

    // Forgeries refused for their key are refused signatures: a source that sees only those raises the all-401
    // alarm; one that sees only 503s (invented keys of Plaid's shape, past its budget) raises nothing.
    for n in 0..8 {
        let (source, body, headers) = forged("paypal-quiet", n, false);
        post(&client, &app.webhook_url(&source), body, &headers)
            .await
            .assert_error(401, "a certificate URL of no certificate's shape");
    }
    for n in 0..40 {
        let (source, body, headers) = forged("plaid-quiet", 5000 + n, true);
        post(&client, &app.webhook_url(&source), body, &headers)
            .await
            .assert_error(503, "an invented key id of Plaid's shape");
    }
    wait_until(
        Duration::from_secs(5),
        "the all-401 alarm of paypal-quiet",
        || {
            notify
                .requests()
                .iter()
                .any(|r| r.json()["source"] == "paypal-quiet")
        },
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let alarms: Vec<Value> = notify.requests().iter().map(Recorded::json).collect();
    let quiet: Vec<&Value> = alarms.iter().filter(|a| a["source"] == "paypal-quiet").collect();
    assert_eq!(quiet.len(), 1, "{alarms:?}");
    assert_eq!(quiet[0]["alarm"], "signatures_refused");
    assert!(
        alarms.iter().all(|a| a["source"] == "paypal-quiet"),
        "an alarm for a source whose deliveries were accepted or only waited: {alarms:?}"
    );
    let metrics = get(&client, &format!("{}/metrics", app.url())).await.text;
    for line in [
        format!("inbox_rejected_total{{source=\"paypal\",reason=\"signature\"}} {OFF_SHAPE}"),
        format!("inbox_rejected_total{{source=\"sns\",reason=\"signature\"}} {OFF_SHAPE}"),
        format!("inbox_rejected_total{{source=\"plaid\",reason=\"signature\"}} {OFF_SHAPE}"),
        "inbox_rejected_total{source=\"paypal-quiet\",reason=\"signature\"} 8".to_owned(),
    ] {
        assert!(metrics.contains(&line), "{line} not in /metrics");
    }

    // The log: a few lines a minute about the flood, not a line (let alone a warning) a request.
    let log = app.log();
    let warnings = log.lines().filter(|l| l.contains(" WARN ")).count();
    let lines = log.lines().count();
    eprintln!("log: {lines} lines, {warnings} warnings, for {total} forged requests");
    // A line a minute per source and reason (key_budget, key_unavailable), over the two or three minutes the
    // test may span: a few dozen at most, where each forged request used to write one.
    assert!(warnings <= 30, "{warnings} warnings:\n{log}");
    assert!(lines < 200, "{lines} lines:\n{log}");
}

/// [`post`], and the answer's `Retry-After` in seconds.
async fn post_for_retry_after(
    client: &reqwest::Client,
    url: &str,
    body: &str,
    headers: &[(HeaderName, HeaderValue)],
) -> (Answer, Option<u64>) {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        req = req.header(name.clone(), value.clone());
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let text = resp.text().await.unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    (Answer { status, json, text }, retry_after)
}

/// The audience Google's tokens name: the push endpoint, as the source's `url` says it.
const PUBSUB_URL: &str = "https://hooks.example.com/webhooks/pubsub";
const PUBSUB_ACCOUNT: &str = "pusher@project.iam.gserviceaccount.com";
/// The `kid` Google's set lists the test RSA key under: 40 hex digits, as Google's are.
const GOOGLE_KID: &str = "0ad1fec78504f447bae65bcf5afaedb65eec9e81";

/// The test RSA key (signer.key) as a JWK under `kid`, as Google's set lists its keys.
fn rsa_jwk(kid: &str) -> Value {
    use aws_lc_rs::signature::KeyPair as _;
    use base64::Engine as _;
    /// One DER element's contents, and what follows it.
    fn element(input: &[u8]) -> (&[u8], &[u8]) {
        let first = usize::from(input[1]);
        let (len, head) = if first < 0x80 {
            (first, 2)
        } else {
            let n = first & 0x7f;
            let len = input[2..2 + n]
                .iter()
                .fold(0, |len, b| (len << 8) | usize::from(*b));
            (len, 2 + n)
        };
        (&input[head..head + len], &input[head + len..])
    }
    let pair = aws_lc_rs::signature::RsaKeyPair::from_pkcs8(&der("signer.key")).expect("an RSA key");
    // RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER } (RFC 8017).
    let (sequence, _) = element(pair.public_key().as_ref());
    let (modulus, rest) = element(sequence);
    let (exponent, _) = element(rest);
    let unsigned = |b: &[u8]| b.strip_prefix(&[0]).unwrap_or(b).to_vec();
    let b64 = |b: Vec<u8>| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    json!({"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
        "n": b64(unsigned(modulus)), "e": b64(unsigned(exponent))})
}

/// A Pub/Sub push's `Authorization` as Google makes one: an RS256 ID token naming `kid`, for the source's audience
/// and service account, signed with the test RSA key; or, `forged`, the same claims under a signature of nothing.
fn google_token(kid: &str, forged: bool) -> (HeaderName, HeaderValue) {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let now = now_unix();
    let head = json!({"alg": "RS256", "kid": kid, "typ": "JWT"});
    let claims = json!({"iss": "https://accounts.google.com", "aud": PUBSUB_URL, "iat": now, "exp": now + 3600,
        "email": PUBSUB_ACCOUNT, "email_verified": true, "sub": "112233445566778899000"});
    let signing = format!(
        "{}.{}",
        b64(head.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = if forged {
        b"forged".to_vec()
    } else {
        let pair = aws_lc_rs::signature::RsaKeyPair::from_pkcs8(&der("signer.key")).expect("an RSA key");
        let mut signature = vec![0; pair.public_modulus_len()];
        pair.sign(
            &aws_lc_rs::signature::RSA_PKCS1_SHA256,
            &aws_lc_rs::rand::SystemRandom::new(),
            signing.as_bytes(),
            &mut signature,
        )
        .expect("signed");
        signature
    };
    header("authorization", &format!("Bearer {signing}.{}", b64(&signature)))
}

fn pubsub_push(id: &str) -> String {
    json!({"message": {"messageId": id, "data": "e30=", "publishTime": "2026-01-01T00:00:00Z"},
        "subscription": "projects/p/subscriptions/s"})
    .to_string()
}

/// GIVEN a Google Pub/Sub source in a process that has fetched no key yet, and a local HTTPS host answering as
/// www.googleapis.com with Google's key set (the test RSA key under one `kid`)
/// WHEN 1,000 forged pushes arrive, each naming an invented `kid` of Google's shape and the source's own audience
/// and service account (the worst case: neither is a secret), while real pushes signed by the key in the set come
/// in the middle of it and after it
/// THEN every real push is accepted: the set is fetched whole on the source's reserved share and each `kid` picked
/// in it, so invented `kid`s are no fetches (the host sees one per KID_REFETCH_AFTER at most) and cannot keep the
/// real key from being had; every forged push is a 503 key_unavailable (no such key in the set).
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_invented_kids_does_not_keep_a_real_push_waiting() {
    const CERTS: &str = "/oauth2/v3/certs";
    let set = json!({"keys": [rsa_jwk(GOOGLE_KID)]}).to_string().into_bytes();
    let routes = HashMap::from([(CERTS.to_owned(), set)]);
    let host =
        testkit::https::HttpsServer::start(read("host.pem").as_bytes(), read("host.key").as_bytes(), routes)
            .await;
    let roots = keys().join("root.pem");
    let connect_to = format!("www.googleapis.com={}", host.addr());
    let config = format!(
        "[sources.pubsub]\nscheme = \"google-pubsub\"\nurl = \"{PUBSUB_URL}\"\nsecrets = [\"env:PUBSUB_ACCOUNT\"]\n\
         {HANDLER}\n"
    );
    let app = spawn_app(
        &config,
        &[
            ("PUBSUB_ACCOUNT", PUBSUB_ACCOUNT),
            ("INBOX_TRUST_ROOTS", roots.to_str().expect("a UTF-8 path")),
            ("INBOX_CONNECT_TO", &connect_to),
        ],
    );
    let (client, url) = (client(), app.webhook_url("pubsub"));

    let started = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(32));
    let mut flood = tokio::task::JoinSet::new();
    for n in 0..FLOOD {
        let (client, url, gate) = (client.clone(), url.clone(), gate.clone());
        flood.spawn(async move {
            let _turn = gate.acquire().await.expect("the gate");
            let kid = format!("{n:040x}");
            post(
                &client,
                &url,
                pubsub_push(&format!("forged-{n}")),
                &[google_token(&kid, true)],
            )
            .await
        });
    }
    let mut real = Vec::new();
    for n in 0..3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = post(
            &client,
            &url,
            pubsub_push(&format!("real-{n}")),
            &[google_token(GOOGLE_KID, false)],
        )
        .await;
        real.push((answer.status, answer.text));
    }
    let mut refused = 0;
    while let Some(done) = flood.join_next().await {
        let answer = done.expect("a forged push");
        answer.assert_error(503, "a forged push naming an invented kid");
        assert!(answer.text.contains("key_unavailable"), "{}", answer.text);
        refused += 1;
    }
    assert_eq!(refused, FLOOD);
    let answer = post(
        &client,
        &url,
        pubsub_push("real-after"),
        &[google_token(GOOGLE_KID, false)],
    )
    .await;
    real.push((answer.status, answer.text));
    let took = started.elapsed();
    let fetched = host.hits().iter().filter(|path| *path == CERTS).count();
    eprintln!(
        "{refused} forged pushes naming invented kids, each a 503, in {took:?}; fetches of Google's set: {fetched}; \
         real pushes: {real:?}"
    );
    for (status, text) in &real {
        assert_eq!(*status, 200, "a real push: {text}");
        assert!(text.contains("accepted"), "a real push: {text}");
    }
    let most = 1 + took.as_secs() / inbox_core::keys::KID_REFETCH_AFTER.as_secs();
    assert!(
        (1..=most as usize).contains(&fetched),
        "{fetched} fetches of the set in {took:?}"
    );
}
