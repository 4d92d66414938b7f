//! Providers on AWS: SendGrid's Event Webhook (an ECDSA P-256 signature over timestamp + body, the body an array
//! of events) through the receiver function's router against the emulator. The batch is written in one
//! `TransactWriteItems` before the one answer, each item enqueued after it; a retried batch stores nothing more.

use std::sync::Arc;

use inbox_core::aws::init::QueueSettings;
use inbox_core::model::{EventId, EventKey, SourceName, Status};
use inbox_core::ports::Ledger;
use inbox_core::receiver::Receiver;
use inbox_core::schemes::{Identity, Key, Request, Scheme, Signer};
use tower::ServiceExt;

use crate::stack::*;

fn keys(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/keys")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

/// The body and headers SendGrid would send for `ids`, signed now with the test P-256 key.
fn sendgrid_delivery(ids: &[String]) -> (String, Vec<(String, String)>) {
    let scheme = Scheme::named("sendgrid").unwrap();
    let items: Vec<Identity> = ids
        .iter()
        .map(|id| Identity {
            event_id: id.clone(),
            event_type: Some("delivered".into()),
        })
        .collect();
    let body = scheme.sample(&items).body;
    let pem = pem::parse(keys("p256.key")).unwrap();
    let signer = Signer::Private {
        pkcs8: Key::new(pem.contents().to_vec()),
        key_url: None,
    };
    let uri: http::Uri = "/webhooks/sendgrid".parse().unwrap();
    let headers = http::HeaderMap::new();
    let request = Request::post(&uri, &headers, &body);
    let now = inbox_core::time::now_ms() / 1000;
    let creds = inbox_core::schemes::Credentials::default();
    let signed = scheme
        .sign_request(&signer, &creds, &request, &items[0], now)
        .unwrap();
    let headers = signed
        .headers
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    (String::from_utf8(body).unwrap(), headers)
}

/// A Function URL invocation of the receiver with these headers and body.
async fn invoke(
    receiver: Arc<Receiver>,
    source: &str,
    headers: &[(String, String)],
    body: &str,
) -> (u16, serde_json::Value) {
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("../data/function_url_event.json")).unwrap();
    for (name, value) in headers {
        event["headers"][name.as_str()] = serde_json::json!(value);
    }
    event["rawPath"] = serde_json::json!(format!("/webhooks/{source}"));
    event["requestContext"]["http"]["path"] = serde_json::json!(format!("/webhooks/{source}"));
    event["body"] = serde_json::json!(body);
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let response = inbox_core::receiver::router(receiver, false)
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

/// GIVEN a SendGrid source on the AWS runtime (its public key in the config)
/// WHEN a signed delivery of 10 events arrives, then the same delivery again, then one whose body was changed
/// THEN the first stores all 10 in one transaction and answers each accepted, and every item runs to COMPLETED;
/// the retry stores nothing and answers each a duplicate; the changed one is refused 401 with nothing stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_sendgrid_batch_is_stored_in_one_transaction_and_each_item_runs_once() {
    let Some(sdk) = emulator().await else { return };
    let public = keys("p256.pub");
    let more = format!(
        "[sources.sendgrid]\nscheme = \"sendgrid\"\npublic_key = '''{public}'''\n\
         handler = {{ kind = \"custom\", name = \"switch\", timeout = \"5s\" }}\n"
    );
    let stack = stack_with_sources(
        &sdk,
        QueueSettings::default(),
        "",
        "switch",
        |r, _, _, _| r,
        &more,
    )
    .await;
    let run = prefix();
    let ids: Vec<String> = (0..10).map(|i| format!("{run}.{i}")).collect();
    let (body, headers) = sendgrid_delivery(&ids);

    stack.counter.take();
    let (status, answer) = invoke(stack.rt.receiver(), "sendgrid", &headers, &body).await;
    assert_eq!(status, 200, "{answer}");
    let outcomes = answer["events"].as_array().unwrap();
    assert_eq!(outcomes.len(), 10, "{answer}");
    assert!(outcomes.iter().all(|o| o["status"] == "accepted"), "{answer}");
    let calls = stack.counter.take();
    assert_eq!(
        calls.get("dynamodb.TransactWriteItems"),
        Some(&1),
        "one transaction for the batch: {calls:?}"
    );
    assert_eq!(
        calls.get("dynamodb.TransactWriteItems.Put"),
        Some(&10),
        "{calls:?}"
    );
    assert_eq!(
        calls.get("dynamodb.PutItem"),
        None,
        "no item written on its own: {calls:?}"
    );
    eprintln!("sendgrid on AWS, the receiver's calls for a batch of 10: {calls:?}");
    let source = SourceName::parse("sendgrid").unwrap();
    for id in &ids {
        let key = EventKey::new(source.clone(), EventId::parse(id).unwrap());
        let stored = stack
            .rt
            .ledger
            .get(&key)
            .await
            .unwrap()
            .expect("each item is stored");
        assert_eq!(stored.event_type.as_deref(), Some("delivered"));
    }
    // Each item has its message: the processor runs them all.
    let mut done = 0;
    for _ in 0..20 {
        poll_once(&stack, 1).await;
        done = 0;
        for id in &ids {
            let key = EventKey::new(source.clone(), EventId::parse(id).unwrap());
            if stack
                .rt
                .ledger
                .get(&key)
                .await
                .unwrap()
                .is_some_and(|e| e.status == Status::Completed)
            {
                done += 1;
            }
        }
        if done == ids.len() {
            break;
        }
    }
    assert_eq!(done, ids.len(), "every item runs to COMPLETED");
    let runs = stack.switch.runs.lock().unwrap().clone();
    assert!(
        ids.iter().all(|id| runs.get(id) == Some(&1)),
        "each item ran once: {runs:?}"
    );

    let (status, again) = invoke(stack.rt.receiver(), "sendgrid", &headers, &body).await;
    assert_eq!(status, 200, "{again}");
    assert!(
        again["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["status"] == "duplicate"),
        "a retried batch stored again: {again}"
    );

    let changed = body.replacen("delivered", "bounce", 1);
    let (status, refused) = invoke(stack.rt.receiver(), "sendgrid", &headers, &changed).await;
    assert_eq!(status, 401, "{refused}");
    eprintln!(
        "sendgrid on AWS: 10 items in 1 TransactWriteItems, all COMPLETED once; retry: all duplicates; a changed \
         body: {status} {refused}"
    );
}
