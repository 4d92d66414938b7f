//! `inbox events list` and `inbox events show`: stored events, as a table, a record or JSON.

use anyhow::{bail, Result};

use inbox_core::model::{Event, EventId, EventKey, Record, SourceName, Status};
use inbox_core::ports::ListFilter;
use inbox_core::time::rfc3339;

use crate::StoreArgs;

pub async fn list(
    store: StoreArgs,
    status: Option<Status>,
    source: Option<SourceName>,
    limit: usize,
    json: bool,
) -> Result<()> {
    let ledger = store.open().await?.ledger;
    let events = ledger
        .list(&ListFilter {
            status,
            source,
            limit,
            ..Default::default()
        })
        .await?;
    if json {
        for e in &events {
            println!("{}", event_json(e, None));
        }
    } else {
        print_table(&events);
    }
    Ok(())
}

pub async fn show(
    store: StoreArgs,
    source: SourceName,
    event_id: String,
    json: bool,
    payload: bool,
) -> Result<()> {
    let ledger = store.open().await?.ledger;
    let key = EventKey::new(source, EventId::parse(&event_id)?);
    let Some(event) = ledger.get(&key).await? else {
        bail!("no event {key}");
    };
    if json {
        println!("{}", event_json(&event, payload.then_some(&event.payload[..])));
    } else {
        print_event(&event, payload);
    }
    Ok(())
}

/// A record as JSON; with its kept headers and `payload` where that is given (`--payload`).
fn event_json(e: &Record, payload: Option<&[u8]>) -> serde_json::Value {
    let time = |t: Option<i64>| t.map(rfc3339);
    let mut v = serde_json::json!({
        "source": e.source,
        "event_id": e.event_id,
        "event_type": e.event_type,
        "status": e.status,
        "attempts": e.attempts,
        "replays": e.replays,
        "received_at": rfc3339(e.received_at),
        "updated_at": rfc3339(e.updated_at),
        "next_attempt_at": time(e.next_attempt_at),
        "completed_at": time(e.completed_at),
        "expires_at": time(e.expires_at),
        "last_error": e.last_error,
        "payload_sha256": e.payload_sha256,
        "origin": e.origin,
        "replayed_at": time(e.replayed_at),
        "resent_of": e.resent_of,
    });
    if let Some(payload) = payload {
        v["headers"] = serde_json::json!(e.headers);
        v["payload"] = serde_json::json!(String::from_utf8_lossy(payload));
    }
    v
}

fn print_table(events: &[Record]) {
    println!(
        "{:<24}  {:<12}  {:<36}  {:<24}  {:<10}  {:>8}",
        "RECEIVED_AT", "SOURCE", "EVENT_ID", "TYPE", "STATUS", "ATTEMPTS"
    );
    for e in events {
        println!(
            "{:<24}  {:<12}  {:<36}  {:<24}  {:<10}  {:>8}",
            rfc3339(e.received_at),
            e.source,
            e.event_id,
            e.event_type.as_deref().unwrap_or("-"),
            e.status,
            e.attempts
        );
    }
}

fn print_event(e: &Event, payload: bool) {
    let time = |t: Option<i64>| t.map_or_else(|| "-".to_owned(), rfc3339);
    println!("source:          {}", e.source);
    println!("event_id:        {}", e.event_id);
    println!("event_type:      {}", e.event_type.as_deref().unwrap_or("-"));
    println!(
        "resent_of:       {}",
        e.resent_of.as_ref().map_or("-", |id| id.as_str())
    );
    println!("status:          {}", e.status);
    println!("attempts:        {} (replays: {})", e.attempts, e.replays);
    println!("last_error:      {}", e.last_error.as_deref().unwrap_or("-"));
    println!("received_at:     {}", rfc3339(e.received_at));
    println!("updated_at:      {}", rfc3339(e.updated_at));
    println!("next_attempt_at: {}", time(e.next_attempt_at));
    println!("completed_at:    {}", time(e.completed_at));
    println!("payload_sha256:  {}", e.payload_sha256);
    if payload {
        for (name, value) in &e.headers {
            println!("header:          {name}: {value}");
        }
        println!("payload:\n{}", String::from_utf8_lossy(&e.payload));
    }
}
