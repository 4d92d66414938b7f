//! The console's pages. Every interpolation goes through maud, which escapes it: stored payloads, ids, types,
//! errors and headers are the senders' text and never markup. No page carries script or inline style.

use maud::{html, Markup, DOCTYPE};

use inbox_core::model::{Event, EventKey, Record, SourceName, Status};
use inbox_core::ports::{Bucket, Checkpoint, QueueDepth, Summary};
use inbox_core::time::rfc3339;

use crate::filters::{encode, event_link, Filters};
use crate::guard::logout_csrf;

/// The most of a payload a page shows; the download has all of it.
const PREVIEW_BYTES: usize = 256 * 1024;
/// The most of a binary payload the hex preview shows.
const HEX_BYTES: usize = 1024;

/// A whole page, ready to answer with.
pub(super) type Page = axum::response::Html<String>;

fn layout(title: &str, body: Markup) -> Page {
    let logout = logout_csrf();
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · inbox console" }
                link rel="stylesheet" href="/style.css";
            }
            body {
                header {
                    nav {
                        a href="/" { "Overview" }
                        a href="/events" { "Events" }
                        a href="/events?status=DEAD" { "Dead" }
                    }
                    @if let Some(csrf) = &logout {
                        form.logout method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(csrf);
                            button type="submit" id="logout" { "Log out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    };
    axum::response::Html(page.into_string())
}

/// A page that only says something (errors, refusals).
pub(super) fn message(code: &str, text: &str) -> Page {
    layout(code, html! { h1 { (code) } p.message { (text) } })
}

pub(super) struct Login<'a> {
    pub csrf: &'a str,
    /// The console has a token (otherwise there is nothing to log in to).
    pub required: bool,
    /// The request carried a session that has ended.
    pub ended: bool,
    /// It came over plain HTTP to a host other than loopback, where a browser drops the `Secure` cookie.
    pub plain_http: bool,
}

pub(super) fn login(l: &Login<'_>) -> Page {
    let csrf = l.csrf;
    layout(
        "Log in",
        html! {
            h1 { "Log in" }
            @if l.ended {
                p.warning { "Your session has ended (logged out, idle too long, or too old): log in again." }
            }
            @if l.plain_http {
                p.warning {
                    "Over plain HTTP to a host other than loopback your browser drops the console's session cookie \
                    (it is Secure), and you come back here after logging in. Reach the console over HTTPS, or over \
                    an SSH tunnel to loopback, or start it with " code { "--insecure-cookie" } " on a private network."
                }
            }
            @if l.required {
                p { "This console needs the token it was started with (" code { "INBOX_CONSOLE_TOKEN" } ")." }
                form method="post" action="/login" {
                    input type="hidden" name="csrf" value=(csrf);
                    label { "Token " input type="password" name="token" autocomplete="current-password" required; }
                    button type="submit" { "Log in" }
                }
            } @else {
                p { "This console needs no login." a href="/" { "Overview" } }
            }
        },
    )
}

pub(super) struct Overview<'a> {
    pub store: &'a str,
    pub summary: &'a Summary,
    /// The work queue's counts, where the console has a queue that can say them (AWS).
    pub queue: Option<QueueDepth>,
    /// How the chart counts, for its legend.
    pub timeline_note: &'static str,
    /// When the counts were taken (UTC ms): they are kept for a few seconds.
    pub counted_at: i64,
    pub dead: &'a [Record],
    /// The last reconciliation run per source; `None` for a source that has not run yet.
    pub runs: &'a [(SourceName, Option<Checkpoint>)],
    /// The sources come from the config (every one that reconciles), not from the counts.
    pub configured: bool,
    pub now: i64,
}

fn status_class(st: Status) -> &'static str {
    match st {
        Status::Dead => "st st-dead",
        Status::Failed => "st st-failed",
        Status::Completed => "st st-completed",
        Status::Processing => "st st-processing",
        Status::Received => "st st-received",
    }
}

fn age(ms: i64) -> String {
    let secs = u64::try_from(ms.max(0) / 1000).unwrap_or(0);
    humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
}

