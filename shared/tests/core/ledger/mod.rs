//! The ledger contract (`inbox_core::contract`, feature `contract`) over every store, each with its harness: the
//! reference store in memory (`memory`), SQLite over a real file (`sqlite`), and DynamoDB + S3 (`dynamodb`, with the
//! `aws` feature) over whatever endpoint `AWS_ENDPOINT_URL` names: moto, LocalStack or AWS itself. For example:
//!
//! ```text
//! .venv/bin/python -c 'from werkzeug.serving import run_simple; from moto.moto_server.werkzeug_app import \
//!   DomainDispatcherApplication as D, MotoRequestHandler as H, create_backend_app as c; \
//!   run_simple("127.0.0.1", 5005, D(c), threaded=False, request_handler=H)' &
//! AWS_ENDPOINT_URL=http://127.0.0.1:5005 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
//!   AWS_REGION=us-east-1 cargo test -p inbox-core --features aws --test core ledger::
//! ```
//!
//! That is `moto_server -H 127.0.0.1 -p 5005` on one thread: the stock server answers on many threads and
//! checks a condition and applies the write without a lock between them, so two racing conditional writes can
//! both succeed there (never on DynamoDB), and the race tests would fail for the emulator's sake.
//!
//! Without `AWS_ENDPOINT_URL` the DynamoDB tests print `SKIPPED` and pass, unless `INBOX_REQUIRE_AWS=1`.
//!
//! The harnesses serve the other suites that run over every store too ([`every_store!`]: the machine's, and
//! reconciliation's). What only one store does is tested beside it: `crate::sqlite`, `crate::dynamodb`.

#[cfg(feature = "aws")]
pub mod dynamodb;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod refusing;
pub mod sqlite;

/// A clock at the wall clock's now, for a harness to hand its stores.
pub fn clock_now() -> std::sync::Arc<inbox_core::clock::ManualClock> {
    inbox_core::clock::ManualClock::at(inbox_core::time::now_ms())
}

/// Makes one `#[tokio::test]` per named suite function (`async fn(&dyn Harness)`, in the calling module) for every
/// store: `memory::NAME`, `sqlite::NAME`, with the `postgres` feature `postgres::NAME`, and with the `aws` feature
/// `dynamodb::NAME`.
macro_rules! every_store {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $crate::ledger::every_store!(@store $crate::ledger::memory::MemoryHarness::start(); $($name),*);
        }
        mod sqlite {
            $crate::ledger::every_store!(@store $crate::ledger::sqlite::SqliteHarness::start(); $($name),*);
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $crate::ledger::every_store!(@store $crate::ledger::postgres::PostgresHarness::start(); $($name),*);
        }
        #[cfg(feature = "aws")]
        mod dynamodb {
            $crate::ledger::every_store!(@store $crate::ledger::dynamodb::DynamoHarness::start(); $($name),*);
        }
    };
    (@store $start:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                inbox_core::contract::run($start, stringify!($name), |harness| async move {
                    super::$name(&*harness).await
                })
                .await;
            }
        )*
    };
}
pub(crate) use every_store;
