//! The condition and update expressions of every transition (the SQLite ledger's statements, translated), the
//! [`Values`] they are sent with, and [`completed_update`], the COMPLETED settle for a handler's own transaction.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure, Update};

use super::items::{n, s, secs, Item};
use crate::model::{EventKey, Status};
use crate::ports::StoreError;
use crate::time::ms;

// Conditions: the SQLite ledger's WHERE clauses, translated.
/// Create: absent, or completed and past retention (TTL deletes late, so the expiry is compared here).
pub(super) const CREATE_IF_ABSENT: &str =
    "attribute_not_exists(pk) OR (#status = :completed AND expires_at <= :now_secs)";
/// Claim: RECEIVED, FAILED and due, or PROCESSING with an expired lease.
pub(super) const CLAIMABLE: &str = "#status = :received \
    OR (#status = :failed AND next_attempt_at <= :due_by) \
    OR (#status = :processing AND lease_until <= :now)";
/// Settle and release: still PROCESSING under this owner's lease.
pub(super) const OWNED: &str = "#status = :processing AND lease_owner = :owner";
/// Dead-letter: any open state, never over COMPLETED, never under a live lease.
pub(super) const BURIABLE: &str =
    "#status IN (:received, :failed) OR (#status = :processing AND lease_until <= :now)";
/// The alarm is recorded once.
pub(super) const DEAD_UNNOTIFIED: &str = "#status = :dead AND attribute_not_exists(notified_at)";
pub(super) const REPLAYABLE: &str = "#status = :dead";
pub(super) const REPLAYABLE_FORCED: &str =
    "#status = :dead OR (#status = :completed AND expires_at > :now_secs)";
/// A forced replay of a completed event whose body is in S3: only while it still points at the object copied.
pub(super) const REPLAYABLE_MOVED: &str =
    "#status = :completed AND expires_at > :now_secs AND payload_s3_key = :key";
/// Still the claim that read the body from S3 (`:key`).
pub(super) const CLAIMED_WITH_BODY: &str =
    "#status = :processing AND lease_owner = :owner AND payload_s3_key = :key";
/// Completed with the body `:key`, and in the `body#` partition: its countdown is owed.
pub(super) const COMPLETED_WITH_BODY: &str =
    "#status = :completed AND payload_s3_key = :key AND gsi1pk = :body";
/// The alarm of a dead event whose body is not in S3: recorded at once. One in S3 is kept first.
pub(super) const DEAD_UNNOTIFIED_INLINE: &str =
    "#status = :dead AND attribute_not_exists(notified_at) AND attribute_not_exists(payload_s3_key)";
/// The alarm of a dead event whose body in S3 (`:key`) was kept.
pub(super) const DEAD_UNNOTIFIED_KEPT: &str =
    "#status = :dead AND attribute_not_exists(notified_at) AND payload_s3_key = :key";

// Updates.
/// The claimed record leaves the index (a no-op, and no index write, for one that was never in it): the message
/// being processed vouches for it until the settle.
pub(super) const CLAIM: &str = "SET #status = :processing, lease_owner = :owner, lease_until = :until, \
    attempts = if_not_exists(attempts, :zero) + :one, updated_at = :now REMOVE gsi1pk, gsi1sk";
/// Leaves the index keys as they are: the claim took them out, except for a body in S3, whose claim put the record in
/// `body#` so that the countdown its body is owed from this settle on is in the ledger before the settle is (the
/// same update serves a handler's own transaction, `completed_update`, which cannot know where the body is).
pub(super) const COMPLETE: &str =
    "SET #status = :completed, completed_at = :now, expires_at = :expires_secs, \
    updated_at = :now REMOVE lease_owner, lease_until, next_attempt_at";
pub(super) const FAIL: &str = "SET #status = :failed, last_error = :error, next_attempt_at = :next, \
    gsi1pk = :open, gsi1sk = :due, updated_at = :now REMOVE lease_owner, lease_until";
pub(super) const KILL: &str =
    "SET #status = :dead, last_error = :error, updated_at = :now, gsi1pk = :dead_shard, \
    gsi1sk = :due REMOVE notified_at, lease_owner, lease_until, next_attempt_at";
