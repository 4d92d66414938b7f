//! inbox-console's integration tests, one binary (`cargo test -p inbox-console --test console`), since one of them
//! links the AWS SDK; each module is one suite, run alone with its path as the filter: `cargo test -p inbox-console
//! --test console browser::`. The handler tests, over SQLite, are the crate's unit tests (`src/tests.rs`).
//!
//! - `browser`: the console in Chromium, over a store an in-process `inbox serve` is processing;
//! - `aws`: `inbox console --aws`, over DynamoDB, SQS and CloudWatch (the emulator `./test.sh` starts);
//! - `bench`: the page timings over a million stored events, ignored unless asked for (`-- --ignored`, see it).

mod aws;
mod bench;
mod browser;
