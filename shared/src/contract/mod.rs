//! The store contract: what the ports of [`crate::ports`] promise, as one suite that every store runs (River's
//! driver tests, apalis's `generic_storage_test!`). A store is done when this suite passes over it. Each store's tests
//! give a [`Harness`] (how to open a fresh store of that kind on a [`ManualClock`], and how to damage one the way a
//! disk or an operator could) to [`contract_tests!`](crate::contract_tests), which makes one `#[tokio::test]` per
//! contract function, named as the function:
//!
//! ```ignore
//! inbox_core::contract_tests!(MemoryHarness::start());
//! ```
//!
//! The suite, by concern: [`creates`] (creates and duplicates, batches, claimed and announced creates), [`claims`]
//! (claims and leases), [`settles`] (settles and the dead letter path), [`replay`], [`sweep`] (the sweeper's sparse
//! index), [`retention`] (retention and expiry), [`listings`] (listings and the summary), [`resent`] (resent bodies
//! and signed nonces), [`checkpoints`] (reconciliation's presence reads and checkpoints), [`upkeep`] (gone owners,
//! ending and giving back leases, purging).
//!
//! **Capabilities are asked, never assumed.** Where stores may differ, the contract reads
//! [`Ledger::capabilities`](crate::ports::Ledger::capabilities) (or [`Browse::lists_by_scan`]) and tests the promise
//! of what the store declares: an announced create stays out of the sweeper's index only where
//! `trusts_announcements`, a create claims only where `claims_in_create`, and only a store with an
//! `eventually_consistent_index` is read again ([`eventually`]) before the contract concludes.
//!
//! **Time is moved, not slept through.** Every store a harness opens runs on the harness's [`ManualClock`], the only
//! time its calls know; the contract advances it (or sets it) to expire leases, end backoffs, pass retention and read
//! the sweeper's index at a given time. Only waits for something other than time stay waits: an eventually
//! consistent index.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

pub mod checkpoints;
pub mod claims;
pub mod creates;
pub mod listings;
pub mod replay;
pub mod resent;
pub mod retention;
pub mod settles;
pub mod sweep;
pub mod upkeep;

pub use checkpoints::*;
pub use claims::*;
pub use creates::*;
pub use listings::*;
pub use replay::*;
pub use resent::*;
pub use retention::*;
pub use settles::*;
pub use sweep::*;
pub use upkeep::*;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::{Clock, ManualClock};
use crate::model::{EventId, EventKey, NewEvent, Record, SourceName, Status};
use crate::ports::{ListFilter, Settlement, Store};

/// How one kind of store's tests give the contract a store: a fresh one per test, on the harness's clock.
#[async_trait]
pub trait Harness: Send + Sync + 'static {
    /// The store's name, for messages.
    fn name(&self) -> &'static str;

    /// The clock this test's store runs on; the contract moves it.
    fn clock(&self) -> Arc<ManualClock>;

    /// A new handle on this test's store, as a restarted process (or another Lambda) would open it, whose due times
    /// use `grace`, on `clock` (the suites that run beside real time hand it the system's).
    async fn open_on(&self, grace: Duration, clock: Arc<dyn Clock>) -> Arc<dyn Store>;

    /// Removes the stored body of `key`'s event behind the store's back, as a corrupt record would lack it.
    async fn lose_body(&self, key: &EventKey);

    /// Stores `json` as `source`'s reconciliation checkpoint as it is kept, the way an earlier release wrote it.
    async fn store_checkpoint_json(&self, source: &SourceName, json: &str);

    /// Removes what the test made outside the process (a table, a bucket); a failed test leaves it.
    async fn finish(&self) {}
}

impl dyn Harness {
    /// [`Harness::open_on`] the harness's own clock.
    pub async fn open(&self, grace: Duration) -> Arc<dyn Store> {
        self.open_on(grace, self.clock()).await
    }

    /// Now, on the harness's clock.
    pub fn now(&self) -> i64 {
        self.clock().now_ms()
    }

    /// Moves the harness's clock on by `by`.
    pub fn advance(&self, by: Duration) {
        self.clock().advance(by);
    }

    /// Sets the harness's clock to `ms`: what the store reads and writes next, it does at that time.
    pub fn set_now(&self, ms: i64) {
        self.clock().set(ms);
    }
}

/// Runs one contract function over the harness `start` makes, as the test [`contract_tests!`](crate::contract_tests)
/// generates: skipped where `start` gives none (a store whose endpoint is not configured); what a test made outside
/// the process is removed once it passes.
pub async fn run<H, S, T, F>(start: S, name: &'static str, test: T)
where
    H: Harness,
    S: Future<Output = Option<H>>,
    T: FnOnce(Arc<dyn Harness>) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let Some(harness) = start.await else {
        return;
    };
    let harness: Arc<dyn Harness> = Arc::new(harness);
    match tokio::spawn(test(harness.clone())).await {
        Ok(()) => harness.finish().await,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("{name} did not finish: {e}"),
    }
}

