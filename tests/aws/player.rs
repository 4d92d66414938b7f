//! `inbox aws play` against Lambda's Invoke API served in-process over the functions.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use inbox_core::aws::functions;
use inbox_core::aws::init::QueueSettings;
use inbox_core::aws::Runtime;
use inbox_core::model::Status;
use inbox_core::ports::Ledger;

use crate::stack::{deadline, deliver_signed, emulator, key, stack, stripe_body, Stack, SECRET};

/// Lambda's Invoke API over the functions of `rt`, in-process: what `cargo lambda watch` serves
/// (`POST /2015-03-31/functions/{name}/invocations`, the event as the body, the result as the answer:
/// https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html), for the player's test.
async fn invoke_api(rt: Arc<Runtime>) -> String {
    use axum::response::IntoResponse;
    let invoke = move |axum::extract::Path(name): axum::extract::Path<String>, body: bytes::Bytes| {
        let rt = rt.clone();
        async move {
            let answer = match name.as_str() {
                "processor" => serde_json::to_value(
                    functions::processor(&rt, serde_json::from_slice(&body).unwrap(), deadline()).await,
                )
                .unwrap(),
                "alarm" => {
                    serde_json::to_value(functions::alarm(&rt, serde_json::from_slice(&body).unwrap()).await)
                        .unwrap()
                }
                "sweeper" => {
                    let report = functions::sweeper(&rt).await.unwrap();
                    serde_json::json!({"received": report.received, "alarms": report.alarms})
                }
                _ => return (axum::http::StatusCode::NOT_FOUND, "no such function").into_response(),
            };
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                answer.to_string(),
            )
                .into_response()
        }
    };
    let app = axum::Router::new().route(
        "/2015-03-31/functions/{name}/invocations",
        axum::routing::post(invoke),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// `inbox aws play` plays the event source mappings and schedules around functions served
/// locally: a batch through the processor with its partial failures left on the queue, a dead letter through the
/// alarm function, the sweeper's tick; a batch whose invocation fails stays on the queue whole.
#[tokio::test(flavor = "multi_thread")]
async fn the_player_runs_the_flow_through_the_invoke_api() {
    use inbox_core::aws::play::{Player, Pumped};
    let Some(sdk) = emulator().await else { return };
    let Stack { rt, switch, sqs, .. } = stack(&sdk, QueueSettings::default(), "base = \"1s\"").await;
    let rt = Arc::new(rt);
    let player = Player::new(sqs.clone(), &invoke_api(rt.clone()).await);
    let (queue, dlq) = (
        rt.resources.queue_url.clone(),
        rt.resources.dlq_url.clone().unwrap(),
    );
    let wait = Duration::from_secs(2);
    let status = |id: &'static str| {
        let rt = rt.clone();
        async move { rt.ledger.get(&key(id)).await.unwrap().map(|e| e.status) }
    };

    // A delivered event: the processor completes it and its message is deleted.
    deliver_signed(rt.receiver(), SECRET, &stripe_body("evt_play_ok")).await;
    let pumped = player.pump(&queue, "processor", wait).await.unwrap();
    assert_eq!(
        pumped,
        Pumped {
            received: 1,
            deleted: 1,
            left: 0
        }
    );
    assert_eq!(status("evt_play_ok").await, Some(Status::Completed));

    // A failing handler: reported as a batch item failure, left for SQS to deliver again.
    switch.failing.store(true, Ordering::SeqCst);
    deliver_signed(rt.receiver(), SECRET, &stripe_body("evt_play_fail")).await;
    let pumped = player.pump(&queue, "processor", wait).await.unwrap();
    assert_eq!(
        pumped,
        Pumped {
            received: 1,
            deleted: 0,
            left: 1
        }
    );
    assert_eq!(status("evt_play_fail").await, Some(Status::Failed));

    // Its message redriven to the DLQ: the alarm function marks it DEAD.
    sqs.send_message()
        .queue_url(&dlq)
        .message_body(inbox_core::aws::sqs::pointer(&key("evt_play_fail")))
        .send()
        .await
        .unwrap();
    let pumped = player.pump(&dlq, "alarm", wait).await.unwrap();
    assert_eq!(
        pumped,
        Pumped {
            received: 1,
            deleted: 1,
            left: 0
        }
    );
    assert_eq!(status("evt_play_fail").await, Some(Status::Dead));

    // The sweeper's tick, and a function the server does not have: the batch stays whole.
    let answer = player.tick("sweeper").await.unwrap();
    assert!(answer.get("received").is_some(), "{answer}");
    switch.failing.store(false, Ordering::SeqCst);
    deliver_signed(rt.receiver(), SECRET, &stripe_body("evt_play_later")).await;
    let pumped = player.pump(&queue, "no-such-function", wait).await.unwrap();
    assert_eq!((pumped.received, pumped.deleted), (pumped.left, 0));
    assert!(pumped.received >= 1);
    assert_eq!(status("evt_play_later").await, Some(Status::Received));
}
