//! The intake: what becomes of a verified event, without HTTP (docs/DESIGN.md "Receiving", step 4). For one event
//! or a batch, in the runtime's order: look for a duplicate and send the message ahead (AWS), the conditional
//! create (claimed by a free worker where the runtime has one), the message after (the ledger is its own queue),
//! and the bookkeeping of every outcome (metrics, delivery health, a payload mismatch, a stale RECEIVED duplicate
//! sent again). The HTTP edge ([`crate::receiver`]) reads, verifies and answers; a simulation calls this directly.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;

use crate::clock::World;
use crate::delivery_health::{DeliveryHealth, Seen};
use crate::metrics::Metrics;
use crate::model::{Event, EventId, EventKey, NewEvent, Origin, ResentBodies, Status};
use crate::ports::{Created, Ledger, Queue, StoreError};
use crate::source::Source;
use crate::time::ms;

/// The order of a first delivery's durable write and its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Write, then enqueue (`inbox serve`: the ledger is its own queue, and a lost enqueue is found by the
    /// sweeper).
    WriteThenEnqueue,
    /// Read, then send the message, then write (AWS: the work queue vouches for the record from its first moment,
    /// so it needs no sparse-index entry). `window`: how long after sending it the create may still land (this
    /// process's own time bound, and a margin for a write in flight when it ended).
    AnnounceThenWrite { window: Duration },
}

/// The workers of this process, as the intake hands them a new event: while a worker is free, the event is created
/// claimed under a lease of theirs ([`Ledger::create_claimed`]) and runs as soon as the create is durable, without
/// a message, a claim or a read of its body. With every worker busy it is created RECEIVED and enqueued, as without
/// a runner.
pub trait Runner: Send + Sync + 'static {
    /// The lease a create of `key` takes for the workers, while one is free; `None` when every worker is busy.
    fn reserve(&self, key: &EventKey) -> Option<Reserved>;

    /// Runs and settles `event`, created claimed under `reserved`'s lease, in the next free worker.
    fn run(&self, reserved: Reserved, event: Event);
}

/// The lease a new event's create takes for the workers: its owner and its length, and when it was reserved. The
/// store starts the lease no sooner than its create is sent, which is after this moment: what is left of it is the
/// lease less the time since, whatever the commit took (measured on this process's monotonic clock, which runs at
/// the rate of the store's).
pub struct Reserved {
    pub owner: String,
    pub lease: Duration,
    pub at: tokio::time::Instant,
}

impl Reserved {
    /// What is left of the lease now, at the least.
    pub fn left(&self) -> Duration {
        self.lease.saturating_sub(self.at.elapsed())
    }
}

/// What became of one verified event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Stored as a new event (marked as a resend of `resent_of` where another id of its source and type holds its
    /// body).
    Accepted { resent_of: Option<EventId> },
    /// It was there already: the stored event (another id than asked for where its body was refused as a resend)
    /// and its state now.
    Duplicate { event_id: EventId, status: Status },
}

/// Everything the intake needs, built once at a runtime's start.
#[derive(Clone)]
pub struct Intake {
    pub ledger: Arc<dyn Ledger>,
    pub queue: Arc<dyn Queue>,
    pub metrics: Arc<Metrics>,
    /// Delivery health: duplicates out of proportion, resent bodies, payload mismatches.
    pub health: Arc<DeliveryHealth>,
    /// The sweeper's grace: a duplicate of a RECEIVED event enqueues it again only once it is this old.
    pub resend_grace: Duration,
    /// In which order a delivery is written and enqueued: the runtime's choice, since it composes the store and
    /// the queue (docs/DESIGN.md, "Ordering on each runtime").
    pub order: Order,
    /// Where a new event's handler runs in this process right after its create (`inbox serve`: the worker pool);
    /// `None` where events wait for their message (AWS).
    pub runner: Option<Arc<dyn Runner>>,
    pub world: World,
}

/// Why a duplicate of one id came with another payload.
const BROKEN: &str = "the sender broke its contract";
/// Why a delivery whose signed nonce another id holds came with another event ([`ResentBodies::SignedNonce`]).
const CAPTURED: &str = "a captured signature came back with another event under a fresh id";

