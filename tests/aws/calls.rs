//! IAM proven by calls: every path of every function against the emulator, each function's calls against what its
//! role in the template grants (`iam.rs`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsMessage;
use inbox_core::aws::functions;
use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::{config_from, AwsSecrets, Clients, ReconcilerRuntime, Runtime};
use inbox_core::config::Config;
use inbox_core::handlers::{http_client, Registry};
use inbox_core::model::{EventId, EventKey, SourceName, Status};
use inbox_core::ports::{Claim, Ledger, Settlement};
use inbox_core::schemes::{Identity, Scheme};
use inbox_core::secrets::{LocalSecrets, SecretResolver};
use testkit::calls::CallCounter;
use testkit::providers::{stripe_events_over, FakeStripe};

use crate::iam;
use crate::reconcile::{deadline_in, STRIPE_KEY};
use crate::stack::{
    batch, counted_clients, deliver_as, deliver_signed, emulator, key, noise, prefix, process_batch, receive,
    record, stripe_body, Switch, SECRET,
};

/// One function's clients, every AWS call it makes counted by `counter`: DynamoDB, SQS, S3, SNS, and SSM and
/// Secrets Manager through its secret store.
fn every_call_counted(sdk: &aws_config::SdkConfig, counter: &CallCounter) -> (Clients, AwsSecrets) {
    let clients = Clients {
        s3: inbox_core::aws::s3::S3Payloads::config(sdk)
            .to_builder()
            .interceptor(counter.clone())
            .build(),
        sns: aws_sdk_sns::config::Builder::from(sdk)
            .interceptor(counter.clone())
            .build(),
        ..counted_clients(sdk, counter)
    };
    let ssm = aws_sdk_ssm::Client::from_conf(
        aws_sdk_ssm::config::Builder::from(sdk)
            .interceptor(counter.clone())
            .build(),
    );
    let secrets = aws_sdk_secretsmanager::Client::from_conf(
        aws_sdk_secretsmanager::config::Builder::from(sdk)
            .interceptor(counter.clone())
            .build(),
    );
    (clients, AwsSecrets::with_clients(sdk, ssm, secrets))
}

