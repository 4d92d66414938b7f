//! AWS SNS over HTTPS: the body is the message (JSON, sent as text/plain); `Signature` (base64) is RSA over
//! `Key\nvalue\n` for each present key in byte order (a Notification: Message, MessageId, Subject, Timestamp,
//! TopicArn, Type; a (Un)SubscriptionConfirmation: Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn,
//! Type), SHA1withRSA for `SignatureVersion` 1 and SHA256withRSA for 2, checked with the certificate at
//! `SigningCertURL`, fetched only from `sns.<region>.amazonaws.com(.cn)`. Any AWS account can subscribe an
//! endpoint to its own topic, so the source's `secrets` list the topic ARNs it accepts; others are refused.
//! `Timestamp` is the publish time, kept by retries: not checked (MessageId makes a replay a duplicate). Id
//! `MessageId`, type `Type`. A SubscriptionConfirmation is answered 200 once its `SubscribeURL` (an SNS host) is
//! fetched; an UnsubscribeConfirmation 200. Raw message delivery must stay off: it carries no signature.
//! <https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html>
//! <https://docs.aws.amazon.com/sns/latest/dg/SendMessageToHttp.prepare.html>

use http::HeaderName;
use serde_json::{Map, Value};

use crate::families::asymmetric::RsaMessage;
use crate::families::{Asymmetric, At, Family, Format, Rsa, RsaAlgorithm, RsaKey, Signature, Template};
use crate::providers::{Identify, Preset};
use crate::request::{provider_https_url, Answer, Credentials, Request};
use crate::{Clock, Encoding, VerifyError};

/// The hosts of SNS's certificates and subscription URLs: one region label, nothing deeper.
const HOSTS: &[&str] = &["sns.*.amazonaws.com", "sns.*.amazonaws.com.cn"];

pub(super) fn preset() -> Preset {
    let family = Family::Rsa(Rsa {
        spec: Asymmetric {
            signature: Signature {
                at: At::Json("/Signature".to_owned()),
                format: Format::Plain,
                prefix: String::new(),
                encoding: Encoding::Base64,
            },
            signed: Template::body(), // the string to sign is built by `message`
            timestamp: None,
        },
        algorithm: RsaAlgorithm::Pkcs1Sha256,
        key: RsaKey::Certificate {
            at: At::Json("/SigningCertURL".to_owned()),
            hosts: HOSTS.to_vec(),
        },
        message: Some(message),
        message_signer: None,
    });
    Preset {
        kept: vec![
            HeaderName::from_static("x-amz-sns-message-type"),
            HeaderName::from_static("x-amz-sns-message-id"),
            HeaderName::from_static("x-amz-sns-topic-arn"),
        ],
        before: Some(topic),
        after: Some(subscription),
        ..Preset::new(
            "aws-sns",
            family,
            Identify::at("json:/MessageId", Some("json:/Type")),
        )
    }
}

fn fields(body: &[u8]) -> Option<Map<String, Value>> {
    serde_json::from_slice(body).ok()
}

fn text<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

/// Refuses a message from a topic the source does not list, before anything is fetched. Not a handshake: a
/// listed topic goes on to be verified (`None`), and so does a body that is not a message (verification refuses
/// it).
fn topic(req: &Request, creds: &Credentials) -> Option<Result<Answer, VerifyError>> {
    let m = fields(req.body)?;
    let listed = text(&m, "TopicArn")
        .is_some_and(|arn| creds.secrets.iter().any(|s| s.expose() == arn.as_bytes()));
    (!listed).then_some(Err(VerifyError::Mismatch))
}

fn message(req: &Request, _creds: &Credentials, _clock: Clock) -> Result<RsaMessage, VerifyError> {
    let bad = |why: &str| VerifyError::MalformedHeader(format!("SNS message ({why})"));
    let m = fields(req.body).ok_or_else(|| bad("not a JSON object"))?;
    let keys: &[&str] = match text(&m, "Type") {
        Some("Notification") => &["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"],
        Some("SubscriptionConfirmation" | "UnsubscribeConfirmation") => &[
            "Message",
            "MessageId",
            "SubscribeURL",
            "Timestamp",
            "Token",
            "TopicArn",
            "Type",
        ],
        _ => return Err(bad("unknown Type")),
    };
    let mut signed = Vec::with_capacity(req.body.len());
    for key in keys {
        if let Some(value) = text(&m, key) {
            for part in [*key, "\n", value, "\n"] {
                signed.extend_from_slice(part.as_bytes());
            }
        }
    }
    let algorithm = match text(&m, "SignatureVersion") {
        Some("1") => RsaAlgorithm::Pkcs1Sha1,
        Some("2") => RsaAlgorithm::Pkcs1Sha256,
        _ => return Err(bad("unsupported SignatureVersion")),
    };
    let signature = text(&m, "Signature").ok_or_else(|| bad("no Signature"))?;
    Ok(RsaMessage {
        messages: vec![signed],
        signatures: crate::decode(Encoding::Base64, signature).into_iter().collect(),
        algorithm,
    })
}

