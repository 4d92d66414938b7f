//! Delivery health (docs/DESIGN.md "Delivery health"): when the sender and the receiver disagree. Per source, over a
//! sliding window: duplicates out of proportion to accepted events (the sender is not getting our 200s, or retries
//! in a loop), every delivery refused 401 (a wrong or rotated secret: webhooks are being lost right now), and a
//! payload that differs between two deliveries of one id (the sender broke its contract), or of one signed delivery
//! (a captured signature came back with another event: `ResentBodies::SignedNonce`). One event answered as a
//! duplicate more than a few times is a warning of its own.
//!
//! Each condition raises one alarm per episode, not one per request: it fires when it becomes true and is armed
//! again only once it has been false. The counting is a few atomic adds on the request path.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::clock::World;
use crate::model::{EventId, EventKey, SourceName};

/// The thresholds of docs/DESIGN.md, by default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// The sliding window every condition is judged over.
    pub window: Duration,
    /// Duplicates over accepted above this ratio…
    pub duplicate_ratio: f64,
    /// …with at least this many duplicates in the window.
    pub min_duplicates: u64,
    /// Every delivery refused 401, at least this many in the window.
    pub min_refused: u64,
    /// One event answered as a duplicate more than this many times is a warning.
    pub duplicates_of_one: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(15 * 60),
            duplicate_ratio: 1.0,
            min_duplicates: 20,
            min_refused: 5,
            duplicates_of_one: 10,
        }
    }
}

/// What the receiver saw of one delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen<'a> {
    Accepted,
    /// A duplicate of a stored event; `mismatch` when its payload differs from the first one and it is that event's
    /// delivery (the same id, or the same signed nonce).
    Duplicate {
        key: &'a EventKey,
        mismatch: bool,
    },
    /// Refused for its signature or timestamp (401).
    Refused,
    /// Accepted and stored as its own event, though its body (same source and type) is stored under `of` already.
    Resent {
        key: &'a EventKey,
        of: &'a EventId,
    },
}

/// Where alarms go: a summary an operator can act on (never a payload, never a secret).
pub trait HealthAlarm: Send + Sync + 'static {
    fn raise(&self, alarm: Value);
}

/// Logs every alarm at error level; the embedded runtime also POSTs it to `notify_url`.
pub struct LogAlarm;

impl HealthAlarm for LogAlarm {
    fn raise(&self, alarm: Value) {
        tracing::error!(alarm = %alarm, "delivery health");
    }
}

/// Buckets of one minute; the window is made of as many as it spans.
const BUCKET_MS: i64 = 60_000;
/// Events counted for the one-event warning at most, per window (then the map starts over).
const TRACKED_EVENTS: usize = 10_000;

#[derive(Default)]
struct Bucket {
    minute: AtomicI64,
    accepted: AtomicU64,
    duplicate: AtomicU64,
    refused: AtomicU64,
}

struct SourceHealth {
    name: SourceName,
    buckets: Vec<Bucket>,
    duplicates_firing: AtomicBool,
    refused_firing: AtomicBool,
    /// The minute of the last payload mismatch: a new episode starts once a window passed without one.
    last_mismatch: AtomicI64,
    /// The minute of the last resent body, the same way.
    last_resent: AtomicI64,
    /// Duplicates per event id (hashed) this window, for the one-event warning.
    per_event: Mutex<(i64, HashMap<u64, u32>)>,
}

/// The per-source windows and their episodes.
pub struct DeliveryHealth {
    sources: Vec<SourceHealth>,
    thresholds: Thresholds,
    alarm: Arc<dyn HealthAlarm>,
    /// The clock its windows are counted on.
    world: World,
}

/// Sums of one source's window.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub accepted: u64,
    pub duplicate: u64,
    pub refused: u64,
}

impl DeliveryHealth {
    pub fn new(
        sources: &[SourceName],
        thresholds: Thresholds,
        alarm: Arc<dyn HealthAlarm>,
        world: World,
    ) -> Self {
        let minutes = (thresholds.window.as_millis() as i64 / BUCKET_MS).max(1) as usize;
        Self {
            sources: sources
                .iter()
                .map(|name| SourceHealth {
                    name: name.clone(),
                    buckets: (0..minutes).map(|_| Bucket::default()).collect(),
                    duplicates_firing: AtomicBool::new(false),
                    refused_firing: AtomicBool::new(false),
                    last_mismatch: AtomicI64::new(i64::MIN),
                    last_resent: AtomicI64::new(i64::MIN),
                    per_event: Mutex::new((0, HashMap::new())),
                })
                .collect(),
            thresholds,
            alarm,
            world,
        }
    }

    /// Counts one delivery of source `index` (its position in the sources' names) and raises what it tips over.
    pub fn seen(&self, index: usize, seen: Seen<'_>) {
        self.seen_at(index, seen, self.world.now_ms());
    }

