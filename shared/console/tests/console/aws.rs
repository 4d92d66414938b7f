//! `inbox console --aws`: the console over DynamoDB and SQS, as the command builds it, against whatever
//! `AWS_ENDPOINT_URL` names (the emulator `./test.sh` starts; by hand: `docs/testing.md`, "The AWS emulator"). It
//! shows the dead events from the sparse index and replays one: the conditional transition, then one SQS message; a
//! second replay of the same event enqueues nothing. Its overview shows every reconciled source's last run, a
//! healthy source (nothing failed or dead, so nothing the index counts) included.
//!
//! Without `AWS_ENDPOINT_URL` it prints SKIPPED and passes, unless `INBOX_REQUIRE_AWS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use inbox_console::Console;
use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::sqs::SqsQueue;
use inbox_core::model::{EventId, EventKey, NewEvent, SourceName, Status};
use inbox_core::ports::Checkpoints;
use inbox_core::ports::{Checkpoint, Ledger, RunRecord, Settlement};
use inbox_core::stores::dynamodb::DynamoLedger;

fn key(id: &str) -> EventKey {
    EventKey::new(SourceName::parse("stripe").unwrap(), EventId::parse(id).unwrap())
}

fn new_event(id: &str, body: &str) -> NewEvent {
    NewEvent {
        key: key(id),
        event_type: Some("charge.failed".into()),
        payload: bytes::Bytes::from(body.to_owned()),
        payload_sha256: "0".repeat(64),
        headers: vec![("content-type".into(), "application/json".into())],
        origin: Default::default(),
        resent_bodies: Default::default(),
    }
}

/// The ledger as `inbox console --aws` opens it (cli/main.rs `StoreArgs::open`), without the bucket: these bodies
/// are small enough to stay in the item.
fn console_ledger(sdk: &aws_config::SdkConfig, table: &str) -> Arc<DynamoLedger> {
    Arc::new(DynamoLedger::new(
        aws_sdk_dynamodb::Client::new(sdk),
        table,
        None,
        Duration::from_secs(60),
    ))
}

fn csrf_of(page: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let at = page.find(marker).expect("a csrf field") + marker.len();
    page[at..].split('"').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_console_shows_dead_events_and_replays_one_into_the_queue() {
    if std::env::var_os("AWS_ENDPOINT_URL").is_none() {
        assert_ne!(
            std::env::var("INBOX_REQUIRE_AWS").as_deref(),
            Ok("1"),
            "INBOX_REQUIRE_AWS=1 but AWS_ENDPOINT_URL is unset"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: the console's AWS test: AWS_ENDPOINT_URL is unset"
        );
        return;
    }
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let prefix = format!("console-{:08x}", rand::random::<u32>());
    let stack = create_stack(&sdk, &prefix, QueueSettings::default())
        .await
        .unwrap();
    let ledger = console_ledger(&sdk, &stack.table);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let queue = Arc::new(SqsQueue::new(sqs.clone(), stack.queue_url.clone()));

    // GIVEN a dead event (with a hostile body), an open one and a completed one.
    ledger
        .create(new_event("evt_dead", r#"{"x":"<script>alert(1)</script>"}"#))
        .await
        .unwrap();
    ledger.mark_dead(&key("evt_dead"), "gave up").await.unwrap();
    ledger.create(new_event("evt_open", "{}")).await.unwrap();
    ledger.create(new_event("evt_done", "{}")).await.unwrap();
    ledger
        .claim(&key("evt_done"), "w", Duration::from_secs(60))
        .await
        .unwrap();
    let done = Settlement::Completed {
        retention: Duration::from_secs(3600),
    };
    ledger.settle(&key("evt_done"), "w", done).await.unwrap();

    let console = Console::new(
        ledger.clone(),
        Some(queue),
        None,
        format!("DynamoDB table {}", stack.table),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, console.router()).await });
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = |path: &str| {
        let (http, url) = (http.clone(), format!("{base}{path}"));
        async move {
            let r = http.get(url).send().await.unwrap();
            assert_eq!(r.status(), 200);
            r.text().await.unwrap()
        }
    };

    // THEN the overview and the dead listing show it, from the sparse index; completed events are not counted.
    let overview = page("/").await;
    assert!(overview.contains("evt_dead"), "{overview}");
    assert!(overview.contains("on DynamoDB that would scan the table"));
    let dead = page("/events?status=DEAD").await;
    assert!(dead.contains("evt_dead") && !dead.contains("evt_open") && !dead.contains("evt_done"));
    assert!(
        !dead.contains("scans the whole table"),
        "the dead listing reads the index"
    );
    assert!(
        page("/events").await.contains("scans the whole table"),
        "the page says what a scan costs"
    );
    let event = page("/event?source=stripe&id=evt_dead").await;
    assert!(event.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !event.contains("<script>"));

    // WHEN the operator replays it, twice THEN it is RECEIVED again and the queue holds one message for it.
    let csrf = csrf_of(&event);
    let replay = || {
        http.post(format!("{base}/event/replay"))
            .header("origin", &base)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("source=stripe&id=evt_dead&csrf={csrf}"))
            .send()
    };
    let first = replay().await.unwrap();
    assert_eq!(first.status(), 303);
    assert!(first.headers()["location"]
        .to_str()
        .unwrap()
        .ends_with("flash=replayed"));
    let second = replay().await.unwrap();
    assert!(second.headers()["location"]
        .to_str()
        .unwrap()
        .ends_with("flash=skipped"));
    let e = ledger.get(&key("evt_dead")).await.unwrap().unwrap();
    assert_eq!((e.status, e.replays), (Status::Received, 1));
    // AND the overview counts its message in the work queue (received events are not in DynamoDB's index)
    let overview = page("/").await;
    assert!(
        overview.contains("Work queue: <strong>1</strong> waiting, <strong>0</strong> in flight"),
        "{overview}"
    );
    let mut bodies = Vec::new();
    for _ in 0..3 {
        let out = sqs
            .receive_message()
            .queue_url(&stack.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        bodies.extend(
            out.messages
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| m.body),
        );
    }
    let replayed: Vec<_> = bodies.iter().filter(|b| b.contains("evt_dead")).collect();
    assert_eq!(replayed.len(), 1, "one message for one replay: {bodies:?}");
}

