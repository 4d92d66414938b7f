//! AWS SNS over HTTPS: the body is the message (JSON, sent as text/plain); `Signature` (base64) is RSA over
//! `Key\nvalue\n` for each present key in byte order (a Notification: Message, MessageId, Subject, Timestamp,
//! TopicArn, Type; a (Un)SubscriptionConfirmation: Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn,
//! Type), SHA1withRSA for `SignatureVersion` 1 and SHA256withRSA for 2, checked with the certificate at
//! `SigningCertURL`, fetched only from `sns.<region>.amazonaws.com(.cn)/SimpleNotificationService-<hex>.pem` and
//! used only if issued to SNS's name (`sns.amazonaws.com`). Any AWS account can subscribe an
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
use crate::request::{Answer, Credentials, HttpsUrl, KeyRequest, Request};
use crate::clock::Clock;
use crate::encoding::Encoding;
use crate::errors::VerifyError;

/// Whether `host` is SNS's own endpoint in a region: `sns.<region>.amazonaws.com`, or `sns.<region>.amazonaws.com.cn`
/// for the China regions, `<region>` being a real region's shape ([`region`]). Not `sns.*.amazonaws.com`: that
/// admits `sns.s3.amazonaws.com` and `sns.s3-us-west-2.amazonaws.com`, the endpoints of an S3 bucket named `sns`,
/// which anyone may own and fill with a certificate of their own. (AWS's own validators have that hole: the
/// pattern of aws-sdk-java-v2's `CertificateRetriever` and npm `sns-validator`'s both admit the bucket hosts.)
fn sns_host(host: &str) -> bool {
    let Some(rest) = host.strip_prefix("sns.") else {
        return false;
    };
    match (rest.strip_suffix(".amazonaws.com"), rest.strip_suffix(".amazonaws.com.cn")) {
        (Some(region_name), _) => region(region_name) && !region_name.starts_with("cn-"),
        (_, Some(region_name)) => region(region_name) && region_name.starts_with("cn-"),
        _ => false,
    }
}

/// The directions AWS names its regions by.
const DIRECTIONS: &[&str] = &[
    "north",
    "south",
    "east",
    "west",
    "central",
    "northeast",
    "northwest",
    "southeast",
    "southwest",
];

/// Whether `name` has a region's shape: a two-letter area, `-gov` in GovCloud, a direction and a number
/// (`us-east-1`, `us-gov-west-1`, `ap-southeast-4`, `cn-north-1`, `il-central-1`). Never `s3` or `s3-us-west-2`.
fn region(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    let (area, direction, number) = match parts.as_slice() {
        [area, "gov", direction, number] | [area, direction, number] => (*area, *direction, *number),
        _ => return false,
    };
    area.len() == 2
        && area.bytes().all(|b| b.is_ascii_lowercase())
        && DIRECTIONS.contains(&direction)
        && (1..=2).contains(&number.len())
        && number.bytes().all(|b| b.is_ascii_digit())
        && !number.starts_with('0')
}