impl Intake {
    /// One verified event of `source`. `memory` (the body's share of the in-flight bytes) is held until the
    /// store is done with the body. An error is the store's: nothing is acknowledged (503).
    pub async fn take(
        &self,
        source: &Source,
        event: NewEvent,
        memory: Option<OwnedSemaphorePermit>,
    ) -> Result<Taken, StoreError> {
        let key = event.key.clone();
        let payload_sha256 = event.payload_sha256.clone();
        let signed_nonce = matches!(event.resent_bodies, ResentBodies::SignedNonce { .. });
        // Where the queue vouches for a record from the moment its message is sent (DynamoDB with SQS), the message
        // goes first, once a read has found no record: a duplicate sends none, and the record needs no index entry.
        let mut found = None;
        let mut announced = false;
        if let Order::AnnounceThenWrite { window } = self.order {
            match self.ledger.peek(&key).await? {
                Some(existing) => found = Some(crate::rules::duplicate_of(&existing)),
                None => {
                    let until = self.world.now_ms().saturating_add(ms(window));
                    match self.queue.announce(&key, until).await {
                        Ok(()) => announced = true,
                        // Written unannounced, so into the sweeper's index; the send is tried once more after the
                        // write, and counted as a lost enqueue only if that fails too.
                        Err(e) => {
                            tracing::info!(error = %e, "enqueue failed ahead of the write; tried again after it")
                        }
                    }
                }
            }
        }
        let (created, claimed) = match found {
            Some(duplicate) => (duplicate, None),
            None => self.create(event, announced, memory).await?,
        };
        Ok(match created {
            Created::New | Created::Resent { .. } => {
                let resent_of = self.accepted(source, &key, &created);
                if !announced {
                    crate::failpoint!("after_write_before_enqueue");
                    match (claimed, &self.runner) {
                        (Some((reserved, event)), Some(runner)) => runner.run(reserved, event),
                        _ => self.enqueue(source, &key).await,
                    }
                    crate::failpoint!("after_enqueue_before_answer");
                }
                Taken::Accepted { resent_of }
            }
            Created::Duplicate {
                event_id,
                status,
                payload_sha256: first,
                origin,
                since,
            } => {
                let fresh_id = event_id != key.event_id;
                if fresh_id && !signed_nonce {
                    tracing::warn!(stored_event_id = %event_id,
                        "a body already stored under another id: answered as a duplicate of that event");
                }
                // The stored event's key: this one's, unless the body (or signed nonce) was refused as a resend
                // under a fresh id.
                let stored = EventKey::new(key.source.clone(), event_id.clone());
                // A reconciled record holds the provider's API object, which need not match the webhook's bytes.
                // Under another id, only a signed nonce says this is the stored event's delivery with another body.
                let mismatch = if first == payload_sha256 || origin != Origin::Webhook {
                    None
                } else if !fresh_id {
                    Some(BROKEN)
                } else {
                    signed_nonce.then_some(CAPTURED)
                };
                self.duplicate(source, &stored, mismatch, &first, &payload_sha256);
                // Where the message goes before the write, no crash between the two exists: a RECEIVED record has
                // its message, or (its send failed) is in the sweeper's index; and a backlog of RECEIVED events
                // older than the grace must not turn each duplicate into another message.
                if !announced && self.order == Order::WriteThenEnqueue {
                    self.heal(source, &stored, status, since).await;
                }
                Taken::Duplicate { event_id, status }
            }
        })
    }

    /// The events of one batched delivery, all made durable in one atomic write before any answer: each item's
    /// outcome, in order. Every item is written before its message (the ledger's index vouches for any whose
    /// enqueue is lost), in both runtimes.
    pub async fn take_batch(
        &self,
        source: &Source,
        events: Vec<NewEvent>,
        memory: Option<OwnedSemaphorePermit>,
    ) -> Result<Vec<Taken>, StoreError> {
        // What the answer and the duplicates' check need once the events have gone to the store.
        let sent: Vec<(EventKey, String)> = events
            .iter()
            .map(|e| (e.key.clone(), e.payload_sha256.clone()))
            .collect();
        let ledger = self.ledger.clone();
        let created = tokio::spawn(async move {
            let created = ledger.create_batch(events).await;
            drop(memory);
            created
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("the create stopped: {e}")))??;
        crate::failpoint!("after_write_before_enqueue");
        let mut taken = Vec::with_capacity(sent.len());
        for ((key, sha256), created) in sent.iter().zip(created) {
            taken.push(match created {
                Created::New | Created::Resent { .. } => {
                    let resent_of = self.accepted(source, key, &created);
                    self.enqueue(source, key).await;
                    Taken::Accepted { resent_of }
                }
                Created::Duplicate {
                    event_id,
                    status,
                    since,
                    payload_sha256: first,
                    origin,
                } => {
                    // The same item sent again with other bytes: the sender broke its contract; the first stands.
                    let mismatch = origin == Origin::Webhook && event_id == key.event_id && *sha256 != first;
                    self.duplicate(source, key, mismatch.then_some(BROKEN), &first, sha256);
                    if self.order == Order::WriteThenEnqueue {
                        self.heal(source, key, status, since).await;
                    }
                    Taken::Duplicate { event_id, status }
                }
            });
        }
        Ok(taken)
    }

