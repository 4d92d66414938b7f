//! `inbox routes`: the routes of a config, and a route's verdict on one event (`inbox routes test`), stored or
//! in a file, with the first `&&` clause that was false.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _, Result};

use inbox_core::config::{Config, From, RouteConfig};
use inbox_core::model::{EventId, EventKey, RouteName, SourceName};
use inbox_core::routing::{Facts, Verdict};

use crate::StoreArgs;

/// Where the event a route is tested on comes from.
pub enum Subject {
    /// A stored event, `SOURCE/ID`, in the config's store or in `data_dir`.
    Stored {
        event: String,
        data_dir: Option<PathBuf>,
    },
    /// A body in a file, as `source` would receive it with these headers.
    File {
        path: PathBuf,
        source: SourceName,
        headers: Vec<String>,
        event_type: Option<String>,
    },
}

/// `inbox routes list`: each route, where it takes events from and to, and its filter.
pub fn list(config: &Path) -> Result<()> {
    let config = Config::load(config)?;
    println!("{:<20}  {:<24}  {:<20}  FILTER", "ROUTE", "FROM", "TO");
    for (name, route) in &config.routes {
        println!(
            "{:<20}  {:<24}  {:<20}  {}",
            name.as_str(),
            from_text(route),
            route.to.as_str(),
            route.filter.as_ref().map_or("-", |f| f.source())
        );
    }
    Ok(())
}

pub async fn test(config_path: &Path, route: RouteName, subject: Subject, json: bool) -> Result<()> {
    let config = Config::load(config_path)?;
    let Some(r) = config.routes.get(&route) else {
        bail!(
            "no route {route} in {} (its routes: {})",
            config_path.display(),
            config
                .routes
                .keys()
                .map(RouteName::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let event = match subject {
        Subject::Stored {
            event: text,
            data_dir,
        } => {
            let (source, id) = text
                .split_once('/')
                .ok_or_else(|| anyhow!("--event takes SOURCE/ID, as `inbox events list` prints them"))?;
            let key = EventKey::new(SourceName::parse(source)?, EventId::parse(id)?);
            let store = StoreArgs {
                config: Some(config_path.to_owned()),
                data_dir,
                aws: false,
            };
            let ledger = store.open().await?.ledger;
            let event = ledger.get(&key).await?.ok_or_else(|| anyhow!("no event {key}"))?;
            Tested {
                name: key.to_string(),
                source: event.source.clone(),
                body: event.payload.to_vec(),
                headers: event.headers.clone(),
                event_type: event.event_type.clone(),
                received_at: event.received_at,
            }
        }
        Subject::File {
            path,
            source,
            headers,
            event_type,
        } => {
            let body = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let sc = config
                .sources
                .get(&source)
                .ok_or_else(|| anyhow!("no source {source} in {}", config_path.display()))?;
            let mut map = http::HeaderMap::new();
            let mut kept = Vec::new();
            for h in headers {
                let (name, value) = h
                    .split_once(':')
                    .ok_or_else(|| anyhow!("--header takes 'Name: value', not {h:?}"))?;
                let name = http::HeaderName::from_bytes(name.trim().as_bytes())?;
                let value = http::HeaderValue::from_str(value.trim())?;
                kept.push((name.as_str().to_owned(), value.to_str()?.to_owned()));
                map.append(name, value);
            }
            // The type as the receiver would find it (the scheme's own place for it), unless given. A delivery the
            // receiver would refuse (no id where the scheme reads one) is not judged with a type it never has.
            let found = match (&event_type, sc.scheme.identify(&map, &body)) {
                (Some(_), _) => None,
                (None, Ok(identity)) => identity.event_type,
                (None, Err(e)) => bail!(
                    "source {source} would refuse this delivery ({e}): give the headers its scheme reads with \
                     --header, or the type with --event-type"
                ),
            };
            Tested {
                name: path.display().to_string(),
                source,
                body,
                headers: kept,
                event_type: event_type.or(found),
                received_at: inbox_core::time::now_ms(),
            }
        }
    };
    let provider = config.sources.get(&event.source).map_or("-", |s| s.scheme.name());
    let verdict = if !r.from.takes(&event.source) {
        None
    } else {
        Some(match &r.filter {
            None => Verdict::Matched,
            Some(filter) => filter.explain(&Facts {
                body: &event.body,
                headers: &event.headers,
                event_type: event.event_type.as_deref(),
                source: event.source.as_str(),
                provider,
                received_at: event.received_at,
            }),
        })
    };
    let (word, detail) = match &verdict {
        None => (
            "not-taken",
            Some(format!(
                "why:         the route takes events from {}",
                from_text(r)
            )),
        ),
        Some(Verdict::Matched) => ("matched", None),
        Some(Verdict::Filtered { clause }) => {
            ("filtered", clause.as_ref().map(|c| format!("false:       {c}")))
        }
        Some(Verdict::Error(e)) => ("error", Some(format!("error:       {e}"))),
    };
    if json {
        let v = serde_json::json!({
            "route": route.as_str(),
            "to": r.to.as_str(),
            "event": event.name,
            "event_type": event.event_type,
            "verdict": word,
            "false_clause": match &verdict { Some(Verdict::Filtered { clause }) => clause.clone(), _ => None },
            "error": match &verdict { Some(Verdict::Error(e)) => Some(e.clone()), _ => None },
        });
        println!("{v}");
    } else {
        println!(
            "route:       {} ({} -> {})",
            route.as_str(),
            from_text(r),
            r.to.as_str()
        );
        println!("filter:      {}", r.filter.as_ref().map_or("-", |f| f.source()));
        println!(
            "event:       {} (type {})",
            event.name,
            event.event_type.as_deref().unwrap_or("-")
        );
        println!("verdict:     {word}");
        if let Some(d) = detail {
            println!("{d}");
        }
    }
    Ok(())
}

struct Tested {
    name: String,
    source: SourceName,
    body: Vec<u8>,
    headers: Vec<(String, String)>,
    event_type: Option<String>,
    received_at: i64,
}

fn from_text(r: &RouteConfig) -> String {
    match &r.from {
        From::Every => "*".to_owned(),
        From::Sources(s) => s.iter().map(SourceName::as_str).collect::<Vec<_>>().join(","),
    }
}