/// The certificate a message's `SigningCertURL` names, if it is SNS's certificate path on an SNS host:
/// `/SimpleNotificationService-<hex>.pem` (32 hex digits in every message seen, e.g. aws-sdk-ruby's
/// `gems/aws-sdk-sns/spec/message_verifier_spec.rb`), with no query. Any other URL is not SNS's certificate.
fn certificate(url: &str) -> Option<KeyRequest> {
    let url = HttpsUrl::parse(url)?;
    let id = url
        .path
        .strip_prefix("/SimpleNotificationService-")
        .and_then(|rest| rest.strip_suffix(".pem"))?;
    let id_shape = (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !(sns_host(&url.host) && id_shape && url.query.is_none()) {
        return None;
    }
    let mut names = vec![NAME.to_owned(), url.host.clone()];
    if url.host.ends_with(".cn") {
        names.push(NAME_CN.to_owned());
    }
    Some(KeyRequest::Certificate {
        url: url.canonical(),
        names,
    })
}

/// The name SNS's signing certificates are issued to: `sns.amazonaws.com`, the subject (CN and the only
/// subjectAltName DNS name) of the live signing certificate embedded in aws-sdk-ruby's
/// `gems/aws-sdk-sns/spec/message_verifier_spec.rb` (served at
/// `https://sns.us-east-2.amazonaws.com/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem`, issued by
/// Amazon's Server CA 1B), and what awsdocs/amazon-sns-developer-guide issue #7 found on the certificates of other
/// regions. Also admitted: the regional endpoint's own name (the developer guide once gave it as the certificate's
/// name) and, in China, `sns.amazonaws.com.cn`, because GovCloud's and China's certificates could not be seen. Every
/// one of these names is AWS's alone: nobody else can be issued a certificate for them, which is what the check is
/// for (a bucket owner's certificate names a domain of the owner's).
const NAME: &str = "sns.amazonaws.com";
const NAME_CN: &str = "sns.amazonaws.com.cn";

/// A SubscriptionConfirmation's `SubscribeURL`, if it is SNS's confirmation on an SNS host: `/?Action=
/// ConfirmSubscription&TopicArn=…&Token=…`. Its query is the confirmation itself, and is kept as sent.
fn subscribe_url(url: &str) -> Option<String> {
    let url = HttpsUrl::parse(url)?;
    let confirms = url.path == "/"
        && crate::request::pairs(url.query.as_deref().unwrap_or(""))
            .any(|(name, value)| name == "Action" && value == "ConfirmSubscription");
    (sns_host(&url.host) && confirms).then(|| url.canonical())
}

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
            admit: certificate,
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
        signatures: crate::encoding::decode(Encoding::Base64, signature).into_iter().collect(),
        algorithm,
    })
}

