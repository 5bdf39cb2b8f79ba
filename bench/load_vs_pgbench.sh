#!/usr/bin/env bash
# connbench load vs pgbench: the same sandbox, the same SQL on the same tables, the same
# clients and threads, interleaved runs (pgbench, connbench, pgbench, connbench, ...),
# printed as ratios. pgbench runs connbench's built-in scripts with -f (they are
# pgbench's own builtins, pointed at schema connbench).
#
# Client CPU per transaction is measured the same way for both: the process's user+sys
# time (bash `time`) over the transactions it reports. The tool that goes first
# alternates from pair to pair; both count no warm-up (pgbench has none, connbench runs
# with its default --warmup 0).
#
# Bars (issue 3): select-only tps ratio >= 1.0 with connbench's CPU per transaction <=
# pgbench's; the others are printed as figures. Each bar is printed with PASS or MISS;
# the script exits 1 when a bar is missed, 2 when a run failed (exit status, failed
# transactions, or no figure in its output).
#
# Usage: bench/load_vs_pgbench.sh [PAIRS] [SECONDS]   (defaults: 3 pairs, 10 s per run)
# CASES="select tpcb connect many" chooses the comparisons (default: all four);
# CONNBENCH=path/to/connbench tests another build; CONNBENCH_ARGS="..." adds flags to
# every connbench load (e.g. CONNBENCH_ARGS="--metrics-listen 127.0.0.1:0", to price the
# live metrics endpoint).
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
# Exit status: 0 every bar passed, 1 a bar missed, 2 a run failed (bench/all.sh tells them apart).
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
PAIRS=${1:-3}
SECS=${2:-10}
CASES=${CASES:-"select tpcb connect many"}
want() { case " $CASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbl.XXXXXX)
export TMPDIR=$WORK # this script's own sandbox pointer
trap '"$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$CB" sandbox start >"$WORK/sandbox.txt" || { echo "load_vs_pgbench: connbench sandbox start failed" >&2; exit 2; }
conninfo() { awk -v n="$1" '$1==n { $1=""; sub(/^ +/, ""); print }' "$WORK/sandbox.txt"; }
UNIX=$(conninfo unix)
"$CB" init "$UNIX" -s 1 >/dev/null || { echo "load_vs_pgbench: connbench init failed" >&2; exit 2; }

cat >"$WORK/select-only.sql" <<'SQL'
\set aid random(1, 100000 * :scale)
SELECT abalance FROM connbench.accounts WHERE aid = :aid;
SQL
cat >"$WORK/tpcb-like.sql" <<'SQL'
\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE connbench.accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM connbench.accounts WHERE aid = :aid;
UPDATE connbench.tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE connbench.branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO connbench.history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
SQL

# Runs a command; prints its user+sys seconds. Its output is in $WORK/out, its exit
# status in $WORK/status.
cpu_of() {
    local TIMEFORMAT='%U %S' status=0
    # stdout alone is the result (connbench's JSON); stderr (notes, the metrics
    # endpoint's address) is kept apart and shown on a failure.
    { time "$@" >"$WORK/out" 2>"$WORK/err" || status=$?; } 2>"$WORK/time"
    echo "$status" >"$WORK/status"
    awk '{ print $1 + $2 }' "$WORK/time"
}
failed() {
    echo "FAIL  $1 (exit $(cat "$WORK/status")):" >&2
    tail -5 "$WORK/out" "$WORK/err" >&2
    exit 2
}
json_key() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"][sys.argv[2]])' "$WORK/out" "$1"; }

run_pgbench() {
    # shellcheck disable=SC2086
    pcpu=$(cpu_of pgbench -n $pargs -T "$SECS" "$UNIX_OR_TARGET")
    [ "$(cat "$WORK/status")" = 0 ] || failed "pgbench ($name), pair $pair"
    ptps=$(awk '/^tps = / { print $3; exit }' "$WORK/out")
    ptx=$(awk -F': ' '/number of transactions actually processed/ { split($2, a, "/"); print a[1] }' "$WORK/out")
    [ -n "$ptps" ] && [ -n "$ptx" ] || failed "pgbench ($name), pair $pair: no tps in its output"
}
run_connbench() {
    # shellcheck disable=SC2086
    ccpu=$(cpu_of "$CB" load "$UNIX_OR_TARGET" $cargs ${CONNBENCH_ARGS:-} -T "$SECS" --json)
    [ "$(cat "$WORK/status")" = 0 ] || failed "connbench load ($name), pair $pair"
    ctps=$(json_key tps) && ctx=$(json_key transactions) && cfail=$(json_key failed_transactions) ||
        failed "connbench load ($name), pair $pair: no tps in its JSON"
    [ "$cfail" = "0" ] || failed "connbench load ($name), pair $pair: $cfail failed transactions"
}

misses=0
# compare NAME "pgbench args" "connbench args" BAR (tps: ratio >= 1 and CPU <=; none)
compare() {
    local ratios=() cpus=()
    name=$1 pargs=$2 cargs=$3
    local bar=$4
    printf '\n%s\n%5s %12s %12s %8s %14s %14s\n' "$name" pair "pgbench tps" "cb tps" ratio "pgb cpu/txn" "cb cpu/txn"
    for pair in $(seq 1 "$PAIRS"); do
        if [ $((pair % 2)) = 1 ]; then run_pgbench; run_connbench; else run_connbench; run_pgbench; fi
        ratio=$(awk -v c="$ctps" -v p="$ptps" 'BEGIN { printf "%.3f", c / p }')
        ratios+=("$ratio")
        cpus+=("$(awk -v pc="$pcpu" -v px="$ptx" -v cc="$ccpu" -v cx="$ctx" 'BEGIN { printf "%.3f", (cc / cx) / (pc / px) }')")
        awk -v pr="$pair" -v pt="$ptps" -v ct="$ctps" -v r="$ratio" -v pc="$pcpu" -v px="$ptx" -v cc="$ccpu" -v cx="$ctx" 'BEGIN {
            printf "%5d %12.1f %12.1f %8s %11.1f us %11.1f us\n", pr, pt, ct, r, pc * 1e6 / px, cc * 1e6 / cx }'
    done
    local line
    line=$(printf '%s %s\n' "$(printf '%s ' "${ratios[@]}")" "$(printf '%s ' "${cpus[@]}")" | awk -v n="$name" -v k="$PAIRS" -v bar="$bar" '{
        for (i = 1; i <= k; i++) { s += $i; if (min == "" || $i < min) min = $i; if ($i > max) max = $i; c += $(i + k) }
        m = s / k; cpu = c / k
        ok = (bar != "tps") || (m >= 1.0 && cpu <= 1.0)
        printf "%s  %s: mean tps ratio connbench/pgbench = %.3f (min %.3f, max %.3f, %d pairs), CPU per transaction ratio %.3f%s\n",
            (bar == "tps") ? (ok ? "PASS" : "MISS") : "INFO", n, m, min, max, k, cpu,
            (bar == "tps") ? "; bar: tps ratio >= 1.0 and CPU ratio <= 1.0" : "" }')
    echo "$line"
    case $line in MISS*) misses=$((misses + 1)) ;; esac
}

