//! The exactly-once example: a wallet whose balance changes commit in the same DynamoDB `TransactWriteItems` as
//! the event's COMPLETED settle. **This is the pattern for state that lives in DynamoDB.**
//!
//! A handler's effect and the event's settle are normally two writes, so a crash between them (or a lease lost
//! before the settle) runs the handler again, and handlers must be idempotent. Here they are one transaction:
//!
//! 1. `Update` the state item (`ADD balance :delta` on `pk = "wallet#{account}"`, with the business condition: a
//!    debit never takes the balance below zero);
//! 2. `Update` the event's ledger item exactly as the ledger settles it COMPLETED
//!    ([`completed_update`]: `status = PROCESSING AND lease_owner = :token`, the token being this attempt's lease,
//!    [`Event::lease_owner`]).
//!
//! Either both commit or neither does. The effect therefore lands once per event however often it is delivered,
//! retried, raced or crashed: after a commit the event is COMPLETED, so every later claim finds it done; a worker
//! whose lease ran out fails condition 2 and applies nothing. The handler answers
//! [`Handler::settles_on_success`] `true`, so the machine does not settle COMPLETED a second time.
//!
//! How a cancelled transaction maps to [`HandlerError`], by its cancellation reasons:
//! - the event item's condition failed → [`HandlerError::Retryable`] "lease lost": nothing was applied, and the
//!   machine's own settle then finds the lease lost and logs it (the owner of the lease finishes the event);
//! - the wallet item's condition failed → [`HandlerError::Permanent`] "insufficient funds": the event goes DEAD,
//!   for an operator to look at, and replays once the account is funded;
//! - transaction conflicts, throttling, anything else → [`HandlerError::Retryable`].
//!
//! The request carries a `ClientRequestToken` derived from the lease token, so an SDK retry of a transaction that
//! committed but whose answer was lost is answered "done" by DynamoDB instead of failing condition 2.
//!
//! Event bodies: `{"id": "...", "type": "wallet.credit" | "wallet.debit", "data": {"account": "acc_1",
//! "amount": 250}}`, the amount a positive whole number of minor units (anything else is permanent).
//!
//! The accounts live in their own table (hash key `pk`, a string), not in the ledger's: the ledger's table holds
//! event items only, which its operator listings read whole. One transaction may span both tables.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use sha2::{Digest, Sha256};

use inbox_core::handlers::{Handler, HandlerError};
use inbox_core::model::Event;
use inbox_core::ports::StoreError;
use inbox_core::stores::dynamodb::completed_update;
use inbox_core::time::now_ms;

/// The event types this handler knows.
pub const CREDIT: &str = "wallet.credit";
pub const DEBIT: &str = "wallet.debit";

/// The two items of the transaction, in order: their cancellation reasons come back in the same order.
const WALLET_ITEM: usize = 0;
const EVENT_ITEM: usize = 1;

/// The wallet update: the balance moves by `:delta`; a debit only while the balance covers it.
const MOVE: &str = "ADD balance :delta SET updated_at = :now";
const COVERS: &str = "balance >= :needed";

/// Account names are the caller's own ids; this keeps a key well within DynamoDB's limits.
const MAX_ACCOUNT_LEN: usize = 256;

/// The wallet handler: credits and debits accounts, exactly once per event. Register it with
/// `Registry::register("wallet", Arc::new(Wallet::new(...)))` and name it in a source's config
/// (`handler = { kind = "custom", name = "wallet" }`).
#[derive(Clone, Debug)]
pub struct Wallet {
    client: Client,
    /// The ledger's table: the event items the transaction settles.
    table: String,
    /// The accounts' table.
    accounts: String,
    /// The ledger's retention (`Config::retention`): the COMPLETED settle sets the same expiry the ledger would.
    retention: Duration,
}

/// One balance change read from an event body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Movement {
    pub account: String,
    /// Minor units: positive for a credit, negative for a debit.
    pub delta: i128,
}