/// IAM proven by calls. Every path of every function runs against the emulator as deployed
/// (config in SSM, secrets in Secrets Manager and SSM, each function with its own counted clients); then each
/// function's calls must be granted by its role in `infra/template.yaml`, and its role must grant nothing it never
/// called (what Lambda, KMS and the event source mappings use on its behalf aside: `iam::NOT_CALLED_BY_CODE`).
#[tokio::test(flavor = "multi_thread")]
async fn each_function_calls_exactly_what_its_role_grants() {
    let Some(sdk) = emulator().await else { return };
    let p = prefix();
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let sm = aws_sdk_secretsmanager::Client::new(&sdk);
    let secure = |name: String, value: &str| {
        let (ssm, value) = (ssm.clone(), value.to_owned());
        async move {
            ssm.put_parameter()
                .name(name)
                .value(value)
                .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
                .send()
                .await
                .unwrap();
        }
    };
    for (name, value) in [
        (format!("{p}/stripe"), SECRET),
        (format!("{p}/stripe-key"), STRIPE_KEY),
    ] {
        sm.create_secret()
            .name(name)
            .secret_string(value)
            .send()
            .await
            .unwrap();
    }
    secure(format!("/{p}/gh"), "gh-secret").await;
    secure(format!("/{p}/stripe-b-key"), STRIPE_KEY).await;
    let fake = FakeStripe::new(stripe_events_over(3, 3_600_000, &format!("{p}iam")));
    let big_id = fake.events.lock().unwrap()[0].0.clone();
    fake.padding.lock().unwrap().insert(big_id, noise(600 * 1024));
    let api = fake.start().await;
    let config_text = format!(
        "[retry]\nbase = \"100ms\"\ncap = \"200ms\"\nmax_attempts = 2\n[sweeper]\ngrace = \"0\"\n\
         [sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"secretsmanager:{p}/stripe\"]\nmax_body_bytes = 1048576\n\
         handler = {{ kind = \"custom\", name = \"switch\", timeout = \"5s\" }}\n\
         [sources.stripe.reconcile]\nprovider = \"stripe\"\napi_key = \"secretsmanager:{p}/stripe-key\"\napi_base = \"{api}\"\n\
         [sources.stripe-b]\nscheme = \"stripe\"\nsecrets = [\"secretsmanager:{p}/stripe\"]\n\
         handler = {{ kind = \"log\" }}\n\
         [sources.stripe-b.reconcile]\nprovider = \"stripe\"\napi_key = \"ssm:/{p}/stripe-b-key\"\napi_base = \"{api}\"\n\
         [sources.gh]\nscheme = \"github\"\nsecrets = [\"ssm:/{p}/gh\"]\nhandler = {{ kind = \"log\" }}\n"
    );
    ssm.put_parameter()
        .name(format!("/{p}/config"))
        .value(config_text)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let resources = create_stack(&sdk, &p, QueueSettings::default()).await.unwrap();
    let switch = Arc::new(Switch::default());
    let counters: HashMap<&str, CallCounter> = iam::FUNCTIONS
        .iter()
        .map(|(f, _)| (*f, CallCounter::default()))
        .collect();
    // Each function starts as on Lambda: its config from SSM, the receiver also its secrets.
    let start = |function: &'static str| {
        let (sdk, p, resources, switch) = (sdk.clone(), p.clone(), resources.clone(), switch.clone());
        let counter = counters[function].clone();
        async move {
            let (clients, secrets) = every_call_counted(&sdk, &counter);
            let config = config_from(None, Some(format!("/{p}/config")), &secrets)
                .await
                .unwrap();
            let registry = Registry::new(http_client()).register("switch", switch);
            let reads_secrets = function == "receiver";
            Runtime::new(
                clients,
                reads_secrets.then_some(&secrets as &dyn SecretResolver),
                resources,
                config,
                registry,
            )
            .await
            .unwrap()
        }
    };
    let receiver_rt = start("receiver").await;
    let receiver = receiver_rt.receiver();
    let processor = start("processor").await;
    let alarm = start("alarm").await;
    let sweeper = start("sweeper").await;
    // The test's own view of the stack, uncounted.
    std::env::set_var("AWS_TEST_SOURCE_SECRET", SECRET);
    let test_side = Runtime::new(
        Clients::new(&sdk),
        Some(&LocalSecrets),
        resources.clone(),
        Config::from_toml(
            "[sweeper]\ngrace = \"0\"\n\
             [sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:AWS_TEST_SOURCE_SECRET\"]\nhandler = { kind = \"log\" }\n\
             [sources.gh]\nscheme = \"github\"\nsecrets = [\"env:AWS_TEST_SOURCE_SECRET\"]\nhandler = { kind = \"log\" }\n"
        )
        .unwrap(),
        Registry::new(http_client()),
    )
    .await
    .unwrap();
    let queue_sqs = aws_sdk_sqs::Client::new(&sdk);
    let work_queue = resources.queue_url.clone();
    let take_messages = || {
        let (sqs, url) = (queue_sqs.clone(), work_queue.clone());
        async move { receive(&sqs, &url, 1).await }
    };

    // The receiver: new events (one body large enough for S3), a duplicate, a GitHub delivery (a body marker in
    // the same transaction), and a bad signature.
    let big = serde_json::json!({"id": format!("evt_{p}_big"), "object": "event", "type": "t", "pad": noise(600 * 1024)})
        .to_string();
    for body in [
        stripe_body(&format!("evt_{p}_ok")),
        stripe_body(&format!("evt_{p}_ok")),
        big,
    ] {
        let (status, answer) = deliver_signed(receiver.clone(), SECRET, &body).await;
        assert_eq!(status, 200, "{answer}");
    }
    let gh_body = serde_json::json!({"action": "opened", "n": p}).to_string();
    let delivery = Identity {
        event_id: format!("{p}-delivery"),
        event_type: Some("pull_request".into()),
    };
    let (status, answer) = deliver_as(
        receiver.clone(),
        Scheme::Github,
        "gh",
        delivery,
        "gh-secret",
        &gh_body,
    )
    .await;
    assert_eq!(
        (status, answer["status"].as_str()),
        (200, Some("accepted")),
        "{answer}"
    );
    let (status, _) = deliver_signed(
        receiver.clone(),
        "wrong",
        &stripe_body(&format!("evt_{p}_forged")),
    )
    .await;
    assert_eq!(status, 401);

    // The processor: each of them completed (the large body read from S3).
    let process = |records: Vec<SqsMessage>| process_batch(&processor, &queue_sqs, records);
    let mut completed = 0;
    while completed < 3 {
        let records = take_messages().await;
        completed += records.len();
        assert_eq!(process(records).await, 0);
    }
    // … and one that fails until its budget (2 attempts) is spent: a retry wait, then DEAD and its alarm.
    switch.failing.store(true, Ordering::SeqCst);
    let (status, _) = deliver_signed(receiver.clone(), SECRET, &stripe_body(&format!("evt_{p}_fail"))).await;
    assert_eq!(status, 200);
    let fail = EventKey::new(
        SourceName::parse("stripe").unwrap(),
        EventId::parse(&format!("evt_{p}_fail")).unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(30);
    while test_side.ledger.get(&fail).await.unwrap().map(|e| e.status) != Some(Status::Dead) {
        assert!(Instant::now() < until, "not DEAD");
        process(take_messages().await).await;
    }
    switch.failing.store(false, Ordering::SeqCst);

    // The alarm function: a message redriven to the DLQ (a body in S3, kept before the alarm is recorded).
    let big_body = |id: String| {
        serde_json::json!({"id": id, "object": "event", "type": "t", "pad": noise(600 * 1024)}).to_string()
    };
    let (status, _) = deliver_signed(receiver.clone(), SECRET, &big_body(format!("evt_{p}_dlq"))).await;
    assert_eq!(status, 200);
    let redriven = take_messages().await;
    assert_eq!(redriven.len(), 1);
    let response = functions::alarm(&alarm, batch(redriven)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    // The sweeper: a RECEIVED event whose enqueue failed, a dead event whose alarm did not go out (its body in S3),
    // and a completed one whose worker died before its body's countdown.
    test_side
        .ledger
        .create(record(&format!("evt_{p}_lost")))
        .await
        .unwrap();
    let crashed = key(&format!("evt_{p}_crashed"));
    test_side
        .ledger
        .create_announced(inbox_core::model::NewEvent {
            key: crashed.clone(),
            payload: bytes::Bytes::from(big_body(format!("evt_{p}_crashed"))),
            ..record(&format!("evt_{p}_crashed"))
        })
        .await
        .unwrap();
    let claimed = test_side
        .ledger
        .claim(&crashed, "died", Duration::from_millis(1))
        .await
        .unwrap();
    assert!(matches!(claimed, Claim::Claimed(_)), "{claimed:?}");
    let completed = Settlement::Completed {
        retention: Duration::from_secs(30 * 86_400),
    };
    test_side
        .ledger
        .settle(&crashed, "died", completed)
        .await
        .unwrap();
    let unannounced = big_body(format!("evt_{p}_unannounced"));
    let (status, _) = deliver_signed(test_side.receiver(), SECRET, &unannounced).await;
    assert_eq!(status, 200);
    let unannounced = EventKey::new(
        SourceName::parse("stripe").unwrap(),
        EventId::parse(&format!("evt_{p}_unannounced")).unwrap(),
    );
    test_side
        .ledger
        .mark_dead(&unannounced, "for the sweeper's alarm")
        .await
        .unwrap();
    let report = functions::sweeper(&sweeper).await.unwrap();
    assert!(report.received >= 1 && report.alarms >= 1, "{report:?}");

    // The reconciler: two sources (keys in Secrets Manager and SSM), one listed event too large for a record.
    let (clients, secrets) = every_call_counted(&sdk, &counters["reconciler"]);
    let config = config_from(None, Some(format!("/{p}/config")), &secrets)
        .await
        .unwrap();
    let reconciler = ReconcilerRuntime::new(&clients, Arc::new(secrets), &resources, &config);
    let report = functions::reconciler(&reconciler, deadline_in(120)).await;
    assert!(report.failed().is_empty(), "{report:?}");

    // THEN each function called only what its role grants, and its role grants nothing it never called.
    let granted = iam::granted();
    let mut table = Vec::new();
    for (function, _) in iam::FUNCTIONS {
        let calls = counters[function].take();
        let called = iam::actions_of(&calls);
        let grants = &granted[function];
        for action in called.union(grants) {
            table.push(format!(
                "| {function} | `{action}` | {} | {} |",
                if called.contains(action) { "called" } else { "-" },
                if grants.contains(action) {
                    "granted"
                } else {
                    "**not granted**"
                }
            ));
        }
        let ungranted: Vec<_> = called.difference(grants).collect();
        let unused: Vec<_> = grants
            .difference(&called)
            .filter(|a| !iam::NOT_CALLED_BY_CODE.contains(&a.as_str()))
            .collect();
        eprintln!("{function}: calls {calls:?}");
        assert!(
            ungranted.is_empty(),
            "{function} calls what its role does not grant: {ungranted:?}"
        );
        assert!(
            unused.is_empty(),
            "{function}'s role grants what it never calls: {unused:?}"
        );
    }
    eprintln!(
        "| function | action | called | granted |\n| --- | --- | --- | --- |\n{}",
        table.join("\n")
    );
}