echo "connbench load vs pgbench: $PAIRS interleaved pairs x $SECS s per run, sandbox scale 1, $(nproc) cores"
echo "$("$CB" --version), $(pgbench --version)"
UNIX_OR_TARGET=$UNIX
want select && compare "select-only, prepared, 4 clients, 2 threads, unix" \
    "-M prepared -c 4 -j 2 -s 1 -f $WORK/select-only.sql" "-S -M prepared -c 4 -j 2" tps
want tpcb && compare "tpcb-like, simple, 8 clients, 2 threads, unix" \
    "-c 8 -j 2 -s 1 -f $WORK/tpcb-like.sql" "-c 8 -j 2" none
want connect && compare "select-only, new connection per transaction (pgbench -C), 4 clients, 2 threads, unix" \
    "-C -c 4 -j 2 -s 1 -f $WORK/select-only.sql" "-S -C -c 4 -j 2" none

# 1,000 clients through PgBouncer's transaction pooling: no errors, and memory that stays
# flat (RSS sampled every second; peak from the kernel's high-water mark).
want many || { [ "$misses" = 0 ] || { echo "load_vs_pgbench: $misses bar(s) missed" >&2; exit 1; }; exit 0; }
PGB=$(conninfo pgbouncer_tx_unix)
echo
echo "1000 clients, 2 threads, select-only via PgBouncer (transaction pooling), $((SECS * 2)) s"
"$CB" load "$PGB" -S -c 1000 -j 2 -T $((SECS * 2)) --json >"$WORK/big.json" 2>"$WORK/big.err" &
pid=$!
samples=()
while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS/ { print $2 }' /proc/$pid/status 2>/dev/null || true)
    hwm=$(awk '/^VmHWM/ { print $2 }' /proc/$pid/status 2>/dev/null || true)
    [ -n "$rss" ] && samples+=("$rss") && peak=$hwm
    sleep 1
done
wait "$pid" || { echo "FAIL  connbench load, 1000 clients via PgBouncer:" >&2; tail -5 "$WORK/big.err" >&2; exit 2; }
cp "$WORK/big.json" "$WORK/out"
echo "transactions $(json_key transactions), failed $(json_key failed_transactions), tps $(json_key tps)"
[ "$(json_key failed_transactions)" = 0 ] || { echo "FAIL  1000 clients via PgBouncer: failed transactions" >&2; exit 2; }
echo "RSS per second (MiB): $(printf '%s\n' "${samples[@]}" | awk '{ printf "%.1f ", $1 / 1024 }')"
echo "peak RSS: $(awk -v p="$peak" 'BEGIN { printf "%.1f MiB", p / 1024 }')"
[ "$misses" = 0 ] || { echo "load_vs_pgbench: $misses bar(s) missed" >&2; exit 1; }
