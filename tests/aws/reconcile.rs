//! The reconciler function against the emulator and a fake Stripe (`testkit::providers`, shared with
//! shared/tests/core/reconcile.rs).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_sqs::types::QueueAttributeName;
use inbox_core::aws::functions::{self, SourceRun};
use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::{Clients, ReconcilerRuntime, Runtime};
use inbox_core::config::Config;
use inbox_core::handlers::{http_client, Registry};
use inbox_core::model::{Origin, SourceName};
use inbox_core::ports::ListFilter;
use inbox_core::secrets::LocalSecrets;
use testkit::calls::CallCounter;
use testkit::providers::{stripe_events_over, FakeStripe, LOOKBACK, SETTLE};

use crate::sender::Fate;
use crate::stack::{counted_clients, deliver_raw, deliver_signed, emulator, prefix, stripe_body, SECRET};
use inbox_core::ports::{Browse, Checkpoints};

/// The fake Stripe's key, and a wrong one that must never appear in a log, an error or the function's answer.
pub const STRIPE_KEY: &str = "sk_test_good";
pub const WRONG_STRIPE_KEY: &str = "sk_test_wrong_and_secret_51Hx";

pub struct ReconcileStack {
    /// The receiver's side (webhooks, the ledger reads of the test) over the same table and queue.
    pub rt: Runtime,
    pub reconciler: ReconcilerRuntime,
    pub counter: CallCounter,
}

/// A fresh stack and the reconciler function's runtime over it, its DynamoDB and SQS calls counted; `sources` is
/// the config's `[sources.*]` TOML. The provider credentials are `env:` references read by [`LocalSecrets`].
pub async fn reconcile_stack(sdk: &aws_config::SdkConfig, sources: &str) -> ReconcileStack {
    let resources = create_stack(sdk, &prefix(), QueueSettings::default())
        .await
        .unwrap();
    let counter = CallCounter::default();
    let clients = counted_clients(sdk, &counter);
    std::env::set_var("AWS_TEST_SOURCE_SECRET", SECRET);
    std::env::set_var("AWS_TEST_STRIPE_KEY", STRIPE_KEY);
    std::env::set_var("AWS_TEST_WRONG_STRIPE_KEY", WRONG_STRIPE_KEY);
    let config = Config::from_toml(sources).unwrap();
    let reconciler = ReconcilerRuntime::new(&clients, Arc::new(LocalSecrets), &resources, &config);
    let rt = Runtime::new(
        clients,
        Some(&LocalSecrets),
        resources,
        config,
        Registry::new(http_client()),
    )
    .await
    .unwrap();
    ReconcileStack {
        rt,
        reconciler,
        counter,
    }
}

/// A `stripe`-scheme source named `name`, reconciled against `api_base` with the key in `key_env`.
pub fn reconciled_source(name: &str, api_base: &str, key_env: &str) -> String {
    format!(
        "[sources.{name}]\nscheme = \"stripe\"\nsecrets = [\"env:AWS_TEST_SOURCE_SECRET\"]\n\
         handler = {{ kind = \"log\" }}\n\
         [sources.{name}.reconcile]\nprovider = \"stripe\"\napi_key = \"env:{key_env}\"\napi_base = \"{api_base}\"\n"
    )
}

/// A webhook body for a listed event, as Stripe would sign and send it: not byte for byte the API's rendering.
pub fn webhook_of(id: &str, created_s: i64, event_type: &str) -> String {
    serde_json::json!({"id": id, "object": "event", "type": event_type, "created": created_s,
                       "data": {"object": {"id": format!("obj_{id}")}}, "request": {"id": null}})
    .to_string()
}

