//! Routes and destinations, end to end: a named destination behind a route runs like a source's handler (its own
//! headers sent, `Idempotency-Key` unchanged); routing this release cannot run yet stops the start naming the
//! route; `inbox routes test` judges stored events and files, naming the first false clause.

use crate::common::*;
use inbox_core::schemes::Scheme;
use serde_json::{json, Value};

const SECRET: &str = "whsec_routes_test_secret";

/// The one route this release runs per source: stripe to the named destination `billing`.
fn single(sink: &str) -> String {
    format!(
        r#"[sources.stripe]
scheme = "stripe"
secrets = ["env:STRIPE_SECRET"]
[destinations.billing]
kind = "forward"
url = "{sink}/billing"
timeout = "5s"
headers = {{ "X-Team" = "billing" }}
[routes.billing]
from = "stripe"
to = "billing"
"#
    )
}

/// [`single`] grown to the issue's example: two sources, four destinations, filters on the type and on a body field,
/// and `*` to a sink. Served, it is refused today; `inbox routes test` reads it in full.
fn routed(sink: &str) -> String {
    format!(
        r#"{}[sources.github]
scheme = "github"
secrets = ["env:GITHUB_SECRET"]
[destinations.finance]
kind = "forward"
url = "{sink}/finance"
[destinations.analytics]
kind = "log"
[destinations.ci]
kind = "forward"
url = "{sink}/ci"
[routes.invoices]
from = "stripe"
to = "finance"
filter = 'event_type.startsWith("invoice.") && body.data.object.currency == "usd"'
[routes.everything]
from = "*"
to = "analytics"
[routes.pushes]
from = "github"
to = "ci"
filter = 'event_type == "push"'
"#,
        single(sink)
    )
}

async fn send_stripe(app: &App, id: &str, event_type: &str, currency: &str) {
    let signer = Signer::new(Scheme::Stripe, SECRET);
    let body = json!({"id": id, "type": event_type, "data": {"object": {"currency": currency}}}).to_string();
    let a = post(
        &client(),
        &app.webhook_url("stripe"),
        body.clone(),
        &signer.headers(body.as_bytes(), id, Some(event_type)),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["status"], "accepted", "{}", a.text);
}

/// GIVEN a source with no handler, taken by one route to a named `forward` destination with a header of its own
/// WHEN an event arrives
/// THEN the destination receives it once, with its header and the usual `Idempotency-Key: stripe:ID`
#[tokio::test(flavor = "multi_thread")]
async fn a_route_to_a_named_destination_forwards_with_its_headers() {
    let sink = Sink::start(&[], 200).await;
    let app = spawn_app(&single(&sink.url()), &[("STRIPE_SECRET", SECRET)]);
    let id = rand_id("evt");
    send_stripe(&app, &id, "invoice.paid", "usd").await;
    app.wait_all_completed(1, std::time::Duration::from_secs(20), "the routed event");
    let got = sink.requests();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].path, "/billing");
    assert_eq!(got[0].header("x-team").as_deref(), Some("billing"));
    assert_eq!(got[0].header("idempotency-key"), Some(format!("stripe:{id}")));
}

/// GIVEN the issue's config: several routes per source, filtered ones among them
/// WHEN `inbox serve` starts on it
/// THEN it stops at once, naming the route it cannot run yet, and binds nothing
#[tokio::test(flavor = "multi_thread")]
async fn routing_this_release_cannot_run_stops_the_start_naming_the_route() {
    let (status, output) = serve_fails(
        &routed("http://127.0.0.1:9"),
        &[("STRIPE_SECRET", SECRET), ("GITHUB_SECRET", SECRET)],
        &[],
    );
    assert!(!status.success());
    assert!(output.contains("routes.pushes"), "{output}");
    assert!(output.contains("does not run yet"), "{output}");
    let (status, output) = serve_fails(
        &format!(
            "{}[routes.typo]\nfrom = \"stripe\"\nto = \"billing\"\nfilter = 'event_type == \"a\" && bdy.x == 1'\n",
            routed("http://127.0.0.1:9")
        ),
        &[("STRIPE_SECRET", SECRET), ("GITHUB_SECRET", SECRET)],
        &[],
    );
    assert!(!status.success());
    assert!(
        output.contains("routes.typo.filter: line 1, column 22"),
        "{output}"
    );
}

