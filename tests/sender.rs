//! A provider's sender on a lossy path, for the end-to-end tests of reconciliation (`#[path]`-included by both test
//! binaries): its webhooks signed as the provider would (`testkit::providers::Fake`, the scheme's own signer), which
//! of them are lost on the way, and what a late one is answered.

use http::{HeaderMap, HeaderName, HeaderValue};
use inbox_core::schemes::{Identity, Key, Request, Signer};
use inbox_core::source::Sources;
use testkit::providers::{Event, Fake, Receiving};

/// Signs `event`'s webhook as its provider would, for the source named after the provider: the headers and the
/// body to POST. The source's first secret signs, or the private key the fake names.
pub fn signed(
    sources: &Sources,
    fake: &dyn Fake,
    receiving: &Receiving,
    event: &Event,
) -> (HeaderMap, Vec<u8>) {
    let src = sources.get(fake.provider()).expect("the lane's source");
    let webhook = fake.webhook(event);
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(webhook.content_type),
    );
    for (name, value) in &webhook.headers {
        headers.append(
            HeaderName::try_from(name.as_str()).expect("a header name"),
            HeaderValue::try_from(value.as_str()).expect("a header value"),
        );
    }
    let signer = match &receiving.private_key {
        Some((pem, key_url)) => Signer::Private {
            pkcs8: Key::new(pem::parse(pem.trim()).expect("a PEM key").contents().to_vec()),
            key_url: key_url.clone(),
        },
        None => Signer::Secret(src.credentials.secrets[0].clone()),
    };
    let uri: http::Uri = format!("/webhooks/{}", fake.provider()).parse().expect("a path");
    let request = Request {
        method: &http::Method::POST,
        uri: &uri,
        headers: &headers,
        body: &webhook.body,
        received_ms: 0,
    };
    let identity = Identity {
        event_id: event.id.clone(),
        event_type: Some(event.event_type.clone()),
    };
    let signed = src
        .scheme
        .sign_request(
            &signer,
            &src.credentials,
            &request,
            &identity,
            inbox_core::time::now_ms() / 1000,
        )
        .unwrap_or_else(|| panic!("{}: the scheme cannot sign with this key", fake.provider()));
    for (name, value) in signed.headers {
        headers.insert(name, HeaderValue::try_from(value).expect("a signature header"));
    }
    (headers, signed.body.unwrap_or(webhook.body))
}

/// Whether a receiver's answer says every event of the delivery was a duplicate: the answer of one event, or each
/// item of a batch's.
pub fn all_duplicates(answer: &serde_json::Value) -> bool {
    match answer["events"].as_array() {
        Some(items) => !items.is_empty() && items.iter().all(|i| i["status"] == "duplicate"),
        None => answer["status"] == "duplicate",
    }
}

/// What happens to one webhook on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Delivered,
    /// Never arrives.
    Dropped,
    /// Answered 500 before any write.
    Refused,
}

/// The fates of `n` webhooks: a random tenth dropped and `refused` others answered 500, drawn from `rng`.
pub fn fates(rng: &mut impl rand::Rng, n: usize, refused: usize) -> Vec<Fate> {
    use rand::seq::SliceRandom;
    let mut slots: Vec<usize> = (0..n).collect();
    slots.shuffle(rng);
    let mut fate = vec![Fate::Delivered; n];
    for &i in &slots[..n / 10] {
        fate[i] = Fate::Dropped;
    }
    for &i in &slots[n / 10..n / 10 + refused] {
        fate[i] = Fate::Refused;
    }
    fate
}
