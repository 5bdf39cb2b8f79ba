#!/usr/bin/env bash
# What `connbench record` costs the application it records (issue 44's acceptance: "the
# recorder adds no more latency per request than the relay does, and its memory stays
# flat over a 10-minute recording"), against the relay and socat, on the sandbox's
# PostgreSQL over TCP.
#
# 1. Latency added per request: pgbench -S (one client, simple protocol, SECS s) direct,
#    through `connbench relay` (no delay), through `connbench record` (writing a gzip
#    trace) and through socat, ROUNDS rounds, the paths' order turning each round. Per
#    round each path's added latency is its pgbench latency average minus the direct
#    run's in that round; the figures are the medians of the rounds. Bar: the recorder's
#    addition no more than the relay's + 10 µs (median of the rounds' differences, measured
#    side by side; 10 µs is about a round's noise here, and a tenth of the relay's own hop).
#    Beside it, each hop's CPU per transaction (its /proc ticks over the run / pgbench's
#    transactions): on 2 cores a hop's CPU is latency the others wait for.
# 2. Memory over a long recording: pgbench -S -c 2 -R 500 (500 transactions a second,
#    paced, so the recording lasts MEM_SECS s with the same traffic throughout) through the
#    recorder, its resident set (VmRSS) sampled every 10 s. Bar: the largest sample of the
#    second half at most 10% + 2 MiB above the largest of the first half after its first
#    30 s (a recorder holding each request would grow by the trace's size: tens of MiB).
#
# Usage: bench/recorder.sh [ROUNDS] [SECS] [MEM_SECS]   (defaults: 5 rounds, 5 s, 600 s).
# Exits 0 when every bar passed, 1 when one missed, 2 when a run failed.
# CONNBENCH=path/to/connbench tests another build. Needs socat for socat's figure.
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-5}
MEM_SECS=${3:-600}
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbk.XXXXXX)
export TMPDIR=$WORK
PIDS=()
stop_all() {
    local p
    for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}
trap 'stop_all; "$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
misses=0
bar() { echo "$1"; case $1 in *MISS*) misses=$((misses + 1)) ;; esac; }

"$CB" sandbox start --engines postgres --json >"$WORK/sandbox.json"
field() { python3 -c "import json,sys; d=json.load(open('$WORK/sandbox.json')); print($1)"; }
PORT=$(field "d['postgres_port']")
TCP=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='tcp'][0]")
pgbench -i -q -s 1 "$TCP" >/dev/null 2>&1
echo "recorder bench: $ROUNDS rounds of $SECS s per path; memory over $MEM_SECS s; $("$CB" --version), $(pgbench --version)"

# start NAME COMMAND...: a hop in the background printing "NAME: 127.0.0.1:PORT" on its
# standard error; sets HOP_PORT.
start_hop() {
    local name=$1
    shift
    "$@" 2>"$WORK/$name.err" >"$WORK/$name.out" &
    PIDS+=($!)
    HOP_PID=$!
    HOP_PORT=""
    for _ in $(seq 1 100); do
        HOP_PORT=$(awk -v n="$name:" '$1 == n && $2 ~ /^127\.0\.0\.1:/ { split($2, a, ":"); print a[2]; exit }' "$WORK/$name.err")
        [ -n "$HOP_PORT" ] && return 0
        sleep 0.05
    done
    echo "FAIL  $name did not start: $(cat "$WORK/$name.err")" >&2
    exit 2
}
start_hop relay "$CB" relay --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT"
RELAY=$HOP_PORT
RELAY_PID=$HOP_PID
start_hop record "$CB" record --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT" --out "$WORK/lat.trace.gz"
RECORD=$HOP_PORT
RECORD_PID=$HOP_PID
SOCAT=""
if command -v socat >/dev/null 2>&1; then
    SOCAT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    socat "TCP-LISTEN:$SOCAT,bind=127.0.0.1,fork,reuseaddr,nodelay" "TCP:127.0.0.1:$PORT,nodelay" &
    PIDS+=($!)
    for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$SOCAT") 2>/dev/null && break; sleep 0.05; done
fi

# ticks PID: the CPU the process has used, user + system, in clock ticks.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# latency PORT [PID]: pgbench -S's latency average in µs through 127.0.0.1:PORT; with
# the hop's PID also the hop's CPU per transaction in µs (its ticks over the run).
latency() {
    local t0=""
    [ -z "${2:-}" ] || t0=$(ticks "$2")
    pgbench -n -S -c 1 -T "$SECS" "${TCP/port=$PORT/port=$1}" >"$WORK/pgb.out" 2>&1 ||
        { echo "FAIL  pgbench -S through port $1: $(tail -2 "$WORK/pgb.out")" >&2; exit 2; }
    awk '/^latency average/ { printf "%.1f", $4 * 1000 }' "$WORK/pgb.out"
    if [ -n "$t0" ]; then
        awk -v d=$(($(ticks "$2") - t0)) -v hz="$(getconf CLK_TCK)" \
            '/^number of transactions actually processed/ { split($NF, a, "/"); printf " %.1f", d / hz * 1e6 / a[1] }' "$WORK/pgb.out"
    fi
    echo
}