fn routes_test(config: &std::path::Path, args: &[&str]) -> Value {
    let out = std::process::Command::new(INBOX)
        .args(["routes", "test", "--json", "--config"])
        .arg(config)
        .args(args)
        .output()
        .expect("run inbox routes test");
    assert!(
        out.status.success(),
        "inbox routes test {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// GIVEN events stored by a running server, and the issue's routes in a config beside it
/// WHEN `inbox routes test` judges them, stored and from files
/// THEN each verdict is the filter's, with the first false clause named, and a route that does not take the
///      source says so
#[tokio::test(flavor = "multi_thread")]
async fn routes_test_judges_stored_events_and_files() {
    let sink = Sink::start(&[], 200).await;
    let app = spawn_app(&single(&sink.url()), &[("STRIPE_SECRET", SECRET)]);
    let (paid_usd, paid_eur) = (rand_id("evt"), rand_id("evt"));
    send_stripe(&app, &paid_usd, "invoice.paid", "usd").await;
    send_stripe(&app, &paid_eur, "invoice.paid", "eur").await;
    let config = app.data_dir().with_file_name("routed.toml");
    std::fs::write(&config, routed(&sink.url())).expect("write the routed config");
    let data_dir = app.data_dir().to_str().expect("a UTF-8 path").to_owned();

    let stored = |route: &str, id: &str| {
        let event = format!("stripe/{id}");
        routes_test(&config, &[route, "--event", &event, "--data-dir", &data_dir])
    };
    let v = stored("invoices", &paid_usd);
    assert_eq!(v["verdict"], "matched", "{v}");
    let v = stored("invoices", &paid_eur);
    assert_eq!(v["verdict"], "filtered", "{v}");
    assert_eq!(v["false_clause"], "body.data.object.currency == \"usd\"", "{v}");
    let v = stored("pushes", &paid_eur);
    assert_eq!(v["verdict"], "not-taken", "{v}");

    let body = app.data_dir().with_file_name("push.json");
    std::fs::write(&body, br#"{"ref":"refs/heads/main"}"#).expect("write a body");
    let body = body.to_str().expect("a UTF-8 path");
    // A GitHub delivery of `event`, from the file, with the headers GitHub's scheme reads.
    let github = |event: &str, n: u32| {
        let (kind, delivery) = (
            format!("X-GitHub-Event: {event}"),
            format!("X-GitHub-Delivery: 7f3e0c1a-0000-4000-8000-00000000000{n}"),
        );
        let args = [
            "pushes", "--file", body, "--source", "github", "--header", &kind, "--header", &delivery,
        ];
        routes_test(&config, &args)
    };
    assert_eq!(github("push", 1)["verdict"], "matched");
    let v = github("issues", 2);
    assert_eq!(
        (v["verdict"].as_str(), v["event_type"].as_str()),
        (Some("filtered"), Some("issues")),
        "{v}"
    );
    // A delivery the receiver would refuse (no X-GitHub-Delivery) is not judged with a type it never has.
    let out = std::process::Command::new(INBOX)
        .args(["routes", "test", "--config"])
        .arg(&config)
        .args([
            "pushes",
            "--file",
            body,
            "--source",
            "github",
            "--header",
            "X-GitHub-Event: push",
        ])
        .output()
        .expect("run inbox routes test");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("would refuse this delivery"),
        "{stderr}"
    );
    // A filter reading a field the body lacks is the verdict error, not a miss.
    let v = routes_test(
        &config,
        &[
            "invoices",
            "--file",
            body,
            "--source",
            "stripe",
            "--event-type",
            "invoice.paid",
        ],
    );
    assert_eq!(v["verdict"], "error", "{v}");
}
