#!/usr/bin/env bash
# Runs every test: formatting, lints, then the whole workspace's tests (unit, vectors, end to end over HTTP
# against real `inbox serve` processes). Needs only the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo build --workspace --all-targets --locked
cargo test --workspace --locked