    /// [`DeliveryHealth::seen`] at a given time (tests).
    pub fn seen_at(&self, index: usize, seen: Seen<'_>, now: i64) {
        let Some(s) = self.sources.get(index) else {
            return;
        };
        let minute = now.div_euclid(BUCKET_MS);
        let bucket = s.bucket(minute);
        match seen {
            Seen::Resent { key, of } => {
                self.seen_at(index, Seen::Accepted, now);
                let last = s.last_resent.swap(minute, Relaxed);
                if last == i64::MIN || minute - last >= s.buckets.len() as i64 {
                    let w = s.window(minute);
                    self.raise(s, "resent_body", w, json!({
                        "event_id": key.event_id,
                        "resent_of": of,
                        "why": "a body already stored under another id was stored again as its own event: the \
                                sender repeats itself, or someone replays captured deliveries",
                    }));
                }
            }
            Seen::Accepted => {
                bucket.accepted.fetch_add(1, Relaxed);
                // An accepted delivery proves the secret works: the 401 episode is over. (Read first: a store on
                // every request would bounce the line between cores.)
                if s.refused_firing.load(Relaxed) {
                    s.refused_firing.store(false, Relaxed);
                }
            }
            Seen::Refused => {
                bucket.refused.fetch_add(1, Relaxed);
                let w = s.window(minute);
                let only_refused =
                    w.refused >= self.thresholds.min_refused && w.accepted == 0 && w.duplicate == 0;
                if only_refused && !s.refused_firing.swap(true, Relaxed) {
                    let why = "every delivery in the window was refused 401: a wrong or rotated secret; \
                               webhooks are being lost now";
                    self.raise(s, "signatures_refused", w, json!({ "why": why }));
                }
            }
            Seen::Duplicate { key, mismatch } => {
                bucket.duplicate.fetch_add(1, Relaxed);
                let w = s.window(minute);
                let out_of_proportion = w.duplicate >= self.thresholds.min_duplicates
                    && w.duplicate as f64 > self.thresholds.duplicate_ratio * w.accepted as f64;
                if out_of_proportion {
                    if !s.duplicates_firing.swap(true, Relaxed) {
                        self.raise(
                            s,
                            "duplicates_out_of_proportion",
                            w,
                            json!({
                                "why": "the sender is not getting our 200s, or retries in a loop",
                                "ratio": self.thresholds.duplicate_ratio,
                            }),
                        );
                    }
                } else if s.duplicates_firing.load(Relaxed) {
                    s.duplicates_firing.store(false, Relaxed);
                }
                if mismatch {
                    let last = s.last_mismatch.swap(minute, Relaxed);
                    if last == i64::MIN || minute - last >= s.buckets.len() as i64 {
                        self.raise(s, "payload_mismatch", w, json!({
                            "event_id": key.event_id,
                            "why": "two deliveries of one id (or of one signed delivery) with different \
                                    payloads: the sender broke its contract, or a captured signature came back \
                                    with another event; the first payload stands",
                        }));
                    }
                }
                self.count_one(s, key, minute);
            }
        }
    }

    /// The window of source `index` as it stands.
    pub fn window(&self, index: usize) -> Window {
        self.sources
            .get(index)
            .map(|s| s.window(self.world.now_ms().div_euclid(BUCKET_MS)))
            .unwrap_or_default()
    }

    fn count_one(&self, s: &SourceHealth, key: &EventKey, minute: i64) {
        let window = s.buckets.len() as i64;
        let n = {
            let mut guard = crate::sync::lock(&s.per_event);
            let (started, counts) = &mut *guard;
            if minute - *started >= window || counts.len() >= TRACKED_EVENTS {
                *started = minute;
                counts.clear();
            }
            // By the id's hash: no allocation on the duplicate path (ids of one source, 64 bits: no collision to
            // speak of among the ten thousand kept).
            let mut h = std::collections::hash_map::DefaultHasher::new();
            key.event_id.as_str().hash(&mut h);
            let n = counts.entry(h.finish()).or_insert(0);
            *n += 1;
            *n
        };
        if n == self.thresholds.duplicates_of_one + 1 {
            tracing::warn!(source = %key.source, event_id = %key.event_id, duplicates = n,
                "one event answered as a duplicate more than {} times: its sender keeps retrying it",
                self.thresholds.duplicates_of_one);
        }
    }

    fn raise(&self, s: &SourceHealth, alarm: &str, w: Window, mut detail: Value) {
        let mut summary = json!({
            "alarm": alarm,
            "source": s.name,
            "window_minutes": s.buckets.len(),
            "accepted": w.accepted,
            "duplicates": w.duplicate,
            "refused_401": w.refused,
        });
        if let (Some(summary), Some(detail)) = (summary.as_object_mut(), detail.as_object_mut()) {
            summary.append(detail);
        }
        self.alarm.raise(summary);
    }
}

impl SourceHealth {
    /// This minute's bucket, emptied first if it still holds an older minute.
    fn bucket(&self, minute: i64) -> &Bucket {
        let b = &self.buckets[minute.rem_euclid(self.buckets.len() as i64) as usize];
        let held = b.minute.load(Relaxed);
        if held != minute && b.minute.compare_exchange(held, minute, Relaxed, Relaxed).is_ok() {
            b.accepted.store(0, Relaxed);
            b.duplicate.store(0, Relaxed);
            b.refused.store(0, Relaxed);
        }
        b
    }

