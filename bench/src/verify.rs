//! The `verify` part: what each signature family costs per request, beside today's `github` scheme, for a
//! 2 KiB body: one provider of each family signed as that provider signs, then verified and its events found
//! the way the receiver does (`verify_request`, then `identify_request`), in a loop, median of the rounds.

use std::time::Instant;

use anyhow::{Context, Result};
use inbox_core::schemes::{Credentials, Identified, Identity, Key, PublicKey, Request, Scheme, Signer};

use crate::{median, row, Opts, Row};

/// The body's size: a typical webhook.
const BODY_BYTES: usize = 2048;

/// `(family, provider, private key file under tests/data/keys, public key file, body)`: one of each family. The
/// body is the scheme's own sample unless given (a provider whose events are found its own way).
type Case = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
);
const CASES: &[Case] = &[
    ("github (today's)", "github", None, None, None),
    ("hmac", "paddle", None, None, None),
    ("hmac, Standard Webhooks", "openai", None, None, None),
    ("token", "chargebee", None, None, None),
    (
        "ed25519",
        "discord",
        Some("ed25519.key"),
        Some("ed25519.pub"),
        Some(r#"{"id":"1234567890","type":2,"data":{"name":"bench"}}"#),
    ),
    (
        "ecdsa P-256",
        "sendgrid",
        Some("p256.key"),
        Some("p256.pub"),
        None,
    ),
    (
        "rsa (configured key)",
        "wise",
        Some("signer.key"),
        Some("signer.pub"),
        None,
    ),
    ("jwt HS256", "vonage", None, None, None),
    (
        "custom (a signature per item)",
        "adyen",
        None,
        None,
        Some(
            r#"{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{},"amount":{"currency":"EUR","value":1130},"eventCode":"AUTHORISATION","merchantAccountCode":"Bench","merchantReference":"order-1","pspReference":"QFQTPCQ8HXSKGK82","success":"true"}}]}"#,
        ),
    ),
];

/// A body of `BODY_BYTES` with `identity` where the scheme looks for it: the scheme's sample, padded inside its
/// JSON (the first item of a batch).
fn body(scheme: &Scheme, identity: &Identity, given: Option<&str>) -> Vec<u8> {
    let sample = match given {
        Some(text) => text.as_bytes().to_vec(),
        None => scheme.sample(std::slice::from_ref(identity)).body,
    };
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&sample) else {
        return sample;
    };
    let pad = |v: &mut serde_json::Value, n: usize| {
        if let Some(map) = v.as_object_mut() {
            map.insert("padding".into(), "x".repeat(n).into());
        }
    };
    let size = serde_json::to_vec(&value).map_or(0, |b| b.len());
    let n = BODY_BYTES.saturating_sub(size + 14);
    match value.as_array_mut().and_then(|a| a.first_mut()) {
        Some(first) => pad(first, n),
        None => pad(&mut value, n),
    }
    serde_json::to_vec(&value).unwrap_or(sample)
}

fn read_key(opts: &Opts, name: &str) -> Result<Vec<u8>> {
    let text = std::fs::read_to_string(opts.root.join("tests/data/keys").join(name))
        .with_context(|| format!("tests/data/keys/{name}"))?;
    Ok(text.into_bytes())
}

pub fn run(opts: &Opts, rows: &mut Vec<Row>) -> Result<()> {
    println!("\n## verify: ns per request for a {BODY_BYTES}-byte body (verify, then find the events)");
    let iterations: usize = if opts.quick { 2_000 } else { 20_000 };
    let mut baseline = f64::NAN;
    for (family, provider, private, public, given) in CASES {
        let scheme = Scheme::named(provider).with_context(|| format!("no scheme {provider}"))?;
        let secret = match *provider {
            "adyen" => "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056".to_owned(),
            "chargebee" => "inbox:bench-password".to_owned(),
            "openai" => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned(),
            _ => "bench-secret".to_owned(),
        };
        let public_key: Option<PublicKey> = match public {
            Some(file) => Some(
                scheme
                    .public_key(&String::from_utf8(read_key(opts, file)?)?)
                    .map_err(|e| anyhow::anyhow!("{provider}: {e}"))?,
            ),
            None => None,
        };
        let creds = Credentials {
            secrets: vec![scheme
                .key_from_secret(&secret)
                .map_err(|e| anyhow::anyhow!("{provider}: {e}"))?],
            public_key,
            url: Some("https://hooks.example.com/webhooks/bench".to_owned()),
            verify_token: None,
        };
        let signer = match private {
            Some(file) => {
                let block = pem::parse(read_key(opts, file)?).context("a PEM key")?;
                Signer::Private {
                    pkcs8: Key::new(block.contents().to_vec()),
                    key_url: None,
                }
            }
            None => Signer::Secret(creds.secrets[0].clone()),
        };
        let identity = Identity {
            event_id: "evt_bench_0001".to_owned(),
            event_type: Some("bench.done".to_owned()),
        };
        let body = body(&scheme, &identity, *given);
        let uri: http::Uri = "/webhooks/bench".parse()?;
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        let now = inbox_core::time::now_ms() / 1000;
        let unsigned = Request::post(&uri, &headers, &body);
        let signed = scheme
            .sign_request(&signer, &creds, &unsigned, &identity, now)
            .with_context(|| format!("{provider} cannot sign"))?;
        let body = signed.body.unwrap_or(body);
        for (name, value) in signed.headers {
            headers.insert(name, value.parse()?);
        }
        let req = Request::post(&uri, &headers, &body);
        let check = |req: &Request| -> Result<()> {
            scheme
                .verify_request(&creds, req, now, 300, None)
                .map_err(|e| anyhow::anyhow!("{provider}: {e}"))?;
            match scheme
                .identify_request(req)
                .map_err(|e| anyhow::anyhow!("{provider}: {e}"))?
            {
                Identified::One(_) | Identified::Batch(_) => Ok(()),
            }
        };
        check(&req)?;
        let mut rounds = Vec::new();
        for _ in 0..opts.rounds {
            let started = Instant::now();
            for _ in 0..iterations {
                check(std::hint::black_box(&req))?;
            }
            rounds.push(started.elapsed().as_nanos() as f64 / iterations as f64);
        }
        let ns = median(rounds);
        if *provider == "github" {
            baseline = ns;
        }
        row(
            rows,
            &format!("verify {family} ({provider})"),
            format!("{ns:.0} ns ({:.2}x github)", ns / baseline),
            "",
        );
    }
    Ok(())
}