/// Makes one `#[tokio::test]` per contract function in the calling module, each over a fresh harness from
/// `$start` (an expression whose value is a future of `Option<impl Harness>`; `None` skips the test).
#[macro_export]
macro_rules! contract_tests {
    ($start:expr) => {
        $crate::contract_tests!(@each $start;
            // creates and duplicates
            create_is_conditional_and_durable,
            concurrent_creates_of_one_event_make_one_record,
            a_create_claimed_is_processing_under_its_lease_where_the_store_claims_in_a_create,
            an_announced_create_is_left_out_of_the_sweep_index_only_where_the_store_trusts_announcements,
            a_batch_is_created_in_one_write_and_its_retry_finds_the_items_stored,
            a_batch_item_looks_for_no_resent_bodies,
            // claims and leases
            claim_then_settle_only_by_the_lease_owner,
            concurrent_claims_have_one_winner,
            an_expired_lease_is_taken_over_and_the_old_owner_cannot_settle,
            a_released_lease_is_taken_at_once,
            a_missing_body_is_a_corrupt_claim_never_an_empty_one,
            // settles and the dead letter path
            failed_waits_for_its_backoff,
            dead_never_overwrites_completed_and_alarms_once,
            the_dead_letter_path_waits_for_a_live_lease,
            // replay
            replay_is_a_conditional_transition_that_resets_the_budget,
            replay_restarts_the_age_budget,
            // the sweep index
            the_sparse_index_holds_only_what_the_sweeper_must_see,
            a_resent_event_is_due_again_later_unless_it_moved,
            a_deferred_alarm_comes_due_again_at_its_time,
            // retention and expiry
            completed_events_past_retention_count_as_absent,
            // listings and the summary
            list_filters_by_status_and_source,
            list_filters_by_type_id_time_and_pages_with_a_cursor,
            listings_and_indexes_hold_only_events,
            // resent bodies
            a_body_resent_under_a_fresh_id_is_stored_and_marked,
            a_refusing_source_answers_a_resent_body_as_the_stored_event,
            a_body_past_its_window_is_stored_unmarked,
            a_signed_nonce_under_another_id_is_answered_as_the_event_it_came_with,
            // reconciliation checkpoints
            reconciliation_reads_presence_in_batches_and_keeps_checkpoints_apart,
            a_checkpoint_saved_before_failed_events_were_kept_reads_with_none,
            // upkeep
            only_the_leases_of_owners_the_store_proves_gone_end_at_once,
            an_owner_is_gone_only_while_its_heartbeat_is_out,
            an_owner_gives_back_every_lease_it_holds,
            a_purge_deletes_only_completed_events_past_retention,
            a_role_has_one_holder_at_a_time_where_many_share_the_store,
        );
    };
    (@each $start:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::contract::run($start, stringify!($name), |harness| async move {
                    $crate::contract::$name(&*harness).await
                })
                .await;
            }
        )*
    };
}

/// Why a race test may fail against an emulator while the store is right.
pub const ATOMICITY: &str =
    "the store's conditional writes are not atomic: stock `moto_server` serves requests \
    on threads and checks conditions without a lock; run it on one thread (see test.sh)";

/// A lease or a grace long enough that it never ends by itself within a test.
pub const LONG: Duration = Duration::from_secs(60);

/// Completed, kept for an hour.
pub const RETAIN: Settlement = Settlement::Completed {
    retention: Duration::from_secs(3600),
};

/// The contract's one source.
pub fn source() -> SourceName {
    SourceName::parse("src").unwrap()
}

pub fn key(id: &str) -> EventKey {
    EventKey::new(source(), EventId::parse(id).unwrap())
}

/// An event of `src` with type `t.created`, whose hash stands for its body.
pub fn new_event(id: &str, body: &str) -> NewEvent {
    NewEvent {
        key: key(id),
        event_type: Some("t.created".into()),
        payload: bytes::Bytes::from(body.to_owned()),
        payload_sha256: format!("sha-of-{body}"),
        headers: vec![("content-type".into(), "application/json".into())],
        origin: Default::default(),
        resent_bodies: Default::default(),
    }
}

pub fn all(limit: usize) -> ListFilter {
    ListFilter {
        limit,
        ..Default::default()
    }
}

pub fn of_status(status: Status) -> ListFilter {
    ListFilter {
        status: Some(status),
        limit: 100,
        ..Default::default()
    }
}

pub fn ids(events: &[Record]) -> Vec<String> {
    events.iter().map(|e| e.event_id.to_string()).collect()
}

/// Reads the store's index (the sweeper's, or a listing from it) until `done` holds, where the store declares an
/// [`eventually_consistent_index`](crate::ports::Capabilities::eventually_consistent_index): for ten seconds at
/// most, and answers the last read for the caller to assert on. A store that declares none is read once: its first
/// answer must be the right one.
pub async fn eventually<T, F, Fut>(store: &dyn Store, mut read: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    if !store.capabilities().eventually_consistent_index {
        return read().await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answer = read().await;
        if done(&answer) || tokio::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