pub(super) const RELEASE: &str = "SET lease_until = :now, updated_at = :now";
pub(super) const NOTIFIED: &str = "SET notified_at = :now, gsi1sk = :never";
pub(super) const DEFER_ALARM: &str = "SET gsi1sk = :until";
pub(super) const RESENT: &str = "SET gsi1sk = :until";
/// Still as the sweeper read it, and in the sparse index.
pub(super) const UNCHANGED_OPEN: &str =
    "#status = :status AND updated_at = :updated AND attribute_exists(gsi1sk)";
pub(super) const REPLAY: &str =
    "SET #status = :received, attempts = :zero, replays = if_not_exists(replays, :zero) + :one, \
    updated_at = :now, replayed_at = :now, gsi1pk = :open, gsi1sk = :due \
    REMOVE lease_owner, lease_until, next_attempt_at, completed_at, expires_at, notified_at";
/// [`REPLAY`] onto the copy `:body` of the body in S3.
pub(super) const REPLAY_MOVED: &str =
    "SET #status = :received, attempts = :zero, replays = if_not_exists(replays, :zero) + :one, \
    updated_at = :now, replayed_at = :now, gsi1pk = :open, gsi1sk = :due, payload_s3_key = :body \
    REMOVE lease_owner, lease_until, next_attempt_at, completed_at, expires_at, notified_at";
/// The claim's record of a body in S3 (see `DynamoLedger::payload`): into `body#`, due when the lease ends.
pub(super) const BODY_CLAIMED: &str = "SET gsi1pk = :body, gsi1sk = :until";
/// The body's countdown started: out of `body#`.
pub(super) const BODY_COUNTING: &str = "REMOVE gsi1pk, gsi1sk";

/// The COMPLETED settle of `key` under `owner`'s lease, as one `Update` of a `TransactWriteItems`: the same
/// update, condition and values as [`DynamoLedger`](super::DynamoLedger)'s own settle, so that a handler
/// committing its effect in the same transaction (see the wallet example, `tests/aws/wallet.rs`) settles exactly as
/// the ledger would. A failed condition (the lease was lost) returns the item as it stands in the cancellation
/// reason.
pub fn completed_update(
    table: &str,
    key: &EventKey,
    owner: &str,
    retention: Duration,
    now: i64,
) -> Result<Update, StoreError> {
    Update::builder()
        .table_name(table)
        .key("pk", AttributeValue::S(key.pk()))
        .update_expression(COMPLETE)
        .condition_expression(OWNED)
        .expression_attribute_names("#status", "status")
        .set_expression_attribute_values(Some(completed_values(owner, retention, now).0))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|e| StoreError::Unavailable(format!("cannot build the settle of {key}: {e}")))
}

/// The values of [`CREATE_IF_ABSENT`].
pub(super) fn create_values(now: i64) -> Values {
    Values::default()
        .status(":completed", Status::Completed)
        .n(":now_secs", secs(now))
}

/// The values of [`OWNED`].
pub(super) fn owned_values(owner: &str, now: i64) -> Values {
    Values::default()
        .status(":processing", Status::Processing)
        .s(":owner", owner)
        .n(":now", now)
}

/// The values of [`COMPLETE`] under [`OWNED`].
pub(super) fn completed_values(owner: &str, retention: Duration, now: i64) -> Values {
    owned_values(owner, now)
        .status(":completed", Status::Completed)
        .n(":expires_secs", secs(now.saturating_add(ms(retention))))
}

/// Expression attribute values, built per call: DynamoDB refuses a value that its expressions do not use.
#[derive(Clone, Default)]
pub(super) struct Values(pub(super) Item);

impl Values {
    pub(super) fn s(mut self, name: &str, v: impl Into<String>) -> Self {
        self.0.insert(name.to_owned(), s(v));
        self
    }
    pub(super) fn n(mut self, name: &str, v: i64) -> Self {
        self.0.insert(name.to_owned(), n(v));
        self
    }
    pub(super) fn status(self, name: &str, st: Status) -> Self {
        self.s(name, st.as_str())
    }
}