echo
echo "1. latency added per request, pgbench -S -c 1, $SECS s per run (bar: recorder's addition <= relay's + 10 us, medians of the rounds)"
printf '  %-6s %10s %10s %10s %10s   (pgbench latency average, us; the hop'"'"'s CPU per transaction, us)\n' round direct relay record socat
paths=(direct relay record)
[ -z "$SOCAT" ] || paths+=(socat)
: >"$WORK/rounds.txt"
for round in $(seq 1 "$ROUNDS"); do
    declare -A lat=() cpu=()
    for i in "${!paths[@]}"; do # the order turns: each path goes first in turn
        p=${paths[$(((i + round - 1) % ${#paths[@]}))]}
        case $p in
            direct) read -r lat[$p] < <(latency "$PORT") ;;
            relay) read -r lat[$p] cpu[$p] < <(latency "$RELAY" "$RELAY_PID") ;;
            record) read -r lat[$p] cpu[$p] < <(latency "$RECORD" "$RECORD_PID") ;;
            socat) read -r lat[$p] < <(latency "$SOCAT") ;;
        esac
    done
    printf '  %-6s %10s %10s %10s %10s   cpu: relay %s, record %s\n' "$round" "${lat[direct]}" "${lat[relay]}" \
        "${lat[record]}" "${lat[socat]:-}" "${cpu[relay]}" "${cpu[record]}"
    echo "${lat[direct]} ${lat[relay]} ${lat[record]} ${lat[socat]:-nan} ${cpu[relay]} ${cpu[record]}" >>"$WORK/rounds.txt"
done
bar "$(python3 - "$WORK/rounds.txt" <<'PY'
import math, statistics as st, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
relay = st.median(r[1] - r[0] for r in rows)
record = st.median(r[2] - r[0] for r in rows)
diff = st.median(r[2] - r[1] for r in rows)
socat = [r[3] - r[0] for r in rows if not math.isnan(r[3])]
socat_s = f"; socat +{st.median(socat):.1f} us" if socat else ""
cpu_relay, cpu_record = st.median(r[4] for r in rows), st.median(r[5] for r in rows)
print(f"  CPU per transaction, medians: relay {cpu_relay:.1f} us, recorder {cpu_record:.1f} us "
      f"({cpu_record / cpu_relay:.2f}x; the recorder decodes and writes each request)")
print(f"  added, medians of {len(rows)} rounds: relay +{relay:.1f} us, recorder +{record:.1f} us{socat_s}; "
      f"recorder - relay {diff:+.1f} us (bar <= +10.0) {'PASS' if diff <= 10 else 'MISS'}")
PY
)"
stop_all
echo "  trace written meanwhile: $(head -1 "$WORK/record.out" | sed 's/^record: //')"

echo
echo "2. memory over a ${MEM_SECS} s recording, pgbench -S -c 2 -R 500 through the recorder (bar: second half's largest RSS <= first half's x 1.10 + 2 MiB)"
start_hop record "$CB" record --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT" --out "$WORK/mem.trace.gz"
REC_PID=$HOP_PID
pgbench -n -S -c 2 -R 500 -T "$MEM_SECS" "${TCP/port=$PORT/port=$HOP_PORT}" >"$WORK/mem.pgb" 2>&1 &
PGB=$!
: >"$WORK/rss.txt"
t0=$SECONDS
while kill -0 "$PGB" 2>/dev/null; do
    echo "$((SECONDS - t0)) $(awk '/^VmRSS/ { print $2 }' "/proc/$REC_PID/status") $(stat -c %s "$WORK/mem.trace.gz" 2>/dev/null || echo 0)" >>"$WORK/rss.txt"
    sleep 10
done
wait "$PGB" || { echo "FAIL  pgbench -S -R 500 through the recorder: $(tail -2 "$WORK/mem.pgb")" >&2; exit 2; }
stop_all
echo "  $(awk '/^number of transactions actually processed/ { print $NF }' "$WORK/mem.pgb") transactions; trace: $(head -1 "$WORK/record.out" | sed 's/^record: //')"
bar "$(python3 - "$WORK/rss.txt" "$MEM_SECS" <<'PY'
import sys
rows = [tuple(int(x) for x in line.split()) for line in open(sys.argv[1]) if len(line.split()) == 3]
half = int(sys.argv[2]) / 2
first = [r for r in rows if 30 <= r[0] < half]
second = [r for r in rows if r[0] >= half]
if not first or not second:
    print(f"  too few samples ({len(rows)}) for the bar: MISS")
    sys.exit()
a, b = max(r[1] for r in first), max(r[1] for r in second)
ok = b <= a * 1.10 + 2048
marks = ", ".join(f"{r[0]} s {r[1] / 1024:.1f}" for r in rows[:: max(1, len(rows) // 8)])
print(f"  RSS MiB at {marks}; trace {rows[-1][2] / 2**20:.1f} MiB gzip at the last sample")
print(f"  largest RSS: first half {a / 1024:.1f} MiB, second half {b / 1024:.1f} MiB "
      f"({(b - a) / 1024:+.1f}) {'PASS' if ok else 'MISS'}")
PY
)"
[ "$misses" = 0 ] || { echo "recorder: $misses bar(s) missed" >&2; exit 1; }
