#!/usr/bin/env bash
# Starts several instances of an example host that share one Postgres (DATABASE_URL) and one Redis (REDIS_URL), as
# instances behind a load balancer would: any of them accepts a create, any of them runs it. With QUEUE=pgboss they
# share Postgres alone (the queue on pg-boss, no REDIS_URL needed).
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/genservice REDIS_URL=redis://127.0.0.1:6379 \
#     examples/multi-instance/start.sh
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/genservice QUEUE=pgboss examples/multi-instance/start.sh
#
# Optional: INSTANCES (2), BASE_PORT (3001; instance i listens on BASE_PORT+i), HOST_APP (express-host; or
# fastify-host, koa-host), DATA_DIR (examples/multi-instance/data), S3_BUCKET (result files in S3: no directory is
# shared; with S3_ENDPOINT, S3_REGION, S3_FORCE_PATH_STYLE=1, AWS_ACCESS_KEY_ID, ...), and anything the host reads (USERS_FILE,
# CONCURRENCY, LEASE_MS, RECOVERY_INTERVAL_MS, LOG_LEVEL, DEMO_SPEED, ...). Ctrl-C or SIGTERM stops every instance
# gracefully (each finishes its running generations; waiting ones stay in Redis, or in Postgres with pg-boss).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HOST_APP="${HOST_APP:-express-host}"
HOST_DIR="${HOST_DIR:-$ROOT/examples/$HOST_APP}"
INSTANCES="${INSTANCES:-2}"
BASE_PORT="${BASE_PORT:-3001}"

: "${DATABASE_URL:?set DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/genservice}"
if [ "${QUEUE:-}" = "pgboss" ]; then
  export DATABASE_URL QUEUE
else
  : "${REDIS_URL:?set REDIS_URL, e.g. redis://127.0.0.1:6379 (or QUEUE=pgboss for Postgres alone)}"
  export DATABASE_URL REDIS_URL
fi
# Without S3_BUCKET, one data directory for all instances: a file result written by one is served by whichever the
# client reaches, the file-URL secret kept there is the same for all, and so is the demo user. With S3_BUCKET the files
# are in the bucket and each instance has a directory of its own (DATA_DIR/instance-N): nothing on disk is shared, so
# the file-URL secret is handed to all of them here.
DATA_DIR="${DATA_DIR:-$ROOT/examples/multi-instance/data}"
if [ -n "${S3_BUCKET:-}" ]; then
  export FILE_URL_SECRET="${FILE_URL_SECRET:-$(node -p "require('node:crypto').randomBytes(32).toString('base64url')")}"
fi
instance_dir() {
  if [ -n "${S3_BUCKET:-}" ]; then echo "$DATA_DIR/instance-$1"; else echo "$DATA_DIR"; fi
}
# tsx compiles the workspace packages' sources with the tsconfig it is given; the root one covers all of them (core
# needs its decorator setting).
export TSX_TSCONFIG_PATH="${TSX_TSCONFIG_PATH:-$ROOT/tsconfig.json}"

if [ ! -f "$HOST_DIR/package.json" ]; then
  echo "no example host at $HOST_DIR" >&2
  exit 1
fi
# The host's own `pnpm start` command, run without pnpm in between, so that SIGTERM reaches the host once and its
# graceful shutdown runs (pnpm's signal forwarding differs between versions).
START_CMD="$(node -p "require(process.argv[1]).scripts.start" "$HOST_DIR/package.json")"

pids=()
stop_all() {
  trap - INT TERM
  echo "stopping ${#pids[@]} instance(s)..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait || true
  exit 0
}
trap stop_all INT TERM

listening() {
  node -e "fetch('http://127.0.0.1:' + process.argv[1] + '/').then((r) => process.exit(r.status < 500 ? 0 : 1), () => process.exit(1))" "$1"
}

wait_until_listening() {
  local port=$1 pid=$2
  for _ in $(seq 1 120); do
    if listening "$port"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "instance on port $port exited during start-up" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "instance on port $port did not listen within 60 s" >&2
  return 1
}

for i in $(seq 0 $((INSTANCES - 1))); do
  port=$((BASE_PORT + i))
  dir="$(instance_dir "$i")"
  mkdir -p "$dir"
  # A session of its own: Ctrl-C reaches this script only, which sends each instance one SIGTERM.
  (cd "$HOST_DIR" && DATA_DIR="$dir" PORT=$port exec setsid $START_CMD) &
  pids+=("$!")
  # One at a time: the first creates the schema, the data directory's secret and the demo user (and credits it once);
  # the others find them ready.
  wait_until_listening "$port" "$!" || stop_all
  echo "instance $((i + 1)) of $INSTANCES: http://127.0.0.1:$port (pid ${pids[-1]})"
done

if [ "${QUEUE:-}" = "pgboss" ]; then shared="one Postgres (the queue on pg-boss)"; else shared="one Postgres and one Redis"; fi
echo "all $INSTANCES instances share $shared${S3_BUCKET:+ and the bucket $S3_BUCKET}; each serves the API at http://127.0.0.1:<port>/api/v1"
# Each instance made by itself keeps the demo user's key in its own directory; the keys live in Postgres, so the first
# instance's works on all of them.
first="$(instance_dir 0)"
if [ -f "$first/demo-user.json" ] && [ -z "${USERS_FILE:-}" ]; then
  echo "demo API key: $(node -p "require(process.argv[1]).users[0].apiKey" "$first/demo-user.json")"
fi
wait