impl Movement {
    /// Reads a wallet event's body. The errors never quote the body (payloads are not logged).
    pub fn parse(body: &[u8]) -> Result<Self, HandlerError> {
        let bad = |what: &str| HandlerError::Permanent(format!("not a wallet event: {what}"));
        let json: serde_json::Value =
            serde_json::from_slice(body).map_err(|_| bad("the body is not JSON"))?;
        let sign = match json.get("type").and_then(|t| t.as_str()) {
            Some(CREDIT) => 1,
            Some(DEBIT) => -1,
            _ => return Err(bad("type is neither wallet.credit nor wallet.debit")),
        };
        let data = json.get("data").ok_or_else(|| bad("data is missing"))?;
        let account = data
            .get("account")
            .and_then(|a| a.as_str())
            .filter(|a| !a.is_empty() && a.len() <= MAX_ACCOUNT_LEN)
            .ok_or_else(|| bad("data.account is not a non-empty string of at most 256 bytes"))?;
        let amount = data
            .get("amount")
            .and_then(serde_json::Value::as_u64)
            .filter(|a| *a > 0)
            .ok_or_else(|| bad("data.amount is not a positive whole number"))?;
        Ok(Self {
            account: account.to_owned(),
            delta: sign * i128::from(amount),
        })
    }

    /// The account's item key.
    pub fn pk(&self) -> String {
        account_pk(&self.account)
    }
}

/// `wallet#{account}`.
pub fn account_pk(account: &str) -> String {
    format!("wallet#{account}")
}

impl Wallet {
    /// A wallet settling events of the ledger table `table` and keeping balances in `accounts`; `retention` is
    /// the ledger's (`Config::retention`).
    pub fn new(
        client: Client,
        table: impl Into<String>,
        accounts: impl Into<String>,
        retention: Duration,
    ) -> Self {
        Self {
            client,
            table: table.into(),
            accounts: accounts.into(),
            retention,
        }
    }

    /// An account's balance (a consistent read); 0 for an account never credited.
    pub async fn balance(&self, account: &str) -> Result<i128, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.accounts)
            .key("pk", AttributeValue::S(account_pk(account)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::Unavailable(DisplayErrorContext(&e).to_string()))?;
        match out.item.as_ref().and_then(|item| item.get("balance")) {
            None => Ok(0),
            Some(AttributeValue::N(n)) => n.parse().map_err(|_| {
                StoreError::Corrupt(format!(
                    "account item {}: balance is not a whole number",
                    account_pk(account)
                ))
            }),
            Some(_) => Err(StoreError::Corrupt(format!(
                "account item {}: balance is not a number",
                account_pk(account)
            ))),
        }
    }

    /// The wallet half of the transaction.
    fn movement_update(&self, movement: &Movement, now: i64) -> Result<Update, HandlerError> {
        let mut update = Update::builder()
            .table_name(&self.accounts)
            .key("pk", AttributeValue::S(movement.pk()))
            .update_expression(MOVE)
            .expression_attribute_values(":delta", AttributeValue::N(movement.delta.to_string()))
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()));
        if movement.delta < 0 {
            update = update
                .condition_expression(COVERS)
                .expression_attribute_values(":needed", AttributeValue::N((-movement.delta).to_string()));
        }
        update
            .build()
            .map_err(|e| HandlerError::Permanent(format!("cannot build the wallet update: {e}")))
    }
}

#[async_trait]
impl Handler for Wallet {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        let movement = Movement::parse(&event.payload)?;
        let Some(token) = event.lease_owner.as_deref() else {
            return Err(HandlerError::Permanent(
                "no lease token: the wallet only runs under a claim of the state machine".into(),
            ));
        };
        let now = now_ms();
        let wallet = self.movement_update(&movement, now)?;
        let settle = completed_update(&self.table, &event.key(), token, self.retention, now)
            .map_err(|e| HandlerError::Permanent(e.to_string()))?;
        // In the order of WALLET_ITEM and EVENT_ITEM.
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(wallet).build())
            .transact_items(TransactWriteItem::builder().update(settle).build())
            .client_request_token(request_token(token))
            .send()
            .await;
        match result {
            Ok(_) => {
                tracing::debug!(source = %event.source, event_id = %event.event_id, "wallet movement committed");
                Ok(())
            }
            Err(e) => Err(classify(e)),
        }
    }

    fn settles_on_success(&self) -> bool {
        true
    }
}