    fn window(&self, minute: i64) -> Window {
        let span = self.buckets.len() as i64;
        let mut w = Window::default();
        for b in &self.buckets {
            if minute - b.minute.load(Relaxed) < span {
                w.accepted += b.accepted.load(Relaxed);
                w.duplicate += b.duplicate.load(Relaxed);
                w.refused += b.refused.load(Relaxed);
            }
        }
        w
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::EventId;

    #[derive(Default)]
    struct Raised(Mutex<Vec<Value>>);

    impl HealthAlarm for Raised {
        fn raise(&self, alarm: Value) {
            self.0.lock().unwrap().push(alarm);
        }
    }

    fn rig() -> (DeliveryHealth, Arc<Raised>) {
        let raised = Arc::new(Raised::default());
        let names = [SourceName::parse("gh").unwrap(), SourceName::parse("st").unwrap()];
        (
            DeliveryHealth::new(
                &names,
                Thresholds::default(),
                raised.clone(),
                crate::clock::World::system(),
            ),
            raised,
        )
    }

    fn key(id: &str) -> EventKey {
        EventKey::new(SourceName::parse("gh").unwrap(), EventId::parse(id).unwrap())
    }

    fn names(raised: &Raised) -> Vec<String> {
        raised
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|a| a["alarm"].as_str().unwrap().to_owned())
            .collect()
    }

    const T0: i64 = 1_800_000_000_000;

    #[test]
    fn duplicates_out_of_proportion_alarm_once_per_episode() {
        let (h, raised) = rig();
        for _ in 0..10 {
            h.seen_at(0, Seen::Accepted, T0);
        }
        // 19 duplicates of 10 accepted: under the minimum count.
        for i in 0..19 {
            h.seen_at(
                0,
                Seen::Duplicate {
                    key: &key(&format!("e{}", i % 10)),
                    mismatch: false,
                },
                T0,
            );
        }
        assert!(names(&raised).is_empty());
        for i in 0..30 {
            h.seen_at(
                0,
                Seen::Duplicate {
                    key: &key(&format!("e{}", i % 10)),
                    mismatch: false,
                },
                T0 + 1000,
            );
        }
        assert_eq!(
            names(&raised),
            ["duplicates_out_of_proportion"],
            "once per episode, not per request"
        );
        // The other source is quiet.
        h.seen_at(1, Seen::Accepted, T0);
        assert_eq!(raised.0.lock().unwrap()[0]["source"], "gh");
        // A window later the old counts are gone: the episode ends, and a new one alarms again.
        let later = T0 + 16 * 60_000;
        h.seen_at(
            0,
            Seen::Duplicate {
                key: &key("x"),
                mismatch: false,
            },
            later,
        );
        for i in 0..25 {
            h.seen_at(
                0,
                Seen::Duplicate {
                    key: &key(&format!("y{i}")),
                    mismatch: false,
                },
                later,
            );
        }
        assert_eq!(names(&raised).len(), 2);
    }

    #[test]
    fn a_window_of_only_refusals_alarms_and_an_accept_ends_it() {
        let (h, raised) = rig();
        for _ in 0..4 {
            h.seen_at(0, Seen::Refused, T0);
        }
        assert!(names(&raised).is_empty(), "under the minimum");
        h.seen_at(0, Seen::Refused, T0);
        h.seen_at(0, Seen::Refused, T0);
        assert_eq!(names(&raised), ["signatures_refused"]);
        // Refusals beside accepted deliveries (a stray bad sender) do not alarm.
        let (h2, raised2) = rig();
        h2.seen_at(0, Seen::Accepted, T0);
        for _ in 0..50 {
            h2.seen_at(0, Seen::Refused, T0);
        }
        assert!(names(&raised2).is_empty());
        // After an accept, the episode is over; once the window holds refusals only again, it alarms again.
        h.seen_at(0, Seen::Accepted, T0);
        let later = T0 + 16 * 60_000;
        for _ in 0..5 {
            h.seen_at(0, Seen::Refused, later);
        }
        assert_eq!(names(&raised), ["signatures_refused", "signatures_refused"]);
    }

    #[test]
    fn a_payload_mismatch_alarms_once_per_window() {
        let (h, raised) = rig();
        h.seen_at(0, Seen::Accepted, T0);
        h.seen_at(
            0,
            Seen::Duplicate {
                key: &key("e1"),
                mismatch: true,
            },
            T0,
        );
        h.seen_at(
            0,
            Seen::Duplicate {
                key: &key("e2"),
                mismatch: true,
            },
            T0 + 60_000,
        );
        assert_eq!(names(&raised), ["payload_mismatch"]);
        assert_eq!(raised.0.lock().unwrap()[0]["event_id"], "e1");
        h.seen_at(
            0,
            Seen::Duplicate {
                key: &key("e3"),
                mismatch: true,
            },
            T0 + 20 * 60_000,
        );
        assert_eq!(names(&raised).len(), 2);
        h.seen_at(
            0,
            Seen::Duplicate {
                key: &key("e4"),
                mismatch: false,
            },
            T0 + 21 * 60_000,
        );
        assert_eq!(names(&raised).len(), 2);
    }
}
