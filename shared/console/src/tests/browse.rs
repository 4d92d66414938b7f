//! The pages that read: the overview, the events list with its filters and cursor, one event, its raw body.

use inbox_core::config::Config;
use inbox_core::ports::{Checkpoint, Checkpoints, RunRecord};

use super::*;

#[tokio::test]
async fn the_overview_counts_by_status_and_source_shows_dead_first_and_reconciliation() {
    let app = spawn(None).await;
    put(&app.ledger, "stripe", "done", b"{}", Some(Status::Completed)).await;
    put(&app.ledger, "stripe", "dead-1", b"{}", Some(Status::Dead)).await;
    put(&app.ledger, "github", "failing", b"{}", Some(Status::Failed)).await;
    put(&app.ledger, "github", "waiting", b"{}", None).await;
    let page = app.page("/").await;
    assert!(page.contains("dead-1"), "the dead event is listed");
    assert!(
        page.find("Dead events").unwrap() < page.find("By source").unwrap(),
        "dead first"
    );
    assert!(page.contains("<svg"), "the chart");
    assert!(page.contains("Oldest open event"));
    assert!(!page.contains("n/a"), "SQLite counts every status, zero included");
    assert!(
        !page.contains("<h2>Reconciliation</h2>"),
        "no panel without a checkpoint"
    );
    assert!(page.contains("href=\"/events?source=github\""));
    // GIVEN a reconciliation run recorded for stripe THEN the panel shows what it recovered.
    let run = RunRecord {
        started_at: 1,
        finished_at: 2,
        listed: 40,
        present: 37,
        recovered: 3,
        failed: 0,
        error: Some("provider said <b>429</b>".into()),
    };
    let cp = Checkpoint {
        scanned_to: 1_000,
        last_run: Some(run),
        ..Default::default()
    };
    app.ledger
        .save_checkpoint(&SourceName::parse("stripe").unwrap(), &cp)
        .await
        .unwrap();
    let page = app.page("/").await;
    assert!(page.contains("<h2>Reconciliation</h2>"));
    assert!(page.contains("provider said &lt;b&gt;429&lt;/b&gt;"));
    assert!(
        page.contains("Start the console with --config"),
        "without the config it says which sources it shows"
    );
}

/// A config where `stripe` and `quiet` reconcile and `github` does not.
fn reconciling_config() -> Config {
    let source = |name: &str, reconcile: bool| {
        let block = if reconcile {
            format!("[sources.{name}.reconcile]\nprovider = \"stripe\"\napi_key = \"env:STRIPE_KEY\"\n")
        } else {
            String::new()
        };
        format!(
            "[sources.{name}]\nscheme = \"stripe\"\nsecrets = [\"env:SECRET\"]\nhandler = {{ kind = \"log\" }}\n{block}"
        )
    };
    let text = [
        source("stripe", true),
        source("quiet", true),
        source("github", false),
    ]
    .concat();
    Config::from_toml(&text).unwrap()
}

#[tokio::test]
async fn the_overview_shows_every_reconciled_sources_last_run_from_the_config() {
    let app = spawn_console(None, |c| c.with_config(&reconciling_config())).await;
    // GIVEN stripe, healthy: its events all completed, and a run that found nothing missing; quiet, a source
    // that receives nothing, and a run of its own; github reconciles nothing.
    put(&app.ledger, "stripe", "done", b"{}", Some(Status::Completed)).await;
    put(&app.ledger, "github", "gh", b"{}", Some(Status::Completed)).await;
    let page = app.page("/").await;
    assert!(page.contains("<h2>Reconciliation</h2>"), "{page}");
    assert!(
        page.contains("<td>quiet</td><td colspan=\"7\">no run yet</td>"),
        "{page}"
    );
    assert!(
        page.contains("<td>stripe</td><td colspan=\"7\">no run yet</td>"),
        "{page}"
    );
    let run = |finished_at, listed| Checkpoint {
        scanned_to: finished_at - 300_000,
        last_run: Some(RunRecord {
            started_at: finished_at - 2_000,
            finished_at,
            listed,
            present: listed,
            recovered: 0,
            failed: 0,
            error: None,
        }),
        ..Default::default()
    };
    let at = 1_780_000_000_000;
    for (source, listed) in [("stripe", 17), ("quiet", 0)] {
        let cp = run(at, listed);
        app.ledger
            .save_checkpoint(&SourceName::parse(source).unwrap(), &cp)
            .await
            .unwrap();
    }
    // THEN both runs are shown, ok, with when they finished; github has no row.
    let page = app.page("/").await;
    let finished = inbox_core::time::rfc3339(at);
    for (source, listed) in [("stripe", 17), ("quiet", 0)] {
        let row = format!(
            "<td>{source}</td><td>{finished}</td><td class=\"num\">{listed}</td><td class=\"num\">{listed}</td>"
        );
        assert!(page.contains(&row), "{row} in {page}");
    }
    assert!(!page.contains("<td>github</td>"), "{page}");
    assert!(!page.contains("no run yet"));
    assert!(!page.contains("Start the console with --config"));
}