/// A `ClientRequestToken` (at most 36 characters) for this attempt: the same for the SDK's retries of one
/// request, different for every claim.
fn request_token(lease_token: &str) -> String {
    let digest = Sha256::digest(lease_token.as_bytes());
    hex::encode(&digest[..16])
}

/// What a failed transaction means for the event.
fn classify<R: std::fmt::Debug>(e: SdkError<TransactWriteItemsError, R>) -> HandlerError {
    if let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) = e.as_service_error() {
        let reasons = cancelled.cancellation_reasons();
        let code = |i: usize| reasons.get(i).and_then(|r| r.code()).unwrap_or("None");
        // The lease first: a worker that lost it must not kill an event someone else owns.
        if code(EVENT_ITEM) == "ConditionalCheckFailed" {
            let now = reasons
                .get(EVENT_ITEM)
                .and_then(|r| r.item())
                .and_then(|item| item.get("status"))
                .and_then(|s| s.as_s().ok())
                .map_or("gone", String::as_str);
            return HandlerError::Retryable(format!(
                "lease lost before the wallet transaction (the event is {now}); nothing was applied"
            ));
        }
        if code(WALLET_ITEM) == "ConditionalCheckFailed" {
            return HandlerError::Permanent("insufficient funds for this debit; nothing was applied".into());
        }
        return HandlerError::Retryable(format!(
            "the wallet transaction was cancelled (wallet: {}, event: {}); nothing was applied",
            code(WALLET_ITEM),
            code(EVENT_ITEM)
        ));
    }
    HandlerError::Retryable(format!(
        "the wallet transaction failed: {}",
        DisplayErrorContext(&e)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_parse_into_signed_movements() {
        let credit = br#"{"id":"e1","type":"wallet.credit","data":{"account":"acc_1","amount":250}}"#;
        assert_eq!(
            Movement::parse(credit),
            Ok(Movement {
                account: "acc_1".into(),
                delta: 250
            })
        );
        let debit =
            br#"{"id":"e2","type":"wallet.debit","data":{"account":"acc_1","amount":18446744073709551615}}"#;
        assert_eq!(
            Movement::parse(debit).map(|m| m.delta),
            Ok(-18_446_744_073_709_551_615)
        );
        assert_eq!(
            Movement::parse(debit).map(|m| m.pk()),
            Ok("wallet#acc_1".to_owned())
        );
    }

    #[test]
    fn anything_else_is_permanent() {
        for body in [
            "not json",
            r#"{"type":"wallet.refund","data":{"account":"a","amount":1}}"#,
            r#"{"type":"wallet.credit"}"#,
            r#"{"type":"wallet.credit","data":{"amount":1}}"#,
            r#"{"type":"wallet.credit","data":{"account":"","amount":1}}"#,
            r#"{"type":"wallet.credit","data":{"account":"a","amount":0}}"#,
            r#"{"type":"wallet.credit","data":{"account":"a","amount":-5}}"#,
            r#"{"type":"wallet.credit","data":{"account":"a","amount":2.5}}"#,
            r#"{"type":"wallet.credit","data":{"account":"a","amount":"250"}}"#,
        ] {
            assert!(
                matches!(Movement::parse(body.as_bytes()), Err(HandlerError::Permanent(_))),
                "{body}"
            );
        }
        let long = format!(
            r#"{{"type":"wallet.debit","data":{{"account":"{}","amount":1}}}}"#,
            "a".repeat(257)
        );
        assert!(matches!(
            Movement::parse(long.as_bytes()),
            Err(HandlerError::Permanent(_))
        ));
    }

    #[test]
    fn request_tokens_fit_and_differ_per_lease() {
        let a = request_token("lambda:0123abcd:00000000000000ff");
        assert_eq!(a.len(), 32);
        assert_eq!(a, request_token("lambda:0123abcd:00000000000000ff"));
        assert_ne!(a, request_token("lambda:0123abcd:00000000000000fe"));
    }
}