    /// The create, on a task of its own that holds the body's memory until the ledger is done with the body: a
    /// client that disconnects drops its request, but not the write queued with its body, so the bytes stay counted
    /// for as long as they are in memory. With a worker free ([`Runner`]), the event is created claimed by it, and
    /// answered with the record to run; a worker reserved for an event that was not created is free again at once.
    async fn create(
        &self,
        event: NewEvent,
        announced: bool,
        memory: Option<OwnedSemaphorePermit>,
    ) -> Result<(Created, Option<(Reserved, Event)>), StoreError> {
        let ledger = self.ledger.clone();
        let reserved = match (announced, &self.runner) {
            (false, Some(runner)) => runner.reserve(&event.key),
            _ => None,
        };
        let write = tokio::spawn(async move {
            let created = match reserved {
                None if announced => ledger.create_announced(event).await.map(|c| (c, None)),
                None => ledger.create(event).await.map(|created| (created, None)),
                Some(reserved) => ledger
                    .create_claimed(event, &reserved.owner, reserved.lease)
                    .await
                    .map(|(created, claimed)| (created, claimed.map(|event| (reserved, event)))),
            };
            drop(memory);
            created
        });
        write
            .await
            .map_err(|e| StoreError::Unavailable(format!("the create stopped: {e}")))?
    }

    /// The bookkeeping of a created event; a resend's holder, where it is one.
    fn accepted(&self, source: &Source, key: &EventKey, created: &Created) -> Option<EventId> {
        self.metrics.accepted(source.index);
        match created {
            Created::Resent { of } => {
                self.metrics.resent_body(source.index);
                tracing::warn!(event_id = %key.event_id, resent_of = %of,
                    "a body already stored under another id of this type: stored and run as its own event");
                self.health.seen(source.index, Seen::Resent { key, of });
                Some(of.clone())
            }
            _ => {
                self.health.seen(source.index, Seen::Accepted);
                None
            }
        }
    }

    /// The bookkeeping of a duplicate: counted, fed to delivery health, a different payload (`mismatch`: why it
    /// came) logged and counted.
    fn duplicate(&self, source: &Source, stored: &EventKey, mismatch: Option<&str>, first: &str, this: &str) {
        self.metrics.duplicate(source.index);
        self.health.seen(
            source.index,
            Seen::Duplicate {
                key: stored,
                mismatch: mismatch.is_some(),
            },
        );
        if let Some(why) = mismatch {
            self.metrics.payload_mismatch(source.index);
            tracing::warn!(event_id = %stored.event_id, first_sha256 = %first, this_sha256 = %this,
                "duplicate with a different payload: {why}; the first payload stands");
        }
    }

    /// A duplicate of an event still RECEIVED past the grace: its first enqueue may have been lost in a crash
    /// between the write and the enqueue, and this heals it without waiting for the sweeper. A younger one has its
    /// message in flight: a retry storm adds none.
    async fn heal(&self, source: &Source, key: &EventKey, status: Status, since: i64) {
        if status == Status::Received && self.world.now_ms().saturating_sub(since) >= ms(self.resend_grace) {
            self.enqueue(source, key).await;
        }
    }

    /// The record is durable already, so a failed enqueue still answers 200: the sweeper enqueues it later. It is
    /// counted (`EnqueueFailed`, alarmed on AWS): events then wait for the sweeper's next pass, and many of them
    /// mean the queue is down.
    async fn enqueue(&self, source: &Source, key: &EventKey) {
        if let Err(e) = self.queue.enqueue(key, Duration::ZERO).await {
            self.metrics.enqueue_failed(source.index);
            tracing::warn!(error = %e, "enqueue failed after the durable write; the sweeper will pick it up");
        }
    }
}