/// The overview's chart on AWS comes from the functions' metrics in CloudWatch (`GetMetricData` over the totals
/// the EMF lines publish), since DynamoDB cannot count by hour without a scan. The emulator stands in for what
/// CloudWatch Logs extracts from the lines: the test puts the datapoints there itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_overview_charts_the_functions_cloudwatch_metrics() {
    use aws_sdk_cloudwatch::primitives::DateTime;
    use aws_sdk_cloudwatch::types::MetricDatum;
    use inbox_core::aws::charts::CloudWatchTimeline;
    use inbox_core::ports::Timeline;

    if std::env::var_os("AWS_ENDPOINT_URL").is_none() {
        assert_ne!(std::env::var("INBOX_REQUIRE_AWS").as_deref(), Ok("1"));
        let _ = writeln!(std::io::stderr(), "SKIPPED: AWS_ENDPOINT_URL is unset");
        return;
    }
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let timeline = Arc::new(CloudWatchTimeline::new(&sdk));
    let now = inbox_core::time::now_ms();
    // What the emulator holds already (another run against the same one), so the sums below are exact.
    let before = timeline.last_day(now).await.unwrap();
    assert_eq!(before.len(), 24, "24 hours");
    let total = |hours: &[inbox_core::ports::Bucket]| {
        hours.iter().fold((0, 0, 0), |(a, c, d), b| {
            (a + b.accepted, c + b.completed, d + b.dead)
        })
    };
    let (a0, c0, d0) = total(&before);

    // GIVEN the functions' totals of two hours ago and of one hour ago
    let cw = aws_sdk_cloudwatch::Client::new(&sdk);
    for (ago_h, name, value) in [
        (2, "Accepted", 7.0),
        (2, "Completed", 5.0),
        (1, "Completed", 1.0),
        (1, "DeadEvents", 1.0),
    ] {
        cw.put_metric_data()
            .namespace(inbox_core::aws::emf::NAMESPACE)
            .metric_data(
                MetricDatum::builder()
                    .metric_name(name)
                    .value(value)
                    .timestamp(DateTime::from_millis(now - ago_h * 3_600_000))
                    .build(),
            )
            .send()
            .await
            .unwrap();
    }
    // THEN the timeline has them in their hours
    let after = timeline.last_day(now).await.unwrap();
    assert_eq!(total(&after), (a0 + 7, c0 + 6, d0 + 1), "{after:?}");
    let hour_of = |t: i64| {
        after
            .iter()
            .position(|b| (b.start..b.start + 3_600_000).contains(&t))
    };
    let two_ago = hour_of(now - 2 * 3_600_000).unwrap();
    assert!(after[two_ago].accepted >= 7 && after[two_ago].completed >= 5);

    // AND the console's overview draws them, and says where they come from
    let stack = create_stack(
        &sdk,
        &format!("chart-{:08x}", rand::random::<u32>()),
        QueueSettings::default(),
    )
    .await
    .unwrap();
    let ledger = console_ledger(&sdk, &stack.table);
    let console = Console::new(ledger, None, None, "DynamoDB").with_timeline(timeline);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, console.router()).await });
    let overview = reqwest::get(format!("{base}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        overview.contains(&format!("{} events accepted in the last 24 hours", a0 + 7)),
        "{overview}"
    );
    assert!(
        overview.contains("from the functions&#39; CloudWatch metrics")
            || overview.contains("from the functions' CloudWatch metrics")
    );
}

