//! WooCommerce: `X-WC-Webhook-Signature` is the base64 HMAC-SHA256 of the raw body (JSON with `/` escaped as
//! `\/`: keep the bytes) under the webhook's secret as shown; no timestamp. The id is `X-WC-Webhook-Delivery-ID`
//! (one per delivery; WooCommerce does not retry), the type `X-WC-Webhook-Topic` (`order.created`). Saving a
//! webhook sends an unsigned form ping `webhook_id={n}` that must get a 200: answered empty, never stored.
//! <https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks> (`WC_Webhook::deliver_ping`)

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Answer, Credentials, Identified, Request};
use crate::encoding::Encoding;
use crate::errors::{IdError, VerifyError};
use crate::identity::Identity;
use crate::mac::Algorithm;

const SIGNATURE: &str = "x-wc-webhook-signature";

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header(SIGNATURE, "", Encoding::Base64),
        Algorithm::Sha256,
    ));
    Preset {
        kept: [
            "x-wc-webhook-delivery-id",
            "x-wc-webhook-topic",
            "x-wc-webhook-resource",
            "x-wc-webhook-event",
            "x-wc-webhook-id",
            "x-wc-webhook-source",
        ]
        .into_iter()
        .map(HeaderName::from_static)
        .collect(),
        before: Some(ping),
        // The signature covers the body but not the delivery id, a header of its own.
        resendable: true,
        example: Some(Example {
            body: r#"{"id":4711,"status":"processing","currency":"EUR","total":"27.00","note":"{id}"}"#,
            content_type: "application/json",
            headers: &[("x-wc-webhook-delivery-id", "{id}"), ("x-wc-webhook-topic", "{type}")],
        }),
        ..Preset::new("woocommerce", family, Identify::Custom(identify))
    }
}

/// The ping sent when a webhook is saved: a form body that is exactly `webhook_id=<digits>`, with no signature.
/// Anything else goes through the signature check.
fn ping(req: &Request, _: &Credentials) -> Option<Result<Answer, VerifyError>> {
    if req.headers.contains_key(SIGNATURE) || !req.is_form() {
        return None;
    }
    let id = req.body.strip_prefix(b"webhook_id=")?;
    let digits = !id.is_empty() && id.len() <= 20 && id.iter().all(u8::is_ascii_digit);
    digits.then(|| Ok(Answer::empty(200)))
}

/// WooCommerce's delivery id is `wp_hash(webhook id . time())`: two deliveries of one webhook in the same second
/// share it, so the id is that and the hex SHA-256 of the body together (WooCommerce does not retry a delivery, so
/// nothing needs it to stay the same across attempts). The type is the topic.
fn identify(req: &Request) -> Result<Identified, IdError> {
    use sha2::Digest as _;
    let delivery = crate::identity::id_from_header(req.headers, &HeaderName::from_static("x-wc-webhook-delivery-id"))?;
    let event_type = crate::identity::type_from_header(req.headers, &HeaderName::from_static("x-wc-webhook-topic"))?;
    let event_id = format!("{delivery}:{}", hex::encode(sha2::Sha256::digest(req.body)));
    Ok(Identified::One(Identity { event_id, event_type }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Uri};

    use crate::{Credentials, Request, Scheme};

    fn is_ping(content_type: &str, signature: bool, body: &[u8]) -> bool {
        let uri = Uri::from_static("/");
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_str(content_type).unwrap());
        if signature {
            headers.insert("x-wc-webhook-signature", HeaderValue::from_static("AAAA"));
        }
        let req = Request::post(&uri, &headers, body);
        let scheme = Scheme::named("woocommerce").unwrap();
        scheme
            .unsigned_handshake(&Credentials::default(), &req)
            .is_some_and(|a| a.is_ok_and(|a| a.status == 200))
    }

    #[test]
    fn only_the_exact_unsigned_ping_is_answered_unverified() {
        let form = "application/x-www-form-urlencoded";
        assert!(is_ping(form, false, b"webhook_id=12"));
        assert!(!is_ping(form, true, b"webhook_id=12"));
        assert!(!is_ping("application/json", false, b"webhook_id=12"));
        assert!(!is_ping(form, false, b"webhook_id="));
        assert!(!is_ping(form, false, b"webhook_id=12&x=1"));
        assert!(!is_ping(form, false, b"webhook_id=1a"));
        assert!(!is_ping(form, false, b"{\"id\":1}"));
    }
}
