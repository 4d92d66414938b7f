//! The AWS runtime end to end against a local AWS emulator (moto's server, started by `./test.sh`; any endpoint
//! in `AWS_ENDPOINT_URL` works: LocalStack, or a sandbox account). Requests go through the receiver's real handler
//! built from Function URL event JSON; a test-side poller plays the SQS event source mapping: it receives a batch,
//! builds the `SqsEvent`, calls the processor's handler and deletes the messages it did not report as failed.
//!
//! One test binary (`cargo test --test aws`; one module's tests: `cargo test --test aws crashes::`), so the AWS
//! SDK is linked once for all of them.
#![allow(clippy::unwrap_used)]

// The stack under test and its deliveries: the helpers every module below uses.
// A provider's sender: signing its webhooks, drawing which are lost (shared by both test binaries).
#[path = "../sender.rs"]
mod sender;
mod stack;

// The receiver→processor paths.
mod flow;
// Crash points on AWS: an invocation dies at a point, and the next one, the redrive or the sweeper finishes.
mod crashes;
// Batched deliveries and an asymmetric provider through the receiver function.
mod providers;
// The duplicate storm through the receiver router.
mod storm;
// The reconciler function against a fake Stripe.
mod reconcile;
// What a deployed function reads from the environment, SSM and Secrets Manager, and what it refuses at start.
mod deploy;
// Retention: a body in S3 expires after its event, and the config must agree with the template.
mod retention;
// The template's alarms firing on what the functions emit.
mod delivery_health;
// IAM proven by calls: each function's calls against its role.
mod calls;
// `inbox aws play` against Lambda's Invoke API.
mod player;
// The exactly-once wallet example run through duplicates, races and crashes.
mod exactly_once;

// The exactly-once example handler: a module of this test, not of the library, so no function links it.
mod wallet;
// CloudWatch's side of the delivery-health alarms: the template's alarms evaluated over EMF lines.
mod alarms;
// What the template grants each function, and the IAM actions behind its calls.
mod iam;
// The payload bucket's lifecycle rules, and when S3 would expire an object under them.
mod lifecycle;
// Bodies kept in S3: every path a body takes, and the invariant of docs/DESIGN.md "Retention and expiry" after each.
mod bodies;