/// A verified SubscriptionConfirmation is confirmed by fetching its `SubscribeURL` (refused, 400, unless it is
/// on an SNS host); an UnsubscribeConfirmation is acknowledged. Neither is stored.
fn subscription(req: &Request, _creds: &Credentials) -> Option<Answer> {
    let m = fields(req.body)?;
    match text(&m, "Type")? {
        "SubscriptionConfirmation" => Some(
            match text(&m, "SubscribeURL").and_then(subscribe_url) {
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
        let pem = "/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem";
        let confirm = "/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-east-1:123456789012:t&Token=2336412f";
        for (host, ok) in [
            ("https://sns.us-east-1.amazonaws.com", true),
            ("https://sns.cn-north-1.amazonaws.com.cn", true),
            ("https://SNS.eu-west-3.AMAZONAWS.com", true),
            ("http://sns.us-east-1.amazonaws.com", false),
            ("https://sns.us-east-1.amazonaws.com.certs.example.net", false),
            ("https://attacker.s3.amazonaws.com", false),
            ("https://sns.evil.us-east-1.amazonaws.com", false),
            ("https://user@sns.us-east-1.amazonaws.com", false),
            ("https://sns.us-east-1.amazonaws.com:444", false),
        ] {
            assert_eq!(certificate(&format!("{host}{pem}")).is_some(), ok, "{host}");
            assert_eq!(subscribe_url(&format!("{host}{confirm}")).is_some(), ok, "{host}");
        }
    }

    /// On SNS's own host, only its certificate path is a certificate (no query: a request may not choose what
    /// is fetched), and only its confirmation a subscription (the query kept as sent).
    #[test]
    fn only_snss_certificate_path_is_fetched_and_subscriptions_keep_their_query() {
        let host = "https://sns.us-east-1.amazonaws.com";
        for (path, ok) in [
            ("/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem", true),
            ("/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem", true),
            ("/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem?n=1", false),
            ("/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem#k", false),
            ("/SimpleNotificationService-7FF5318490EC183FBADDAA2A969ABFDA.pem", false),
            ("/SimpleNotificationService-.pem", false),
            ("/SimpleNotificationService-test.pem", false),
            ("/SimpleNotificationService-7ff53184.key", false),
            ("/x/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem", false),
            ("/?Action=ConfirmSubscription&Token=t", false),
            ("/untrusted.pem", false),
            ("/", false),
        ] {
            let url = format!("{host}{path}");
            assert_eq!(certificate(&url).is_some(), ok, "{url}");
        }
        let long = format!("{host}/SimpleNotificationService-{}.pem", "a".repeat(65));
        assert!(certificate(&long).is_none());
        let confirm = format!("{host}/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-east-1:1:t&Token=ab%2Bc");
        assert_eq!(subscribe_url(&confirm).as_deref(), Some(confirm.as_str()));
        for path in ["/?Action=Unsubscribe&SubscriptionArn=x", "/x?Action=ConfirmSubscription", "/"] {
            assert!(subscribe_url(&format!("{host}{path}")).is_none(), "{path}");
        }
    }

    /// An S3 bucket named `sns` answers at `sns.s3.amazonaws.com`, `sns.s3-<region>.amazonaws.com`,
    /// `sns.s3.<region>.amazonaws.com` and `sns.s3.dualstack.<region>.amazonaws.com` (and in China
    /// `sns.s3.cn-north-1.amazonaws.com.cn`): anyone can own it, so none of them may serve SNS's certificate.
    #[test]
    fn s3_bucket_hosts_named_sns_are_refused_and_real_regions_admitted() {
        for host in [
            "sns.s3.amazonaws.com",
            "sns.s3-us-west-2.amazonaws.com",
            "sns.s3-external-1.amazonaws.com",
            "sns.s3.us-east-1.amazonaws.com",
            "sns.s3.dualstack.us-east-1.amazonaws.com",
            "sns.s3-website-us-east-1.amazonaws.com",
            "sns.s3-accelerate.amazonaws.com",
            "sns.s3.cn-north-1.amazonaws.com.cn",
            "sns.s3-cn-north-1.amazonaws.com.cn",
            // A region's shape, but on the wrong partition's domain, or not a region at all.
            "sns.cn-north-1.amazonaws.com",
            "sns.us-east-1.amazonaws.com.cn",
            "sns.us-east-01.amazonaws.com",
            "sns.us-up-1.amazonaws.com",
            "sns.usa-east-1.amazonaws.com",
            "sns.us-gov-west.amazonaws.com",
            "sns.amazonaws.com",
            "sns..amazonaws.com",
        ] {
            let url = format!("https://{host}/SimpleNotificationService-0123456789abcdef0123456789abcdef.pem");
            assert!(certificate(&url).is_none(), "{host} admitted");
            let subscribe = format!("https://{host}/?Action=ConfirmSubscription&TopicArn=arn&Token=t");
            assert!(subscribe_url(&subscribe).is_none(), "{host} admitted for a subscription");
        }
        for host in [
            "sns.us-east-1.amazonaws.com",
            "sns.us-west-2.amazonaws.com",
            "sns.eu-central-1.amazonaws.com",
            "sns.ap-southeast-4.amazonaws.com",
            "sns.ap-northeast-3.amazonaws.com",
            "sns.il-central-1.amazonaws.com",
            "sns.me-south-1.amazonaws.com",
            "sns.us-gov-west-1.amazonaws.com",
            "sns.us-gov-east-1.amazonaws.com",
            "sns.cn-north-1.amazonaws.com.cn",
            "sns.cn-northwest-1.amazonaws.com.cn",
        ] {
            let url = format!("https://{host}/SimpleNotificationService-0123456789abcdef0123456789abcdef.pem");
            assert!(certificate(&url).is_some(), "{host} refused");
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
        // The confirmation is the query: it is kept as sent.
        assert_eq!(answer.confirm.as_deref(), case["expect"]["confirm_url"].as_str());
        let forged = case["body"]
            .as_str()
            .unwrap()
            .replace("https://sns.us-east-1.amazonaws.com/?Action", "https://example.net/?Action");
        let req = Request::post(&uri, &headers, forged.as_bytes());
        assert_eq!(subscription(&req, &Credentials::default()).unwrap().status, 400);
    }
}