/// The work queue's messages (SQS's approximate count, exact on the emulator when nothing is in flight).
async fn queued(stack: &ReconcileStack) -> u64 {
    let attrs = stack
        .rt
        .queue
        .client()
        .get_queue_attributes()
        .queue_url(&stack.rt.resources.queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .unwrap();
    attrs.attributes().unwrap()[&QueueAttributeName::ApproximateNumberOfMessages]
        .parse()
        .unwrap()
}

/// An invocation deadline `secs` from now, as the Lambda context carries it.
pub fn deadline_in(secs: i64) -> u64 {
    u64::try_from(inbox_core::time::now_ms() + secs * 1000).unwrap()
}

pub fn ops(calls: &HashMap<String, usize>) -> std::collections::BTreeMap<&str, usize> {
    calls.iter().map(|(k, v)| (k.as_str(), *v)).collect()
}

#[tokio::test]
async fn the_reconciler_function_recovers_the_window_with_one_write_per_missing_event() {
    let Some(sdk) = emulator().await else { return };
    // GIVEN a fake Stripe with 260 events over 80 hours (three younger than the settle time), and every third one
    // already delivered as a signed webhook through the receiver
    let now = inbox_core::time::now_ms();
    let mut events = stripe_events_over(257, 80 * 3_600_000, "aws");
    for (i, age_s) in [150, 60, 20].into_iter().enumerate() {
        events.push((
            format!("evt_awsyoung{i}"),
            now / 1000 - age_s,
            "invoice.created".into(),
        ));
    }
    let fake = FakeStripe::new(events.clone());
    let url = fake.start().await;
    let stack = reconcile_stack(&sdk, &reconciled_source("stripe", &url, "AWS_TEST_STRIPE_KEY")).await;
    let mut delivered = BTreeSet::new();
    for (id, created, ty) in events.iter().step_by(3) {
        let (status, answer) =
            deliver_signed(stack.rt.receiver(), SECRET, &webhook_of(id, *created, ty)).await;
        assert_eq!(
            (status, answer["status"].as_str()),
            (200, Some("accepted")),
            "{id}"
        );
        delivered.insert(id.clone());
    }
    let (from, to) = (now - LOOKBACK.as_millis() as i64, now - SETTLE.as_millis() as i64);
    let wanted: BTreeSet<String> = events
        .iter()
        .filter(|(_, at, _)| (from..to).contains(&(at * 1000)))
        .map(|(id, _, _)| id.clone())
        .collect();
    let already = wanted.intersection(&delivered).count() as u64;
    stack.counter.take();

    // WHEN the scheduled function runs once
    let started = Instant::now();
    let report = functions::reconciler(&stack.reconciler, deadline_in(300)).await;
    let took = started.elapsed();
    let calls = stack.counter.take();

    // THEN it ran the one source, listing the window and recovering what the ledger lacked
    let [SourceRun::Ran { source, summary }] = report.sources.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(source, "stripe");
    assert_eq!(
        (summary.listed, summary.present, summary.recovered, summary.failed),
        (wanted.len() as u64, already, wanted.len() as u64 - already, 0),
        "{summary:?}"
    );
    eprintln!(
        "reconciler function (emulator): 260 events over 80 h, {} delivered as webhooks; listed {}, already stored {}, \
         recovered {}, provider requests {}, pages {}; AWS calls {:?}; {took:?}",
        delivered.len(),
        summary.listed,
        summary.present,
        summary.recovered,
        summary.requests,
        summary.pages,
        ops(&calls)
    );
    // … one BatchGetItem per 100 listed ids, one PutItem and one SendMessage per recovered event, no write for a
    // present id; besides, the checkpoint read twice (is the source due; where the window starts) and written once.
    let expected = HashMap::from([
        (
            "dynamodb.BatchGetItem".to_owned(),
            summary.listed.div_ceil(100) as usize,
        ),
        ("dynamodb.PutItem".to_owned(), summary.recovered as usize + 1),
        ("sqs.SendMessage".to_owned(), summary.recovered as usize),
        ("dynamodb.GetItem".to_owned(), 2),
    ]);
    assert_eq!(ops(&calls), ops(&expected));

    // … the table holds exactly the events created in [now − lookback, now − settle) plus the delivered ones
    let events_now = stack
        .rt
        .ledger
        .list(&ListFilter {
            limit: 10_000,
            ..Default::default()
        })
        .await
        .unwrap();
    let stored: BTreeSet<String> = events_now.iter().map(|e| e.event_id.to_string()).collect();
    let expected_ids: BTreeSet<String> = wanted.union(&delivered).cloned().collect();
    assert_eq!(stored, expected_ids);
    assert!(
        !stored.contains("evt_awsyoung0"),
        "younger than the settle time: left to delivery"
    );
    for e in &events_now {
        let want = if delivered.contains(e.event_id.as_str()) {
            Origin::Webhook
        } else {
            Origin::Reconciled
        };
        assert_eq!(e.origin, want, "{}", e.event_id);
    }
    // … each one in the work queue once: the webhooks' messages and one per recovered event
    let queued = queued(&stack).await;
    assert_eq!(queued, delivered.len() as u64 + summary.recovered);

    // AND the next scheduled invocation, within the interval, skips the source with one read
    stack.counter.take();
    let again = functions::reconciler(&stack.reconciler, deadline_in(300)).await;
    assert!(
        matches!(again.sources.as_slice(), [SourceRun::Skipped { .. }]),
        "{again:?}"
    );
    assert_eq!(
        stack.counter.take(),
        HashMap::from([("dynamodb.GetItem".to_owned(), 1)])
    );

    // AND a webhook arriving afterwards for a recovered id is a duplicate, not a payload mismatch, though its body
    // differs from the API's rendering
    let recovered_id = wanted.difference(&delivered).next().unwrap();
    let (_, created, ty) = events.iter().find(|e| &e.0 == recovered_id).unwrap();
    let (status, answer) = deliver_signed(
        stack.rt.receiver(),
        SECRET,
        &webhook_of(recovered_id, *created, ty),
    )
    .await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")));
    assert_eq!(stack.rt.metrics.total("duplicate"), 1);
    assert_eq!(stack.rt.metrics.total("payload_mismatch"), 0);
}

#[tokio::test]
async fn one_sources_bad_credentials_stop_neither_the_others_nor_receiving() {
    let Some(sdk) = emulator().await else { return };
    // GIVEN three reconciled sources on one fake Stripe: `stripe` with the right key, `stripe-b` with a wrong one,
    // `stripe-c` whose key's reference names an unset variable
    let fake = FakeStripe::new(stripe_events_over(30, 10 * 3_600_000, "cred"));
    let url = fake.start().await;
    std::env::remove_var("AWS_TEST_UNSET_STRIPE_KEY");
    let sources = [
        reconciled_source("stripe", &url, "AWS_TEST_STRIPE_KEY"),
        reconciled_source("stripe-b", &url, "AWS_TEST_WRONG_STRIPE_KEY"),
        reconciled_source("stripe-c", &url, "AWS_TEST_UNSET_STRIPE_KEY"),
    ]
    .concat();
    let stack = reconcile_stack(&sdk, &sources).await;

    // WHEN the function runs
    let report = functions::reconciler(&stack.reconciler, deadline_in(120)).await;

    // THEN the good source recovered everything, and each bad one failed alone, named, without its key
    let text = serde_json::to_string(&report).unwrap();
    eprintln!("reconciler function with bad credentials on two of three sources: {text}");
    assert!(
        !text.contains(WRONG_STRIPE_KEY) && !text.contains(STRIPE_KEY),
        "{text}"
    );
    let [SourceRun::Ran { summary, .. }, SourceRun::Failed {
        source: b,
        error: b_error,
        ..
    }, SourceRun::Failed {
        source: c,
        error: c_error,
        ..
    }] = report.sources.as_slice()
    else {
        panic!("{report:?}")
    };
    assert_eq!((summary.recovered, summary.failed), (30, 0), "{summary:?}");
    assert_eq!(b, "stripe-b");
    assert!(
        b_error.contains("stripe-b") && b_error.contains("credentials"),
        "{b_error}"
    );
    assert_eq!(c, "stripe-c");
    assert!(
        c_error.contains("sources.stripe-c.reconcile.api_key"),
        "{c_error}"
    );
    assert_eq!(report.failed(), ["stripe-b", "stripe-c"]);
    // … the refused run is recorded without moving the checkpoint
    let cp = stack
        .rt
        .ledger
        .checkpoint(&SourceName::parse("stripe-b").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cp.scanned_to, 0);
    assert!(cp.last_run.unwrap().error.unwrap().contains("credentials"));

    // AND receiving goes on
    let (status, answer) = deliver_signed(stack.rt.receiver(), SECRET, &stripe_body("evt_cred_live")).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("accepted")));
}