#[tokio::test]
async fn the_event_page_links_a_resent_body_to_the_event_that_held_it_first() {
    let app = spawn(None).await;
    let marked = |id: &str| NewEvent {
        key: key("stripe", id),
        event_type: Some("charge.succeeded".into()),
        payload: bytes::Bytes::from_static(b"{\"amount\":100}"),
        payload_sha256: "ab".repeat(32),
        headers: vec![],
        origin: Default::default(),
        resent_bodies: inbox_core::model::ResentBodies::Marked {
            within: Duration::from_secs(3600),
        },
    };
    app.ledger.create(marked("first")).await.unwrap();
    app.ledger.create(marked("again")).await.unwrap();
    let page = app.page("/event?source=stripe&id=again").await;
    assert!(
        page.contains("<dt>resent of</dt><dd class=\"id\"><a href=\"/event?source=stripe&amp;id=first\" id=\"resent-of\">first</a></dd>"),
        "{page}"
    );
    let first = app.page("/event?source=stripe&id=first").await;
    assert!(!first.contains("resent of"), "only where set");
}

#[tokio::test]
async fn events_filter_by_every_field_in_the_url_and_page_with_a_cursor() {
    let app = spawn(None).await;
    for i in 0..120 {
        let st = if i % 3 == 0 { Some(Status::Dead) } else { None };
        put(&app.ledger, "stripe", &format!("evt_{i:03}"), b"{}", st).await;
    }
    put(&app.ledger, "github", "gh-1", b"{}", None).await;
    let first = app.page("/events").await;
    assert!(first.contains("gh-1") && first.contains("evt_119"));
    let next = first
        .split("class=\"next\" href=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a next page link")
        .replace("&amp;", "&");
    let second = app.page(&next).await;
    assert!(
        !second.contains("evt_119") && second.contains("evt_070"),
        "no repeats"
    );
    let dead = app.page("/events?status=DEAD&source=stripe").await;
    assert!(dead.contains("evt_117") && !dead.contains("evt_118"));
    assert!(dead.contains("Replay these"));
    let one = app.page("/events?id=evt_005").await;
    assert!(one.contains("evt_005") && !one.contains("evt_006"));
    let typed = app
        .page("/events?type=charge.%3Cb%3Efailed%3C%2Fb%3E&source=github")
        .await;
    assert!(typed.contains("gh-1") && !typed.contains("evt_0"));
    assert!(app
        .page("/events?from=2999-01-01T00:00")
        .await
        .contains("No events match"));
    assert!(app
        .page("/events?to=2000-01-01T00:00:00Z")
        .await
        .contains("No events match"));
    assert!(app.page("/events?from=2000-01-01T00:00").await.contains("gh-1"));
    assert_eq!(app.get("/events?from=yesterday").await.status(), 400);
    assert_eq!(app.get("/events?before=junk").await.status(), 400);
}

#[tokio::test]
async fn a_hostile_payload_is_rendered_inert() {
    let app = spawn(None).await;
    let id = r#""><img src=x onerror=alert(1)><script>alert(2)</script>"#;
    put(&app.ledger, "stripe", id, HOSTILE.as_bytes(), Some(Status::Dead)).await;
    put(
        &app.ledger,
        "stripe",
        "text",
        b"</textarea><script>alert(3)</script>",
        None,
    )
    .await;
    for path in [
        format!("/event?source=stripe&id={}", encode(id)),
        "/event?source=stripe&id=text".to_owned(),
        "/".to_owned(),
        "/events".to_owned(),
    ] {
        let page = app.page(&path).await;
        for raw in ["<script>", "<img", "</textarea>", "<b>", "<i>"] {
            assert!(!page.contains(raw), "{path} holds {raw} unescaped");
        }
    }
    let page = app.page(&format!("/event?source=stripe&id={}", encode(id))).await;
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "shown, as text"
    );
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(page.contains("&lt;/textarea&gt;"));
    assert!(page.contains("(JSON,"), "JSON is pretty-printed");
    assert!(page.contains("\n  &quot;note&quot;"), "indented");
    assert!(
        page.contains("x-note") && page.contains("&lt;script&gt;alert('h')"),
        "kept headers, escaped"
    );
    assert!(!page.contains("secretish"), "signature headers are not rendered");
}

#[tokio::test]
async fn binary_payloads_show_a_hex_preview_and_download_as_an_attachment() {
    let app = spawn(None).await;
    let body: Vec<u8> = (0..=255u8).chain([0xff, 0xfe, b'<']).collect();
    put(&app.ledger, "stripe", "bin", &body, None).await;
    let page = app.page("/event?source=stripe&id=bin").await;
    assert!(page.contains("binary (hex preview)"));
    assert!(page.contains("00000000  00 01 02 03"));
    let raw = app.get("/event/raw?source=stripe&id=bin").await;
    assert_secure_headers(&raw);
    assert_eq!(raw.headers()["content-type"], "application/octet-stream");
    assert_eq!(
        raw.headers()["content-disposition"],
        "attachment; filename=\"stripe-bin.bin\""
    );
    assert_eq!(raw.bytes().await.unwrap().as_ref(), body.as_slice());
    let hostile = app
        .get(&format!("/event/raw?source=stripe&id={}", encode("a\"b;c")))
        .await;
    assert_eq!(hostile.status(), 404);
}
