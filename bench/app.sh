#!/usr/bin/env bash
# A real application no one here wrote, recorded, predicted and replayed (issue 44's third
# acceptance point): Django's own admin and auth apps (bench/app/: settings, urls, a WSGI
# server, a driver) on the sandbox's PostgreSQL through psycopg 3 and Django's connection
# pool (psycopg_pool, a pool of one for a one-thread server).
#
# 0. The database's state: Django's migrations, an administrator, 40 users and 5 groups
#    in app_base; every run starts from a copy of it (CREATE DATABASE ... TEMPLATE).
# 1. Record: the application served over HTTP (bench/app/serve.py: the standard library's
#    WSGI server, one thread), pointed at `connbench record` in front of a copy, driven by
#    bench/app/drive.py the way its users drive it: a browser-like client logs in to
#    /admin/, opens the user and group change lists, adds a group and a user, edits the
#    user, searches, logs out; 50-200 ms of think time before each action (seeded: each
#    run makes the same requests). VISITS such visits (default 5, about 25 s).
# 2. Predict: `connbench trace --rtt 50ms --json`, the "+50 ms" scenario's
#    per_transaction_ms: a transaction's mean time (first request to last response) 50 ms
#    farther away, with its share of the connects the application made (the pool's one).
# 3. Measure: `connbench replay --rtt 50ms --json` at the recorded pace on a fresh copy:
#    its transaction_times.per_transaction_ms, each transaction's first send to its last
#    answer (the application's recorded think time kept after each answer, also when the
#    session is behind its schedule) with the connects' share: the unit of
#    per_transaction_ms. Bar: measured / predicted within 1 +- 0.10. Printed beside it:
#    the application's own time inside a transaction (the trace's split), the replay's
#    fidelity, and `--speed max`'s elapsed time over transactions (no think: a figure).
# 4. What users feel (figures, no bar): the same driver through `connbench relay --rtt
#    50ms` in front of a copy: its mean page time (an HTTP request's first byte sent to its
#    response's last byte read) beside the recording run's and beside the model applied
#    per page (the recorded page mean + 50 ms x the trace's round trips per page).
#
# Usage: bench/app.sh [VISITS]   (default 5). The Python dependencies are pinned below and
# installed once into a venv under ~/.cache/connbench-bench-app (python3-venv from apt when
# missing). Exits 0 when the bar passed, 1 when it missed, 2 when a run failed.
# CONNBENCH=path/to/connbench tests another build; APP_KEEP=DIR keeps the trace and the
# JSON reports there. APP_FAST_HASHER=1 is a diagnosis run, not the acceptance's: Django's
# test-suite password hasher (MD5) instead of PBKDF2, which takes about a second of the
# application's own time inside the admin's add-user transaction (the term step 3 prints).
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
# failed STATUS MESSAGE: a step's failure, or Ctrl-C reaching it first (its status 130 or 143).
failed() {
    case $1 in 130 | 143) echo "app: interrupted" >&2; exit 130 ;; esac
    echo "FAIL  app: $2 (exit $1)" >&2
    exit 2
}
trap 'failed $? "line $LINENO: $BASH_COMMAND"' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
VISITS=${1:-5}
[[ $VISITS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/app.sh [VISITS]" >&2; exit 2; }
RTT_MS=50
SEED=44
PINS="Django==5.2.19 psycopg==3.3.9 psycopg-binary==3.3.9 psycopg-pool==3.3.3"
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}

# The venv, made once per set of pins.
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/connbench-bench-app/venv-$(printf '%s' "$PINS" | md5sum | cut -c1-12)"
if [ ! -x "$VENV/bin/python" ]; then
    if ! python3 -c 'import ensurepip' 2>/dev/null; then
        echo "app: installing python3-venv (apt-get, as scripts/setup.sh installs)" >&2
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO=sudo
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    fi
    rm -rf "$VENV"
    python3 -m venv "$VENV.tmp"
    # shellcheck disable=SC2086 # the pins are words
    "$VENV.tmp/bin/pip" install -q --disable-pip-version-check $PINS
    mv "$VENV.tmp" "$VENV"
fi
PY=$VENV/bin/python

WORK=$(mktemp -d /tmp/cba.XXXXXX)
chmod 755 "$WORK"
export TMPDIR=$WORK
PIDS=() # what this script started and has not stopped yet: the server, the recorder, the relay
# stop PID SIGNAL: signals a process this script started, waits for it, and forgets it.
stop() {
    local p kept=()
    kill "-$2" "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
    PIDS=("${kept[@]}")
}
cleanup() {
    local p
    for p in "${PIDS[@]}"; do stop "$p" TERM; done
    "$CB" sandbox stop >/dev/null 2>&1 || true
    if [ -n "${APP_KEEP:-}" ]; then mkdir -p "$APP_KEEP" && cp "$WORK"/*.json "$WORK"/*.gz "$WORK"/*.err "$APP_KEEP"/ 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "app: interrupted" >&2; exit 130' INT TERM

"$CB" sandbox start --engines postgres --json >"$WORK/sandbox.json"
field() { python3 -c "import json,sys; d=json.load(open('$WORK/sandbox.json')); print($1)"; }
PORT=$(field "d['postgres_port']")
PASSFILE=$(field "d['passfile']")
ADMIN=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='unix'][0]")
TCP=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='tcp'][0]")
USER_=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='tcp'][0].split('user=')[1].split()[0]")
db() { printf '%s\n' "${1/dbname=connbench/dbname=$2}"; }
psql_admin() { PGOPTIONS="-c client_min_messages=warning" psql "$(db "$ADMIN" postgres)" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }
PASSWORD="admin-$RANDOM$RANDOM-pw"
export CB_APP_FAST_HASHER=${APP_FAST_HASHER:-0}
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the work tree
export PYTHONPATH=$ROOT/bench/app DJANGO_SETTINGS_MODULE=settings CB_APP_DB_USER=$USER_ CB_APP_DB_PASSFILE=$PASSFILE
echo "app bench: Django's admin on PostgreSQL 15 via psycopg 3 and Django's pool; $VISITS visits; +$RTT_MS ms; $("$CB" --version); $($PY -c 'import django, psycopg, psycopg_pool; print(f"Django {django.get_version()}, psycopg {psycopg.__version__}, psycopg_pool {psycopg_pool.__version__}")')"
if [ "$CB_APP_FAST_HASHER" = 1 ]; then echo "DIAGNOSIS RUN (APP_FAST_HASHER=1): Django's MD5 test hasher instead of PBKDF2; not the acceptance's figure"; fi

echo
echo "0. the database: migrations, an administrator, 40 users, 5 groups; copies of it"
psql_admin "CREATE DATABASE app_base" >/dev/null
CB_APP_DB_HOST=127.0.0.1 CB_APP_DB_PORT=$PORT CB_APP_DB_NAME=app_base "$PY" bench/app/seed.py "$PASSWORD"
for copy in app_rec app_relay; do psql_admin "CREATE DATABASE $copy TEMPLATE app_base" >/dev/null; done

# listen_port FILE PROCESS: the port a connbench relay or recorder printed that it listens on.
listen_port() {
    local p
    for _ in $(seq 1 100); do
        p=$(awk '/^(record|relay): 127\.0\.0\.1:/ { split($2, a, ":"); print a[2]; exit }' "$1")
        [ -n "$p" ] && { echo "$p"; return; }
        sleep 0.05
    done
    echo "FAIL  app: connbench $2 did not start: $(cat "$1")" >&2
    exit 2
}
# app NAME DB_PORT DB_NAME: serves the application against the database at DB_PORT and
# drives it; the driver's figures go to $WORK/NAME.json.
app() {
    local name=$1 sport spid
    sport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    CB_APP_DB_HOST=127.0.0.1 CB_APP_DB_PORT=$2 CB_APP_DB_NAME=$3 "$PY" bench/app/serve.py "$sport" \
        >"$WORK/$name.serve" 2>&1 &
    spid=$!
    PIDS+=("$spid")
    for _ in $(seq 1 200); do grep -q '^ready' "$WORK/$name.serve" && break; sleep 0.05; done
    grep -q '^ready' "$WORK/$name.serve" || { echo "FAIL  app: the server did not start: $(tail -3 "$WORK/$name.serve")" >&2; exit 2; }
    "$PY" bench/app/drive.py "http://127.0.0.1:$sport" "$PASSWORD" "$VISITS" "$SEED" "$WORK/$name.json" ||
        failed $? "the driver ($name): $(tail -5 "$WORK/$name.serve")"
    stop "$spid" TERM
    if grep -q Traceback "$WORK/$name.serve"; then echo "FAIL  app: the server ($name): $(tail -5 "$WORK/$name.serve")" >&2; exit 2; fi
}

echo
echo "1. recording: the application through connbench record (app_rec)"
"$CB" record --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT" --out "$WORK/app.trace.gz" \
    >"$WORK/record.out" 2>"$WORK/record.err" &
REC=$!
PIDS+=("$REC")
app rec "$(listen_port "$WORK/record.err" record)" app_rec
stop "$REC" INT
echo "  $(grep -m1 "^record: [0-9]* session" "$WORK/record.out" | sed "s/^record: //; s/ in \/.*//")"

echo
echo "2. prediction: connbench trace --rtt ${RTT_MS}ms --json"
"$CB" trace "$WORK/app.trace.gz" --rtt "${RTT_MS}ms" --json >"$WORK/trace.json"

echo
echo "3. measurement: connbench replay --rtt ${RTT_MS}ms on app_replay, at the recorded pace (the acceptance's command) and --speed max (back to back)"
# replay NAME ARGS...: a replay of the recording on a fresh copy of app_base; $WORK/NAME.json.
replay() {
    local name=$1
    shift
    psql_admin "DROP DATABASE IF EXISTS app_replay" >/dev/null
    psql_admin "CREATE DATABASE app_replay TEMPLATE app_base" >/dev/null
    "$CB" replay "$WORK/app.trace.gz" --target "$(db "$TCP" app_replay)" --rtt "${RTT_MS}ms" --progress 0 --json "$@" \
        >"$WORK/$name.json" 2>"$WORK/$name.err" ||
        failed $? "connbench replay --rtt ${RTT_MS}ms $*: $(tail -3 "$WORK/$name.err")"
}
replay replay_pace
replay replay_max --speed max

echo
echo "4. what the application's users see ${RTT_MS} ms away: the driver through connbench relay --rtt ${RTT_MS}ms (app_relay)"
"$CB" relay --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT" --rtt "${RTT_MS}ms" >"$WORK/relay.out" 2>"$WORK/relay.err" &
RELAY=$!
PIDS+=("$RELAY")
app relay "$(listen_port "$WORK/relay.err" relay)" app_relay
stop "$RELAY" INT

echo
status=0
"$PY" bench/app/judge.py "$WORK" "$RTT_MS" "$(grep -m1 '^route:' "$WORK/replay_max.err" || true)" || status=$?
exit "$status"