/// On DynamoDB the overview counts only failed and dead events, so its sources once came from those counts and a
/// healthy source's reconciliation never showed: the config names them now, as `inbox console --aws` reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_overview_shows_a_healthy_sources_last_reconciliation_run() {
    if std::env::var_os("AWS_ENDPOINT_URL").is_none() {
        assert_ne!(std::env::var("INBOX_REQUIRE_AWS").as_deref(), Ok("1"));
        let _ = writeln!(std::io::stderr(), "SKIPPED: AWS_ENDPOINT_URL is unset");
        return;
    }
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let prefix = format!("console-runs-{:08x}", rand::random::<u32>());
    let stack = create_stack(&sdk, &prefix, QueueSettings::default())
        .await
        .unwrap();
    let ledger = console_ledger(&sdk, &stack.table);
    // GIVEN stripe and github reconcile, and shop does not; stripe is healthy (its one event completed) and ran
    // at `at`, recovering nothing; github has not run yet.
    let config = inbox_core::config::Config::from_toml(
        r#"
[sources.stripe]
scheme = "stripe"
secrets = ["env:STRIPE_WEBHOOK_SECRET"]
handler = { kind = "log" }
[sources.stripe.reconcile]
provider = "stripe"
api_key = "env:STRIPE_KEY"

[sources.github]
scheme = "github"
secrets = ["env:GITHUB_WEBHOOK_SECRET"]
handler = { kind = "log" }
[sources.github.reconcile]
provider = "github"
hook = "orgs/acme/hooks/1"
token = "env:GITHUB_TOKEN"

[sources.shop]
scheme = "stripe"
secrets = ["env:SHOP_SECRET"]
handler = { kind = "log" }
"#,
    )
    .unwrap();
    ledger.create(new_event("evt_done", "{}")).await.unwrap();
    ledger
        .claim(&key("evt_done"), "w", Duration::from_secs(60))
        .await
        .unwrap();
    let done = Settlement::Completed {
        retention: Duration::from_secs(3600),
    };
    ledger.settle(&key("evt_done"), "w", done).await.unwrap();
    let at = inbox_core::time::now_ms() - 60_000;
    let checkpoint = Checkpoint {
        scanned_to: at - 300_000,
        last_run: Some(RunRecord {
            started_at: at - 1_500,
            finished_at: at,
            listed: 12,
            present: 12,
            recovered: 0,
            failed: 0,
            error: None,
        }),
        ..Default::default()
    };
    ledger
        .save_checkpoint(&SourceName::parse("stripe").unwrap(), &checkpoint)
        .await
        .unwrap();

    let console = Console::new(ledger, None, None, "DynamoDB").with_config(&config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, console.router()).await });
    let r = reqwest::get(format!("{base}/")).await.unwrap();
    assert_eq!(r.status(), 200);
    let overview = r.text().await.unwrap();

    // THEN the overview counts nothing for stripe, yet shows its last run, and says github has none yet.
    assert!(!overview.contains("evt_done"), "{overview}");
    let finished = inbox_core::time::rfc3339(at);
    let stripe = format!(
        "<td>stripe</td><td>{finished}</td><td class=\"num\">12</td><td class=\"num\">12</td>\
         <td class=\"num\">0</td><td class=\"num\">0</td><td>{}</td><td>ok</td>",
        inbox_core::time::rfc3339(at - 300_000)
    );
    assert!(overview.contains(&stripe), "{stripe} in {overview}");
    assert!(
        overview.contains("<td>github</td><td colspan=\"7\">no run yet</td>"),
        "{overview}"
    );
    assert!(!overview.contains("<td>shop</td>"), "shop does not reconcile");
}
