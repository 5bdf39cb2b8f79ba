#!/bin/bash
# Two builds of connbench on the same load, interleaved: did a change (a restructuring,
# say) move the hot path? Runs `connbench load` from BASE and from HEAD in turns (the
# order alternating each pair) against one sandbox's PostgreSQL over its Unix socket,
# and prints per case the tps of each, HEAD's tps over BASE's, and the client CPU per
# transaction of each (user + sys of the whole process, from the shell's `time`) with
# HEAD's over BASE's. pgbench stands beside them as the yardstick of the same moments.
#
# Usage: bench/base_vs_head.sh BASE_BINARY HEAD_BINARY [PAIRS] [SECONDS]
#   (defaults: 5 pairs, 8 s per run; ONLY=replay runs the replay case alone). Build a base with
#   git worktree add /tmp/base <commit> && cargo build --release --manifest-path /tmp/base/Cargo.toml
# Bar: no regression beyond the pairs' spread: HEAD's mean CPU per transaction within 3%
# of BASE's, or within the spread of the pairs' ratios (reported, exit 1 on a miss).
# Exit status: 0 the bar held, 1 it missed, 2 a run failed.
set -euo pipefail
BASE=${1:?usage: bench/base_vs_head.sh BASE_BINARY HEAD_BINARY [PAIRS] [SECONDS]}
HEAD=${2:?usage: bench/base_vs_head.sh BASE_BINARY HEAD_BINARY [PAIRS] [SECONDS]}
PAIRS=${3:-5}
SECS=${4:-8}
WORK=$(mktemp -d /tmp/cbab.XXXXXX)
export TMPDIR=$WORK
trap '"$HEAD" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$HEAD" sandbox start --engines postgres --json >"$WORK/sandbox.json" || { echo "base_vs_head: sandbox start failed" >&2; exit 2; }
field() { python3 -c "import json,sys; d=json.load(open('$WORK/sandbox.json')); print($1)"; }
UNIX=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='unix'][0]")
TCP=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='tcp'][0]")
PORT=$(field "d['postgres_port']")
"$HEAD" init "$UNIX" -s 1 >/dev/null || { echo "base_vs_head: init failed" >&2; exit 2; }
echo "base: $("$BASE" --version); head: $("$HEAD" --version); $PAIRS pairs of $SECS s, interleaved"

# Runs connbench binary $1 with the case's args; sets tps, tx and cpu (seconds).
run() {
    local TIMEFORMAT='%U %S' status=0
    # shellcheck disable=SC2086
    { time "$1" load "$UNIX" $ARGS -T "$SECS" --json >"$WORK/out" 2>"$WORK/err" || status=$?; } 2>"$WORK/time"
    [ "$status" = 0 ] || { echo "FAIL  $1 load $ARGS (exit $status): $(tail -2 "$WORK/err")" >&2; exit 2; }
    cpu=$(awk '{ print $1 + $2 }' "$WORK/time")
    read -r tps tx < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print(s["tps"], s["transactions"])' "$WORK/out")
}