/// The providers proven through the reconciler function on lossy delivery: one of each paging style (an offset,
/// an id cursor, a link to the next page).
const LOSSY_ON_AWS: [&str; 3] = ["chargebee", "gocardless", "okta"];

/// GIVEN a stack with a source per provider of [`LOSSY_ON_AWS`], each provider's fake API holding 30 events of the
/// last minutes, sent as signed webhooks through the receiver function, of which a random tenth never arrived and
/// two were answered 500 before any write (a receiver whose table the write cannot reach)
/// WHEN the scheduled reconciler function runs
/// THEN every event is in the table exactly once and in the work queue once, the lost ones recovered as reconciled;
/// the next invocation within the interval skips the sources; and each lost one, sent again later, is a duplicate
/// with no mismatch counted.
#[tokio::test]
async fn the_reconciler_function_recovers_a_lossy_delivery_for_three_providers() {
    let Some(sdk) = emulator().await else { return };
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(2727);
    let lanes: Vec<Arc<dyn testkit::providers::Fake>> = testkit::providers::all_fakes()
        .into_iter()
        .filter(|f| LOSSY_ON_AWS.contains(&f.provider()))
        .collect();
    assert_eq!(lanes.len(), LOSSY_ON_AWS.len());
    let mut sources = String::new();
    let mut receivings = Vec::new();
    for fake in &lanes {
        let url = fake.clone().start();
        let name = fake.provider();
        let prefix = format!("AWS_LOSSY_{}", name.to_uppercase());
        let written = testkit::providers::source_config(
            fake.as_ref(),
            &prefix,
            &url,
            "{ kind = \"log\" }",
            "interval = \"5m\"\nsettle = \"1s\"\nlookback = \"1h\"\n",
            false,
        );
        for (k, v) in written.env() {
            std::env::set_var(k, v);
        }
        sources.push_str(&written.toml);
        receivings.push(written.receiving);
    }
    let stack = reconcile_stack(&sdk, &sources).await;
    let receiving_sources =
        inbox_core::source::Sources::receiving(&Config::from_toml(&sources).unwrap(), &LocalSecrets)
            .await
            .unwrap();
    // The receiver of a stack whose table cannot be reached: it answers 500 before any write.
    let broken = {
        let mut resources = stack.rt.resources.clone();
        resources.table = format!("{}-missing", resources.table);
        Runtime::new(
            Clients::new(&sdk),
            Some(&LocalSecrets),
            resources,
            Config::from_toml(&sources).unwrap(),
            Registry::new(http_client()),
        )
        .await
        .unwrap()
    };

    let mut all = BTreeMap::new();
    let mut lost = BTreeMap::new();
    let mut late = Vec::new();
    let mut refused: BTreeMap<&str, usize> = BTreeMap::new();
    let now = inbox_core::time::now_ms();
    for (fake, receiving) in lanes.iter().zip(&receivings) {
        let name = fake.provider();
        for (i, fate) in crate::sender::fates(&mut rng, 30, 2).into_iter().enumerate() {
            let created_ms = now - 120_000 + i as i64 * 1_000;
            let event = testkit::providers::Event {
                id: fake.event_id(i, created_ms),
                event_type: fake.event_type().to_owned(),
                created_ms,
            };
            fake.api().add(event.clone());
            all.entry(name)
                .or_insert_with(BTreeSet::new)
                .insert(event.id.clone());
            let (headers, body) = crate::sender::signed(&receiving_sources, fake.as_ref(), receiving, &event);
            match fate {
                // Dropped on the way: never arrives.
                Fate::Dropped => {}
                Fate::Refused => {
                    let (status, answer) = deliver_raw(broken.receiver(), name, &headers, &body).await;
                    assert!(status >= 500, "{name} {}: {status} {answer}", event.id);
                    *refused.entry(name).or_default() += 1;
                }
                Fate::Delivered => {
                    let (status, answer) = deliver_raw(stack.rt.receiver(), name, &headers, &body).await;
                    assert_eq!(
                        (status, answer["status"].as_str()),
                        (200, Some("accepted")),
                        "{name}: {answer}"
                    );
                    continue;
                }
            }
            lost.entry(name)
                .or_insert_with(BTreeSet::new)
                .insert(event.id.clone());
            late.push((fake.clone(), receiving.clone(), event));
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    stack.counter.take();

    let started = Instant::now();
    let report = functions::reconciler(&stack.reconciler, deadline_in(300)).await;
    let took = started.elapsed();
    let calls = stack.counter.take();
    let events_now = stack
        .rt
        .ledger
        .list(&ListFilter {
            limit: 10_000,
            ..Default::default()
        })
        .await
        .unwrap();
    for run in &report.sources {
        let SourceRun::Ran { source, summary } = run else {
            panic!("{report:?}")
        };
        let name = source.as_str();
        let lost_here = lost.get(name).cloned().unwrap_or_default();
        assert_eq!(summary.recovered as usize, lost_here.len(), "{name}: {summary:?}");
        let stored: Vec<&inbox_core::model::Record> =
            events_now.iter().filter(|e| e.source.as_str() == name).collect();
        let ids: BTreeSet<String> = stored.iter().map(|e| e.event_id.to_string()).collect();
        assert_eq!(stored.len(), ids.len(), "{name}: an id stored twice");
        assert_eq!(&ids, &all[name], "{name}");
        let reconciled: BTreeSet<String> = stored
            .iter()
            .filter(|e| e.origin == Origin::Reconciled)
            .map(|e| e.event_id.to_string())
            .collect();
        assert_eq!(reconciled, lost_here, "{name}");
        eprintln!(
            "reconciler function (emulator), {name}: sent 30, dropped {}, answered 500 {}, recovered {}, listed {}, \
             pages {}, provider requests {}, ledger reads {}",
            lost_here.len() - refused.get(name).copied().unwrap_or(0),
            refused.get(name).copied().unwrap_or(0),
            summary.recovered,
            summary.listed,
            summary.pages,
            summary.requests,
            summary.existence_reads
        );
    }
    eprintln!(
        "reconciler function (emulator), three providers: {took:?}; AWS calls {:?}",
        ops(&calls)
    );
    // One message per event in the work queue: the webhooks' and one per recovered event.
    let queued = queued(&stack).await as usize;
    assert_eq!(queued, all.values().map(BTreeSet::len).sum::<usize>());

    // The next invocation within the interval skips every source.
    let again = functions::reconciler(&stack.reconciler, deadline_in(300)).await;
    assert!(
        again
            .sources
            .iter()
            .all(|s| matches!(s, SourceRun::Skipped { .. })),
        "{again:?}"
    );
    // The lost ones arrive late after all: duplicates, no mismatch.
    for (fake, receiving, event) in &late {
        let (headers, body) = crate::sender::signed(&receiving_sources, fake.as_ref(), receiving, event);
        let (status, answer) = deliver_raw(stack.rt.receiver(), fake.provider(), &headers, &body).await;
        assert!(
            status == 200 && crate::sender::all_duplicates(&answer),
            "{} {}: {status} {answer}",
            fake.provider(),
            event.id
        );
    }
    assert_eq!(stack.rt.metrics.total("payload_mismatch"), 0);
    assert_eq!(stack.rt.metrics.total("duplicate"), late.len() as u64);
}
