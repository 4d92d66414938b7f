//! Reconciliation on a real `inbox serve`: the server's reconciliation tasks ask a fake Stripe and a
//! fake GitHub (testkit::providers, following the providers' documented shapes) which events exist, and recover
//! those the webhook path never delivered, beside receiving; `inbox reconcile` does the same by hand.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use inbox_core::schemes::Scheme;
use serde_json::{json, Value};
use testkit::providers::{github_deliveries, stripe_events_over, FakeGithub, FakeStripe, LOOKBACK, SETTLE};

const STRIPE_SECRET: &str = "whsec_reconcile_e2e_secret";
const GITHUB_SECRET: &str = "github-reconcile-e2e-secret";
const HOUR_MS: i64 = 3_600_000;

fn sources(sink: &str) -> String {
    format!(
        "[sources.payments]\nscheme = \"stripe\"\nsecrets = [\"env:STRIPE_WEBHOOK_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{sink}/payments\", timeout = \"5s\" }}\n\
         [sources.gh]\nscheme = \"github\"\nsecrets = [\"env:GITHUB_WEBHOOK_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{sink}/gh\", timeout = \"5s\" }}\n\
         [sources.wrongkey]\nscheme = \"stripe\"\nsecrets = [\"env:STRIPE_WEBHOOK_SECRET\"]\nhandler = {{ kind = \"log\" }}\n"
    )
}

fn reconcile_blocks(stripe: &str, github: &str) -> String {
    format!(
        "[sources.payments.reconcile]\nprovider = \"stripe\"\napi_key = \"env:STRIPE_RECONCILE_KEY\"\napi_base = \"{stripe}\"\n\
         [sources.gh.reconcile]\nprovider = \"github\"\nhook = \"repos/octo-org/shop/hooks/12345\"\n\
         token = \"env:GITHUB_RECONCILE_TOKEN\"\napi_base = \"{github}\"\n\
         [sources.wrongkey.reconcile]\nprovider = \"stripe\"\napi_key = \"env:WRONG_RECONCILE_KEY\"\napi_base = \"{stripe}\"\n"
    )
}

fn stored_ids(app: &App, source: &str) -> BTreeSet<String> {
    app.events()
        .iter()
        .filter(|e| e["source"] == source)
        .map(|e| str_field(e, "event_id"))
        .collect()
}

fn stripe_body(id: &str, created: i64) -> String {
    json!({"id": id, "object": "event", "type": "invoice.paid", "created": created, "data": {"object": {}}})
        .to_string()
}

/// The ids of `(id, created ms)` inside the default window `[now − 72h, now − 5m)`.
fn in_window<'a>(items: impl Iterator<Item = (&'a str, i64)>) -> BTreeSet<String> {
    let now = inbox_core::time::now_ms();
    let (from, to) = (now - LOOKBACK.as_millis() as i64, now - SETTLE.as_millis() as i64);
    items
        .filter(|(_, at)| from <= *at && *at < to)
        .map(|(id, _)| id.to_owned())
        .collect()
}

