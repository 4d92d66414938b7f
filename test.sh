#!/usr/bin/env bash
# Runs every test: formatting, lints, then the whole workspace's tests — unit, signature vectors, end to end over
# HTTP against real `inbox serve` processes, the AWS runtime against a local AWS emulator (moto's server, installed
# into .venv with pip and started on a free loopback port for the run), the PostgreSQL store against a real
# PostgreSQL (Debian's, started for the run), and the operator console in Chromium (Debian's chromium and
# chromium-driver). Needs the Rust toolchain, Python with pip, and apt (root) on a machine without Chromium or
# PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")"
# What the run starts (the emulator, PostgreSQL) is stopped at exit, however it ends.
moto_pid=
stop_pg() { :; }
trap 'stop_pg; if [ -n "$moto_pid" ]; then kill "$moto_pid" 2>/dev/null || true; fi' EXIT

# The operator console's browser test drives Debian's Chromium through chromedriver (CI runs as root).
if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
  apt-get update && apt-get install -y chromium chromium-driver
fi
export CI="${CI:-1}"  # the browser test fails, not skips, without a browser

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo build --workspace --all-targets --locked

# The AWS emulator: moto's server, unless AWS_ENDPOINT_URL names one already (LocalStack from docker-compose.yml,
# a sandbox account); the per-service variables (AWS_ENDPOINT_URL_SQS and kin) pass through to the SDK as they are.
if [ -z "${AWS_ENDPOINT_URL:-}" ]; then
  MOTO_VERSION=5.2.5
  if ! .venv/bin/python -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION"
  fi
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p target
  # One request at a time: moto's threaded server checks a DynamoDB condition and applies the write without a
  # lock in between, so concurrent conditional writes could both win there (never on DynamoDB itself).
  .venv/bin/python -c '
import sys
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app),
           threaded=False, request_handler=MotoRequestHandler)
' "$port" > target/moto.log 2>&1 &
  moto_pid=$!
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/moto-api/" > /dev/null 2>&1 && break
    kill -0 "$moto_pid" 2>/dev/null || { cat target/moto.log; exit 1; }
    sleep 0.2
  done
  export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
else
  echo "AWS tests against AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL (no emulator started)"
fi
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"

# PostgreSQL for the PostgreSQL store's tests: Debian's server (installed with apt when missing), a throwaway cluster
# under /tmp owned by an unprivileged user (the server refuses root), on a free loopback port, fsync on as in
# production; stopped and removed at exit. INBOX_TEST_POSTGRES_URL names one already running instead.
if [ -z "${INBOX_TEST_POSTGRES_URL:-}" ]; then
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt-get update && apt-get install -y postgresql
  fi
  pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  pgdir=$(mktemp -d /tmp/inbox-pg.XXXXXX)
  as=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$pgdir"
    as=(runuser -u postgres --)
  fi
  pgport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${as[@]}" "$pgbin/initdb" -D "$pgdir/data" -A trust -U inbox --no-sync > "$pgdir/initdb.log"
  # TLS on (plain connections still welcome), with the test root's certificate for localhost and 127.0.0.1: the
  # server wants its key private to it.
  install -m 600 tests/data/keys/postgres-server.key "$pgdir/server.key"
  install -m 644 tests/data/keys/postgres-server.pem "$pgdir/server.pem"
  if [ "$(id -u)" = 0 ]; then chown postgres "$pgdir/server.key" "$pgdir/server.pem"; fi
  "${as[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w start \
    -o "-p $pgport -k $pgdir -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=on \
        -c ssl=on -c ssl_cert_file=$pgdir/server.pem -c ssl_key_file=$pgdir/server.key"
  stop_pg() { "${as[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$pgdir"; }
  export INBOX_TEST_POSTGRES_URL="postgres://inbox@127.0.0.1:$pgport/postgres" INBOX_TEST_POSTGRES_TLS=1
  # The test that stops and starts a database mid-storm starts a cluster of its own with these binaries.
  export INBOX_TEST_POSTGRES_BIN="$pgbin"
fi
export INBOX_REQUIRE_POSTGRES=1
export AWS_REGION="${AWS_REGION:-us-east-1}" INBOX_REQUIRE_AWS=1

cargo test --workspace --locked

# The full-size AWS duplicate storm (issue 14): 10,000 deliveries of 1,000 ids, 64 at a time, with the emulator to
# itself. The same build as above (--workspace keeps its features), so nothing compiles again.
INBOX_AWS_STORM="10000 1000 64" cargo test --workspace --locked --test aws storm:: -- --nocapture

# The deployment: the template linted (cfn-lint, checkov, sam validate), and the five functions built as the
# Lambda zips that deploy (cargo-lambda from pip; release, x86_64).
bash infra/lint.sh
CARGO_LAMBDA_VERSION=1.9.2
if [ "$(.venv/bin/pip show cargo-lambda 2>/dev/null | sed -n 's/^Version: //p')" != "$CARGO_LAMBDA_VERSION" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check "cargo-lambda==$CARGO_LAMBDA_VERSION"
fi
PATH="$PWD/.venv/bin:$PATH" cargo lambda build --release --locked --output-format zip \
  -p receiver -p processor -p alarm -p sweeper -p reconciler
# Where cargo put them (CARGO_TARGET_DIR moves the target directory); a zip missing fails the run.
for f in receiver processor alarm sweeper reconciler; do
  zip="${CARGO_TARGET_DIR:-target}/lambda/$f/bootstrap.zip"
  [ -s "$zip" ] || { echo "no Lambda zip at $zip" >&2; exit 1; }
  printf 'lambda zip %-10s %s bytes\n' "$f" "$(stat -c %s "$zip")"
done