misses=0
# The case's runner and the command it runs: run (load) or replay_run.
RUN=run CMD=load
case_() {
    ARGS=$2
    printf '\n%s (connbench %s %s)\n%5s %11s %11s %8s %14s %14s %8s\n' "$1" "$CMD" "$ARGS" pair "base tps" "head tps" ratio "base cpu/txn" "head cpu/txn" ratio
    local tr=() cr=()
    for pair in $(seq 1 "$PAIRS"); do
        if [ $((pair % 2)) = 1 ]; then
            $RUN "$BASE"; bt=$tps bx=$tx bc=$cpu; $RUN "$HEAD"; ht=$tps hx=$tx hc=$cpu
        else
            $RUN "$HEAD"; ht=$tps hx=$tx hc=$cpu; $RUN "$BASE"; bt=$tps bx=$tx bc=$cpu
        fi
        line=$(awk -v p="$pair" -v bt="$bt" -v ht="$ht" -v bx="$bx" -v hx="$hx" -v bc="$bc" -v hc="$hc" 'BEGIN {
            printf "%5d %11.1f %11.1f %8.3f %11.1f us %11.1f us %8.3f", p, bt, ht, ht / bt, bc * 1e6 / bx, hc * 1e6 / hx, (hc / hx) / (bc / bx) }')
        echo "$line"
        tr+=("$(echo "$line" | awk '{ print $4 }')")
        cr+=("$(echo "$line" | awk '{ print $9 }')")
    done
    verdict=$(printf '%s\n' "${cr[@]}" | awk -v t="$(printf '%s ' "${tr[@]}")" '
        { s += $1; n++; if (min == "" || $1 < min) min = $1; if (max == "" || $1 > max) max = $1 }
        END { split(t, a, " "); for (i in a) { ts += a[i]; tn++ }
              m = s / n; spread = (max - min) / 2; ok = (m <= 1.03 || m - spread <= 1.0)
              printf "%s  mean tps ratio head/base %.3f; mean CPU per transaction ratio %.3f (pairs %.3f to %.3f); bar: <= 1.03 or within the spread",
                  ok ? "PASS" : "MISS", ts / tn, m, min, max }')
    echo "$verdict"
    case $verdict in MISS*) misses=$((misses + 1)) ;; esac
}

if [ "${ONLY:-}" != replay ]; then
    case_ "select-only, prepared, 4 clients, 2 threads" "-S -M prepared -c 4 -j 2"
    case_ "tpcb-like, prepared, 4 clients, 2 threads" "-M prepared -c 4 -j 2"
    case_ "select-only, a new connection per transaction" "-S -C -c 2 -j 1"
fi

# The replay case: pgbench's tables (pgbench -i, in the sandbox's own database) and one
# recording of pgbench -S through HEAD's recorder.
pgbench -i -q -s 1 "$UNIX" >"$WORK/pgbench-init.out" 2>&1 || { echo "base_vs_head: pgbench -i: $(tail -2 "$WORK/pgbench-init.out")" >&2; exit 2; }
"$HEAD" record --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT" --out "$WORK/s.trace.gz" >"$WORK/record.out" 2>"$WORK/record.err" &
REC=$!
for _ in $(seq 1 100); do grep -q "^record: 127.0.0.1:" "$WORK/record.err" && break; sleep 0.05; done
RPORT=$(awk '/^record: 127.0.0.1:/ { split($2, a, ":"); print a[2]; exit }' "$WORK/record.err")
[ -n "$RPORT" ] || { echo "base_vs_head: connbench record did not start: $(cat "$WORK/record.err")" >&2; exit 2; }
pgbench -n -S -c 4 -j 2 -t 10000 "${TCP/port=$PORT/port=$RPORT}" >"$WORK/pgbench.out" 2>&1 || { echo "base_vs_head: pgbench through the recorder: $(tail -2 "$WORK/pgbench.out")" >&2; exit 2; }
kill -INT "$REC"; wait "$REC" || true
# Runs `connbench replay` binary $1 on the trace; sets tps (requests/s), tx (requests)
# and cpu (seconds: the replay threads'), as run() does for load.
replay_run() {
    local status=0
    "$1" replay "$WORK/s.trace.gz" --target "$TCP" --speed max --progress 0 --json >"$WORK/out" 2>"$WORK/err" || status=$?
    [ "$status" = 0 ] || { echo "FAIL  $1 replay (exit $status): $(tail -2 "$WORK/err")" >&2; exit 2; }
    read -r tps tx cpu < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; n=s["replayed"]["requests"]; print(n / s["elapsed_s"], n, s["cpu_user_s"] + s["cpu_system_s"])' "$WORK/out")
}
RUN=replay_run CMD="replay --speed max"
case_ "replay of pgbench -S (4 sessions, 40,000 requests; tps: requests/s)" "TRACE --target tcp"
[ "$misses" = 0 ] || { echo "base_vs_head: $misses bar(s) missed"; exit 1; }