/// GIVEN a fake Stripe with 260 events over 80 hours and a fake GitHub with 150 GUIDs (300 deliveries, some
/// failed) over 80 hours, of which some were delivered as signed webhooks while the server ran without
/// reconciliation, and a third source whose API key the provider refuses
/// WHEN the server restarts with the reconcile blocks
/// THEN each source's ledger holds exactly the events created in the window plus those delivered, each forwarded
/// once; GitHub events carry their event name as type; a webhook arriving afterwards for a recovered id is a
/// duplicate with no mismatch counted; the refused source is named in the log (never its key) and stops nothing;
/// and `inbox reconcile --dry-run` then finds nothing left to recover.
#[tokio::test(flavor = "multi_thread")]
async fn inbox_serve_recovers_what_the_webhook_path_never_delivered() {
    let sink = Sink::start(&[], 200).await;
    let stripe_events = stripe_events_over(260, 80 * HOUR_MS, "rc");
    let stripe = FakeStripe::new(stripe_events.clone());
    let stripe_url = stripe.start().await;
    let deliveries = github_deliveries(150, 80 * HOUR_MS);
    let github = FakeGithub::new(deliveries.clone(), false);
    let github_url = github.start().await;
    let wrong_key = "sk_test_wrong_key_must_never_be_logged";
    let env = [
        ("STRIPE_WEBHOOK_SECRET", STRIPE_SECRET),
        ("GITHUB_WEBHOOK_SECRET", GITHUB_SECRET),
        ("STRIPE_RECONCILE_KEY", stripe.key.as_str()),
        ("GITHUB_RECONCILE_TOKEN", github.token.as_str()),
        ("WRONG_RECONCILE_KEY", wrong_key),
    ];
    let mut app = spawn_app(&sources(&sink.url()), &env);

    // Some events arrive as webhooks first: every 3rd Stripe event, every 4th GitHub GUID.
    let stripe_signer = Signer::new(Scheme::Stripe, STRIPE_SECRET);
    let mut delivered_stripe = BTreeSet::new();
    for (id, created, _) in stripe_events.iter().step_by(3) {
        let body = stripe_body(id, *created);
        let a = post(
            &client(),
            &app.webhook_url("payments"),
            body.clone(),
            &stripe_signer.headers(body.as_bytes(), id, None),
        )
        .await;
        assert_eq!(a.json["status"], "accepted", "{}", a.text);
        delivered_stripe.insert(id.clone());
    }
    let github_signer = Signer::new(Scheme::Github, GITHUB_SECRET);
    let guids: BTreeSet<String> = deliveries.iter().map(|d| d.guid.clone()).collect();
    let mut delivered_github = BTreeSet::new();
    for guid in guids.iter().step_by(4) {
        let body = json!({"action": "opened", "guid": guid}).to_string();
        let a = post(
            &client(),
            &app.webhook_url("gh"),
            body.clone(),
            &github_signer.headers(body.as_bytes(), guid, Some("issues")),
        )
        .await;
        assert_eq!(a.json["status"], "accepted", "{}", a.text);
        delivered_github.insert(guid.clone());
    }

    // The restart with reconciliation on.
    app.write_config(&format!(
        "[server]\ndata_dir = {:?}\n{}{}",
        app.data_dir().display().to_string(),
        sources(&sink.url()),
        reconcile_blocks(&stripe_url, &github_url)
    ));
    // Once the delivered events are forwarded, a graceful stop: a SIGKILL in the middle of a forward would run
    // that handler again after the restart (at least once, by design), and this test counts forwards.
    let delivered = delivered_stripe.len() + delivered_github.len();
    wait_until(Duration::from_secs(30), "the delivered events forwarded", || {
        sink.count() >= delivered
    });
    app.terminate();
    app.restart();

    let mut want_stripe = in_window(
        stripe_events
            .iter()
            .map(|(id, created, _)| (id.as_str(), created * 1000)),
    );
    want_stripe.extend(delivered_stripe.iter().cloned());
    let first_delivery = |guid: &str| {
        deliveries
            .iter()
            .filter(|d| d.guid == guid)
            .map(|d| d.at_ms)
            .min()
            .unwrap_or(0)
    };
    let mut want_github = in_window(guids.iter().map(|g| (g.as_str(), first_delivery(g))));
    want_github.extend(delivered_github.iter().cloned());
    wait_until(Duration::from_secs(60), "both sources reconciled", || {
        stored_ids(&app, "payments") == want_stripe && stored_ids(&app, "gh") == want_github
    });
    let total = want_stripe.len() + want_github.len();
    wait_until(Duration::from_secs(60), "every stored event forwarded", || {
        sink.count() >= total
    });
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Each forwarded once.
    let mut forwarded = std::collections::BTreeMap::<String, usize>::new();
    for r in sink.requests() {
        *forwarded
            .entry(r.header("x-inbox-event-id").unwrap_or_default())
            .or_default() += 1;
    }
    assert_eq!(forwarded.len(), total, "forwarded ids");
    assert!(forwarded.values().all(|n| *n == 1), "an event forwarded twice");

    // Origins and types.
    let events = app.events();
    let recovered: Vec<&Value> = events.iter().filter(|e| e["origin"] == "reconciled").collect();
    let recovered_stripe = want_stripe.len() - delivered_stripe.len();
    let recovered_github = want_github.len()
        - delivered_github
            .iter()
            .filter(|g| want_github.contains(*g))
            .count();
    assert_eq!(recovered.len(), recovered_stripe + recovered_github, "recovered");
    for e in recovered.iter().filter(|e| e["source"] == "gh") {
        let guid = str_field(e, "event_id");
        let name = deliveries
            .iter()
            .find(|d| d.guid == guid)
            .map(|d| d.event.clone());
        assert_eq!(e["event_type"].as_str().map(str::to_owned), name, "{e}");
    }
    eprintln!(
        "reconcile e2e: stripe {} stored ({} delivered, {} recovered, {} API requests); github {} stored ({} delivered, \
         {} recovered, {} API requests)",
        want_stripe.len(), delivered_stripe.len(), recovered_stripe, stripe.requests(),
        want_github.len(), delivered_github.len(), recovered_github, github.requests.load(std::sync::atomic::Ordering::SeqCst)
    );

    // A webhook for a recovered id, later: a duplicate, with no mismatch although its bytes differ.
    let late = recovered
        .iter()
        .find(|e| e["source"] == "payments")
        .map(|e| str_field(e, "event_id"))
        .unwrap();
    let body = stripe_body(&late, 1);
    let a = post(
        &client(),
        &app.webhook_url("payments"),
        body.clone(),
        &stripe_signer.headers(body.as_bytes(), &late, None),
    )
    .await;
    assert_eq!(a.json["status"], "duplicate", "{}", a.text);
    let metrics = get(&client(), &format!("{}/metrics", app.url())).await.text;
    assert!(
        metrics.contains("inbox_payload_mismatch_total{source=\"payments\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "inbox_reconciled_total{{source=\"payments\"}} {recovered_stripe}"
        )),
        "{metrics}"
    );

    // The refused key: named, never shown, stopping nothing.
    let log = app.log();
    assert!(
        log.contains("reconcile wrongkey: the stripe API refused the credentials"),
        "{log}"
    );
    assert!(!log.contains(wrong_key), "a credential in the log");
    assert!(
        !log.contains(stripe.key.as_str()) && !log.contains(github.token.as_str()),
        "a credential in the log"
    );

    // By hand: nothing left, in a dry run, and the summary as JSON.
    let out = Command::new(INBOX)
        .args(["reconcile", "--config"])
        .arg(app.config_path())
        .args(["--source", "payments", "--since", "72h", "--dry-run", "--json"])
        .envs(env)
        .env("INBOX_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["recovered"], 0, "{summary}");
    assert_eq!(
        summary["listed"].as_u64(),
        Some(in_window(stripe_events.iter().map(|(id, c, _)| (id.as_str(), c * 1000))).len() as u64),
        "{summary}"
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains(stripe.key.as_str()));
    let wrong = Command::new(INBOX)
        .args(["reconcile", "--config"])
        .arg(app.config_path())
        .args(["--source", "wrongkey"])
        .envs(env)
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("wrongkey") && !err.contains(wrong_key), "{err}");
}

/// GIVEN a real config with retention_days = 1 and a GitHub reconcile block within it (lookback 24h), on a running
/// server
/// WHEN `inbox reconcile --since 48h` is asked for
/// THEN it is refused, naming `--since` and `retention_days`, before any request to the provider or any write;
/// and `--since 24h` runs.
#[tokio::test(flavor = "multi_thread")]
async fn inbox_reconcile_refuses_a_since_longer_than_retention() {
    let github = FakeGithub::new(github_deliveries(5, 12 * HOUR_MS), false);
    let github_url = github.start().await;
    let sources = format!(
        "[sources.gh]\nscheme = \"github\"\nsecrets = [\"env:GITHUB_WEBHOOK_SECRET\"]\nhandler = {{ kind = \"log\" }}\n\
         [sources.gh.reconcile]\nprovider = \"github\"\nhook = \"repos/octo-org/shop/hooks/12345\"\n\
         token = \"env:GITHUB_RECONCILE_TOKEN\"\napi_base = \"{github_url}\"\nlookback = \"24h\"\n"
    );
    let env = [
        ("GITHUB_WEBHOOK_SECRET", GITHUB_SECRET),
        ("GITHUB_RECONCILE_TOKEN", github.token.as_str()),
    ];
    let app = spawn_app(&format!("retention_days = 1\n{sources}"), &env);
    // The command finds the server's store through the config, as an operator's would.
    app.write_config(&format!(
        "retention_days = 1\n[server]\ndata_dir = {:?}\n{sources}",
        app.data_dir().display().to_string()
    ));
    // The server's own first run (a moment after start), so that nothing else asks the fake meanwhile.
    wait_until(Duration::from_secs(30), "the server's first run", || {
        app.log().contains("reconciliation run done")
    });
    let asked = github.requests.load(std::sync::atomic::Ordering::SeqCst);
    let reconcile = |since: &str| {
        Command::new(INBOX)
            .args(["reconcile", "--config"])
            .arg(app.config_path())
            .args(["--source", "gh", "--since", since, "--dry-run", "--json"])
            .envs(env)
            .env("INBOX_LOG", "warn")
            .output()
            .unwrap()
    };
    let out = reconcile("48h");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("--since 48h") && err.contains("retention_days (1)"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no summary for a refused run");
    assert_eq!(
        github.requests.load(std::sync::atomic::Ordering::SeqCst),
        asked,
        "the refused command asked the provider"
    );
    eprintln!("{}", err.trim());
    let out = reconcile("24h");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["listed"], 5, "{summary}");
}

/// GIVEN a fake GitHub with 20 events over 24 hours, none delivered as webhooks, of which two older ones cannot be
/// had: one delivery's detail answers 404, another's carries no payload
/// WHEN `inbox serve` reconciles (every 2 s)
/// THEN the other 18 are recovered and forwarded, the two are logged with their ids and do not stop the runs, and
/// once GitHub serves them a later run recovers both (far below its window: from the failed ids the checkpoint
/// kept), each forwarded once.
#[tokio::test(flavor = "multi_thread")]
async fn inbox_serve_keeps_the_events_it_could_not_recover_and_recovers_them_later() {
    let sink = Sink::start(&[], 200).await;
    let deliveries = github_deliveries(20, 24 * HOUR_MS);
    let github = FakeGithub::new(deliveries.clone(), false);
    let github_url = github.start().await;
    let mut guids: Vec<String> = Vec::new();
    for d in &deliveries {
        if !guids.contains(&d.guid) {
            guids.push(d.guid.clone());
        }
    }
    let (gone, empty) = (guids[12].clone(), guids[16].clone());
    let ids = |guid: &str| {
        deliveries
            .iter()
            .filter(|d| d.guid == guid)
            .map(|d| d.id)
            .collect::<Vec<_>>()
    };
    github.missing.lock().unwrap().extend(ids(&gone));
    github.without_payload.lock().unwrap().extend(ids(&empty));
    let config = format!(
        "[sources.gh]\nscheme = \"github\"\nsecrets = [\"env:GITHUB_WEBHOOK_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/gh\", timeout = \"5s\" }}\n\
         [sources.gh.reconcile]\nprovider = \"github\"\nhook = \"repos/octo-org/shop/hooks/12345\"\n\
         token = \"env:GITHUB_RECONCILE_TOKEN\"\napi_base = \"{github_url}\"\ninterval = \"2s\"\n",
        sink.url()
    );
    let env = [
        ("GITHUB_WEBHOOK_SECRET", GITHUB_SECRET),
        ("GITHUB_RECONCILE_TOKEN", github.token.as_str()),
    ];
    let app = spawn_app(&config, &env);

    let all: BTreeSet<String> = guids.iter().cloned().collect();
    let mut others = all.clone();
    others.remove(&gone);
    others.remove(&empty);
    wait_until(Duration::from_secs(30), "the 18 others recovered", || {
        stored_ids(&app, "gh") == others
    });
    wait_until(Duration::from_secs(30), "both failures logged twice", || {
        let log = app.log();
        log.matches(gone.as_str()).count() >= 2 && log.matches(empty.as_str()).count() >= 2
    });
    let log = app.log();
    assert!(log.contains("could not store an event"), "{log}");
    assert!(log.contains("404") && log.contains("no request payload"), "{log}");
    assert!(
        !log.contains("reconciliation run failed"),
        "one bad item ended a run: {log}"
    );
    assert_eq!(stored_ids(&app, "gh"), others, "stored while failing");

    github.missing.lock().unwrap().clear();
    github.without_payload.lock().unwrap().clear();
    wait_until(Duration::from_secs(30), "the two recovered", || {
        stored_ids(&app, "gh") == all
    });
    wait_until(Duration::from_secs(30), "all forwarded", || sink.count() >= 20);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut forwarded = std::collections::BTreeMap::<String, usize>::new();
    for r in sink.requests() {
        *forwarded
            .entry(r.header("x-inbox-event-id").unwrap_or_default())
            .or_default() += 1;
    }
    assert_eq!(forwarded.keys().cloned().collect::<BTreeSet<_>>(), all);
    assert!(
        forwarded.values().all(|n| *n == 1),
        "forwarded twice: {forwarded:?}"
    );
    for g in [&gone, &empty] {
        let e = app.event("gh", g).unwrap();
        assert_eq!(e["origin"], "reconciled", "{e}");
    }
    assert!(
        !app.log().contains(github.token.as_str()),
        "a credential in the log"
    );
}

/// GIVEN a Stripe source with a reconcile block (a fake Stripe listing 40 events over 80 hours), configured before
/// any webhook arrived: its data directory exists and is empty, no `inbox serve` has run
/// WHEN `inbox reconcile --source payments --dry-run` checks the credentials
/// THEN it succeeds and reports every event listed in the window as one it would recover, and the directory is
/// still empty; a real run then creates the ledger there (as `inbox serve` would) and recovers them; and pointed at
/// a data directory that does not exist, either run fails naming the directory and creates nothing.
#[tokio::test(flavor = "multi_thread")]
async fn inbox_reconcile_dry_run_on_an_empty_data_directory_reports_what_it_would_recover() {
    let events = stripe_events_over(40, 80 * HOUR_MS, "fresh");
    let stripe = FakeStripe::new(events.clone());
    let stripe_url = stripe.start().await;
    let want = in_window(
        events
            .iter()
            .map(|(id, created, _)| (id.as_str(), created * 1000)),
    )
    .len() as u64;
    assert!(want > 0, "some events fall in the window");
    let dir = tempfile::tempdir().unwrap();
    let source = format!(
        "[sources.payments]\nscheme = \"stripe\"\nsecrets = [\"env:STRIPE_WEBHOOK_SECRET\"]\nhandler = {{ kind = \"log\" }}\n\
         [sources.payments.reconcile]\nprovider = \"stripe\"\napi_key = \"env:STRIPE_RECONCILE_KEY\"\napi_base = \"{stripe_url}\"\n"
    );
    let env = [
        ("STRIPE_WEBHOOK_SECRET", STRIPE_SECRET),
        ("STRIPE_RECONCILE_KEY", stripe.key.as_str()),
    ];
    let reconcile = |data_dir: &std::path::Path, dry_run: bool| {
        let config = dir.path().join("inbox.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\ndata_dir = {:?}\n{source}",
                data_dir.display().to_string()
            ),
        )
        .unwrap();
        let mut cmd = Command::new(INBOX);
        cmd.args(["reconcile", "--config"])
            .arg(&config)
            .args(["--source", "payments", "--json"])
            .envs(env)
            .env("INBOX_LOG", "warn");
        if dry_run {
            cmd.arg("--dry-run");
        }
        cmd.output().unwrap()
    };
    let listing = |d: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };

    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let out = reconcile(&data, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            summary["listed"].as_u64(),
            summary["present"].as_u64(),
            summary["recovered"].as_u64()
        ),
        (Some(want), Some(0), Some(want)),
        "{summary}"
    );
    assert_eq!(summary["dry_run"], true, "{summary}");
    assert_eq!(listing(&data), Vec::<String>::new(), "a dry run created files");

    let out = reconcile(&data, false);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["recovered"].as_u64(), Some(want), "{summary}");
    assert!(data.join("inbox.db").exists(), "the real run made no ledger");

    let missing = dir.path().join("no-such-dir");
    for dry_run in [true, false] {
        let out = reconcile(&missing, dry_run);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "dry run {dry_run}: {err}");
        assert!(
            err.contains(&missing.display().to_string()),
            "dry run {dry_run}: the directory is not named: {err}"
        );
        assert!(
            !missing.exists(),
            "dry run {dry_run}: the missing directory was created"
        );
        eprintln!("{}", err.trim());
    }
}