/// A verified SubscriptionConfirmation is confirmed by fetching its `SubscribeURL` (refused, 400, unless it is
/// on an SNS host); an UnsubscribeConfirmation is acknowledged. Neither is stored.
fn subscription(req: &Request, _creds: &Credentials) -> Option<Answer> {
    let m = fields(req.body)?;
    match text(&m, "Type")? {
        "SubscriptionConfirmation" => Some(
            match text(&m, "SubscribeURL").and_then(|url| provider_https_url(url, HOSTS)) {
                Some(url) => Answer {
                    confirm: Some(url),
                    ..Answer::empty(200)
                },
                None => Answer::empty(400),
            },
        ),
        "UnsubscribeConfirmation" => Some(Answer::empty(200)),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_sns_hosts_serve_certificates_and_subscriptions() {
        for (url, ok) in [
            ("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem", true),
            ("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-abc.pem", true),
            ("https://SNS.eu-west-3.AMAZONAWS.com/x.pem", true),
            ("http://sns.us-east-1.amazonaws.com/x.pem", false),
            ("https://sns.us-east-1.amazonaws.com.certs.example.net/x.pem", false),
            ("https://attacker.s3.amazonaws.com/x.pem", false),
            ("https://sns.evil.us-east-1.amazonaws.com/x.pem", false),
            ("https://user@sns.us-east-1.amazonaws.com/x.pem", false),
            ("https://sns.us-east-1.amazonaws.com:444/x.pem", false),
        ] {
            assert_eq!(provider_https_url(url, HOSTS).is_some(), ok, "{url}");
        }
    }

    fn vector() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/aws-sns.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn run(case: &Value, topics: &[&str]) -> (Option<Result<Answer, VerifyError>>, Result<(), VerifyError>) {
        let scheme = crate::Scheme::named("aws-sns").unwrap();
        let creds = Credentials::secrets(topics.iter().map(|t| crate::Key::new(t.as_bytes().to_vec())).collect());
        let uri = http::Uri::from_static("/webhooks/sns");
        let body = case["body"].as_str().unwrap().as_bytes();
        let headers = http::HeaderMap::new();
        let req = Request::post(&uri, &headers, body);
        let before = scheme.unsigned_handshake(&creds, &req);
        (before, scheme.key_request(&creds, &req).map(|_| ()))
    }

    #[test]
    fn foreign_hosts_and_topics_are_refused_before_any_fetch() {
        let v = vector();
        let topic = v["config"]["secrets"][0].as_str().unwrap();
        for case in v["refused"].as_array().unwrap() {
            let (before, key) = run(case, &[topic]);
            match case["expect"]["reason"].as_str().unwrap() {
                "certificate URL host not allowed" => {
                    assert!(before.is_none());
                    assert!(matches!(key, Err(VerifyError::UntrustedKey(_))));
                }
                "topic not configured" => assert!(matches!(before, Some(Err(VerifyError::Mismatch)))),
                // The chain to a trusted root is the fetcher's check, outside this crate.
                _ => assert!(before.is_none() && key.is_ok()),
            }
        }
    }

    #[test]
    fn a_subscription_is_confirmed_at_its_sns_url() {
        let v = vector();
        let case = v["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["expect"]["kind"] == "handshake")
            .unwrap();
        let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
        let req = Request::post(&uri, &headers, case["body"].as_str().unwrap().as_bytes());
        let answer = subscription(&req, &Credentials::default()).unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.confirm.as_deref(), case["expect"]["confirm_url"].as_str());
        let forged = case["body"]
            .as_str()
            .unwrap()
            .replace("https://sns.us-east-1.amazonaws.com/?Action", "https://example.net/?Action");
        let req = Request::post(&uri, &headers, forged.as_bytes());
        assert_eq!(subscription(&req, &Credentials::default()).unwrap().status, 400);
    }
}
