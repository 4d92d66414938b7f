//! inbox-core's integration tests, one binary (`cargo test -p inbox-core --test core`); each module is one suite,
//! run alone with its path as the filter: `cargo test -p inbox-core --test core ledger::`. The two `*_bench`
//! modules are measurements, ignored unless asked for (`-- --ignored`, see each).

mod console_aws;
mod console_bench;
mod console_browser;
mod ledger;
mod machine;
mod metrics_bench;
mod properties;
mod reconcile;
mod reconcile_providers;