pub(super) fn overview(o: &Overview<'_>) -> Page {
    let s = o.summary;
    let count = |st: Status| s.by_status.iter().find(|(x, _)| *x == st).and_then(|(_, n)| *n);
    let order = [
        Status::Dead,
        Status::Failed,
        Status::Processing,
        Status::Received,
        Status::Completed,
    ];
    let mut sources: Vec<&SourceName> = s.by_source.iter().map(|(src, _, _)| src).collect();
    sources.dedup();
    layout(
        "Overview",
        html! {
            h1 { "Overview" }
            p.muted { (o.store) }
            section.cards {
                @for st in order {
                    a class=(format!("card {}", status_class(st))) href=(format!("/events?status={st}")) {
                        span.n { @match count(st) { Some(n) => (n), None => "n/a" } }
                        span.l { (st) }
                    }
                }
            }
            p.muted { "Counts as of " (rfc3339(o.counted_at)) " (" (age(o.now - o.counted_at)) " ago)." }
            @if let Some(q) = o.queue {
                p {
                    "Work queue: " strong { (q.waiting) } " waiting, " strong { (q.in_flight) } " in flight, "
                    (q.delayed) " delayed (SQS's approximate counts)."
                }
            }
            @if count(Status::Received).is_none() {
                p.muted { "Completed, received and processing events are not counted here: on DynamoDB that would \
                    scan the table. The work queue holds a message for each received or processing one." }
            } @else if count(Status::Completed).is_none() {
                p.muted { "Completed events are not counted here: on DynamoDB that would scan the table." }
            }
            p {
                "Oldest open event: "
                @match s.oldest_open {
                    Some(t) => { strong { (age(o.now - t)) } " old (received " (rfc3339(t)) ")" }
                    None => "none open",
                }
            }
            section {
                h2 { "Dead events" }
                @if o.dead.is_empty() {
                    p.muted { "No dead events." }
                } @else {
                    (event_table(o.dead))
                    p {
                        a.button href="/events?status=DEAD" { "All dead events" }
                        " "
                        a.button href="/replay?status=DEAD" { "Replay all dead…" }
                    }
                }
            }
            @if !s.timeline.is_empty() {
                section {
                    h2 { "Last 24 hours" }
                    (chart(&s.timeline))
                    p.legend {
                        span.k-accepted { "accepted" } " " span.k-completed { "completed" } " " span.k-dead { "dead" }
                        " (" (o.timeline_note) ")"
                    }
                }
            }
            section {
                h2 { "By source" }
                div.scroll {
                    table {
                        thead { tr { th { "source" } @for st in order { th { (st) } } } }
                        tbody {
                            @for src in &sources {
                                tr {
                                    td { a href=(format!("/events?source={}", encode(src.as_str()))) { (src) } }
                                    @for st in order {
                                        td.num {
                                            @if st == Status::Completed && count(st).is_none() { "n/a" } @else {
                                                (s.by_source.iter().find(|(x, y, _)| x == *src && *y == st).map_or(0, |(_, _, n)| *n))
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !o.runs.is_empty() {
                section {
                    h2 { "Reconciliation" }
                    div.scroll {
                        table {
                            thead { tr { th { "source" } th { "last run" } th { "listed" } th { "stored" } th { "recovered" } th { "failed" } th { "scanned to" } th { "outcome" } } }
                            tbody {
                                @for (src, cp) in o.runs {
                                    tr {
                                        td { (src) }
                                        @match cp {
                                            Some(cp) => @match &cp.last_run {
                                                Some(run) => {
                                                    td { (rfc3339(run.finished_at)) }
                                                    td.num { (run.listed) }
                                                    td.num { (run.present) }
                                                    td.num { (run.recovered) }
                                                    td.num { (run.failed) }
                                                    td { (rfc3339(cp.scanned_to)) }
                                                    td { @match &run.error { Some(e) => span.error { (e) }, None => "ok" } }
                                                }
                                                None => { td colspan="6" { "no run recorded" } td { (rfc3339(cp.scanned_to)) } }
                                            },
                                            None => td colspan="7" { "no run yet" },
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !o.configured {
                p.muted { "Reconciliation runs are shown here for the sources with events counted above. Start the \
                    console with --config (on AWS, with INBOX_CONFIG or INBOX_CONFIG_PARAMETER set) to see every \
                    source that reconciles." }
            }
        },
    )
}

/// Accepted, completed and dead per hour as three polylines, drawn on the server (no script).
fn chart(buckets: &[Bucket]) -> Markup {
    let (w, h) = (480.0_f64, 120.0_f64);
    let max = buckets.iter().map(|b| b.accepted).max().unwrap_or(0).max(1) as f64;
    let step = if buckets.len() > 1 {
        w / (buckets.len() - 1) as f64
    } else {
        w
    };
    let line = |f: &dyn Fn(&Bucket) -> u64| {
        buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                format!(
                    "{:.1},{:.1}",
                    i as f64 * step,
                    h - (f(b) as f64 / max) * (h - 4.0)
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let total: u64 = buckets.iter().map(|b| b.accepted).sum();
    html! {
        svg.chart viewBox="0 0 480 120" preserveAspectRatio="none" role="img" aria-label=(format!("{total} events accepted in the last 24 hours")) {
            polyline.accepted points=(line(&|b| b.accepted)) {}
            polyline.completed points=(line(&|b| b.completed)) {}
            polyline.dead points=(line(&|b| b.dead)) {}
        }
        p.muted { (total) " accepted, peak " (max as u64) " an hour" }
    }
}

fn event_table(events: &[Record]) -> Markup {
    html! {
        div.scroll {
            table.events {
                thead { tr { th { "received" } th { "source" } th { "event id" } th { "type" } th { "status" } th { "attempts" } } }
                tbody {
                    @for e in events {
                        tr {
                            td.time { (rfc3339(e.received_at)) }
                            td { (e.source) }
                            td.id { a href=(event_link(&e.key())) { (e.event_id) } }
                            td { (e.event_type.as_deref().unwrap_or("")) }
                            td { span class=(status_class(e.status)) { (e.status) } }
                            td.num { (e.attempts) }
                        }
                    }
                }
            }
        }
    }
}

pub(super) struct EventsPage<'a> {
    pub filters: &'a Filters,
    pub events: &'a [Record],
    pub next: Option<&'a str>,
    pub scans: bool,
}

pub(super) fn events(p: &EventsPage<'_>) -> Page {
    let f = p.filters;
    let status = f.status.trim().to_ascii_uppercase();
    layout(
        "Events",
        html! {
            h1 { "Events" }
            form.filters method="get" action="/events" {
                label { "Source " input name="source" value=(f.source) autocomplete="off"; }
                label { "Status "
                    select name="status" {
                        option value="" selected[status.is_empty()] { "any" }
                        @for st in Status::ALL {
                            option value=(st) selected[status == st.as_str()] { (st) }
                        }
                    }
                }
                label { "Type " input name="type" value=(f.event_type) autocomplete="off"; }
                label { "Event id " input name="id" value=(f.id) autocomplete="off"; }
                label { "From (UTC) " input name="from" value=(f.from) placeholder="2026-12-01T09:30"; }
                label { "To (UTC) " input name="to" value=(f.to) placeholder="2026-12-01T10:30"; }
                button type="submit" { "Filter" }
                " " a href="/events" { "clear" }
            }
            @if p.scans {
                p.warning { "On DynamoDB this listing scans the whole table (filter on an open status or DEAD to read only the sparse index)." }
            }
            @if p.events.is_empty() {
                p.muted { "No events match." }
            } @else {
                (event_table(p.events))
            }
            p.pager {
                @if !f.before.is_empty() { a href=(format!("/events?{}", f.query(false))) { "« newest" } " " }
                @if let Some(next) = p.next { a.next href=(format!("/events?{next}")) { "older »" } }
            }
            @if status == "DEAD" || status == "COMPLETED" {
                p { a.button href=(format!("/replay?{}", f.query(false))) { "Replay these…" } }
            }
        },
    )
}

/// Header names never shown: a kept header should never hold a secret, but a page is no place to find out.
fn secret_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "signature",
        "authorization",
        "cookie",
        "secret",
        "token",
        "hmac",
        "api-key",
        "apikey",
    ]
    .iter()
    .any(|s| n.contains(s))
}

/// How a payload is shown: JSON indented, other UTF-8 as text, anything else as a hex preview.
fn payload(bytes: &[u8]) -> (&'static str, String, bool) {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
        if let Ok(pretty) = serde_json::to_string_pretty(&value) {
            let cut = pretty.len() > PREVIEW_BYTES;
            return ("JSON", truncate(pretty, PREVIEW_BYTES), cut);
        }
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return (
            "text",
            truncate(text.to_owned(), PREVIEW_BYTES),
            text.len() > PREVIEW_BYTES,
        );
    }
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).take(HEX_BYTES / 16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    char::from(b)
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!("{:08x}  {:<47}  {ascii}\n", i * 16, hex.join(" ")));
    }
    ("binary (hex preview)", out, bytes.len() > HEX_BYTES)
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

fn time(t: Option<i64>) -> String {
    t.map(rfc3339).unwrap_or_else(|| "–".to_owned())
}

pub(super) fn event(e: &Event, csrf: &str, now: i64, flash: Option<&str>) -> Page {
    let (kind, body, cut) = payload(&e.payload);
    let key = e.key();
    let raw = format!(
        "/event/raw?source={}&id={}",
        encode(key.source.as_str()),
        encode(key.event_id.as_str())
    );
    layout(
        "Event",
        html! {
            h1 { "Event " span.id { (e.event_id) } }
            @match flash {
                Some("replayed") => p.flash { "Replayed: it is RECEIVED again and runs shortly." },
                Some("not-enqueued") => p.flash { "Replayed, but the queue refused it: the sweeper sends it within a minute." },
                Some("skipped") => p.warning { "Not replayed: it is not in a replayable state now (someone may have replayed it first)." },
                _ => {}
            }
            dl.record {
                dt { "status" } dd { span class=(status_class(e.status)) id="status" { (e.status) } }
                dt { "source" } dd { a href=(format!("/events?source={}", encode(e.source.as_str()))) { (e.source) } }
                dt { "type" } dd { (e.event_type.as_deref().unwrap_or("–")) }
                dt { "origin" } dd { (e.origin) }
                @if let Some(first) = &e.resent_of {
                    dt { "resent of" }
                    dd.id { a href=(event_link(&EventKey::new(e.source.clone(), first.clone()))) id="resent-of" { (first) } }
                }
                dt { "attempts" } dd { (e.attempts) " (replays: " (e.replays) ")" }
                dt { "last error" } dd { @match &e.last_error { Some(err) => span.error { (err) }, None => "–" } }
                dt { "lease" } dd {
                    @match (&e.lease_owner, e.lease_until) {
                        (Some(owner), Some(until)) => { (owner) " until " (rfc3339(until)) @if until < now { " (expired)" } }
                        _ => "–",
                    }
                }
                dt { "received" } dd { (rfc3339(e.received_at)) " (" (age(now - e.received_at)) " ago)" }
                dt { "updated" } dd { (rfc3339(e.updated_at)) }
                dt { "next attempt" } dd { (time(e.next_attempt_at)) }
                dt { "completed" } dd { (time(e.completed_at)) }
                dt { "expires" } dd { (time(e.expires_at)) }
                dt { "replayed" } dd { (time(e.replayed_at)) }
                dt { "alarm sent" } dd { (time(e.notified_at)) }
                dt { "payload sha-256" } dd.id { (e.payload_sha256) }
            }
            @if e.status == Status::Dead || e.status == Status::Completed {
                form.replay method="post" action="/event/replay" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="source" value=(e.source);
                    input type="hidden" name="id" value=(e.event_id);
                    @if e.status == Status::Completed {
                        label { input type="checkbox" name="force" value="1" required; " it is completed: run its handler again" }
                    }
                    button type="submit" id="replay" { "Replay" }
                }
            }
            h2 { "Kept headers" }
            @if e.headers.is_empty() { p.muted { "none" } } @else {
                div.scroll {
                    table {
                        @for (name, value) in &e.headers {
                            tr { th { (name) } td { @if secret_header(name) { "[not shown]" } @else { (value) } } }
                        }
                    }
                }
            }
            h2 { "Payload " span.muted { "(" (kind) ", " (e.payload.len()) " bytes)" } }
            @if cut { p.warning { "Shown in part; the download has all of it." } }
            pre.payload id="payload" { (body) }
            p { a.button href=(raw) download { "Download raw" } }
        },
    )
}

pub(super) fn confirm(filters: &Filters, count: usize, force: bool, csrf: &str) -> Page {
    let f = filters;
    layout(
        "Replay",
        html! {
            h1 { "Replay" }
            p { "Dry run: " strong id="count" { (count) } " event(s) match " code { (if f.query(false).is_empty() { "everything".to_owned() } else { f.query(false) }) } "." }
            @if force { p.warning { "These events are completed: replaying runs their handler again." } }
            @if count > 0 {
                form method="post" action="/replay" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="expected" value=(count);
                    input type="hidden" name="source" value=(f.source);
                    input type="hidden" name="status" value=(f.status);
                    input type="hidden" name="type" value=(f.event_type);
                    input type="hidden" name="id" value=(f.id);
                    input type="hidden" name="from" value=(f.from);
                    input type="hidden" name="to" value=(f.to);
                    button type="submit" id="confirm" { "Replay " (count) " event(s)" }
                    " " a href=(format!("/events?{}", f.query(false))) { "cancel" }
                }
            }
        },
    )
}

pub(super) fn replayed(filters: &Filters, replayed: usize, not_enqueued: usize, skipped: usize) -> Page {
    layout(
        "Replayed",
        html! {
            h1 { "Replayed" }
            p.flash { (replayed + not_enqueued) " event(s) replayed; " (skipped) " skipped (no longer replayable)." }
            @if not_enqueued > 0 { p.warning { (not_enqueued) " could not be enqueued: the sweeper sends them." } }
            p { a href=(format!("/events?{}", filters.query(false))) { "Back to the events" } }
        },
    )
}
