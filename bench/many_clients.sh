#!/usr/bin/env bash
# Many clients from one machine (issue 56): connbench load and pgbench through the
# sandbox's PgBouncer in transaction pooling (select-only, -j 2), at 100, 1,000, 3,000
# and 10,000 clients, interleaved per count (the tool that goes first alternates), printed
# per count: tps, CPU per transaction, peak RSS, the connect ramp's time, errors.
#
# CPU per transaction, two ways, as the other bench scripts measure it:
#   window  connbench's own JSON (the worker threads' user+sys over the measured window,
#           `cpu_per_transaction_us`); pgbench reports none, so "-".
#   process the whole process's user+sys (GNU time) over the transactions it reports:
#           connecting included (each login's SCRAM PBKDF2 is the client's), so at many
#           clients over a short run this is mostly the ramp, for both tools alike.
# Peak RSS is the kernel's high-water mark (GNU time's "Maximum resident set size").
# The ramp: connbench's JSON (first attempt to the last client connected); pgbench
# prints "initial connection time" (its clients connect one after another per thread
# before its clock starts).
#
# pgbench at thousands of clients may not get every client connected or process any
# transaction in the time given: whatever it prints (its exit status, its error) is
# reported as it is, not as a failure of this script.
#
# Usage: bench/many_clients.sh [SECONDS] [PAIRS]   (defaults: 30 s per run, 1 pair)
# COUNTS="100 1000 3000 10000" chooses the client counts; CONNBENCH=path tests another
# build; PGBENCH=0 runs connbench alone.
set -euo pipefail
set -E
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
SECS=${1:-30}
PAIRS=${2:-1}
COUNTS=${COUNTS:-"100 1000 3000 10000"}

if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbm.XXXXXX)
export TMPDIR=$WORK # this script's own sandbox pointer
trap '"$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$CB" sandbox start >"$WORK/sandbox.txt" || { echo "many_clients: connbench sandbox start failed" >&2; exit 2; }
conninfo() { awk -v n="$1" '$1==n { $1=""; sub(/^ +/, ""); print }' "$WORK/sandbox.txt"; }
"$CB" init "$(conninfo unix)" -s 1 >/dev/null || { echo "many_clients: connbench init failed" >&2; exit 2; }
PGB=$(conninfo pgbouncer_tx_unix)
cat >"$WORK/select-only.sql" <<'SQL'
\set aid random(1, 100000 * :scale)
SELECT abalance FROM connbench.accounts WHERE aid = :aid;
SQL
# Both tools need a descriptor per client; connbench raises its own soft limit, pgbench
# takes the shell's.
ulimit -n "$(ulimit -Hn)"

# Runs a command under GNU time; its stdout in $WORK/out, stderr in $WORK/err, and
# "status user sys maxrss_kib" in $WORK/res.
timed() {
    local status=0
    /usr/bin/time -f '%U %S %M' -o "$WORK/time" "$@" >"$WORK/out" 2>"$WORK/err" || status=$?
    echo "$status $(tail -1 "$WORK/time")" >"$WORK/res"
}
row() { # tool clients status tps tx window_us cpu_s rss_kib ramp errors
    awk -v t="$1" -v c="$2" -v st="$3" -v tps="$4" -v tx="$5" -v w="$6" -v cpu="$7" -v rss="$8" -v ramp="$9" -v err="${10}" 'BEGIN {
        per = (tx > 0) ? sprintf("%.1f", cpu * 1e6 / tx) : "-"
        printf "%-9s %7d %6s %10s %10s %10s %12s %9.1f %9s  %s\n", t, c, st, tps, tx, w, per, rss / 1024, ramp, err }'
}

run_connbench() {
    local n=$1
    timed "$CB" load "$PGB" -S -c "$n" -j 2 -T "$SECS" --json
    read -r status user sys rss <"$WORK/res"
    local fields
    fields=$(python3 - "$WORK/out" <<'PY' 2>/dev/null || echo "- - - - -"
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
r = s["connections"]["ramp"]
w = s["cpu_per_transaction_us"]
errors = s["failed_transactions"] + s["connections"]["failed_attempts"] + r["failed_attempts"]
ramp = "%.2fs" % r["took_s"] if r["connected"] == r["wanted"] else "%d/%d" % (r["connected"], r["wanted"])
print("%.1f %d %s %s %d" % (s["tps"], s["transactions"], "%.1f" % w if w else "-", ramp, errors))
PY
)
    read -r tps tx window ramp errors <<<"$fields"
    row connbench "$n" "$status" "$tps" "$tx" "$window" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
        "$rss" "$ramp" "errors $errors$( [ "$status" = 0 ] || echo "; $(tail -1 "$WORK/err")")"
}

run_pgbench() {
    local n=$1
    timed pgbench -n -c "$n" -j 2 -T "$SECS" -s 1 -f "$WORK/select-only.sql" "$PGB"
    read -r status user sys rss <"$WORK/res"
    local tps tx ramp failed
    tps=$(awk '/^tps = / { print $3; exit }' "$WORK/out")
    tx=$(awk -F': ' '/number of transactions actually processed/ { split($2, a, "/"); print a[1] }' "$WORK/out")
    failed=$(awk -F': ' '/number of failed transactions/ { split($2, a, " "); print a[1] }' "$WORK/out")
    ramp=$(awk '/initial connection time/ { printf "%.2fs", $5 / 1000; exit }' "$WORK/out")
    local note="errors ${failed:-?}"
    # No figure: say what pgbench said (its last words, on either stream).
    [ -n "$tps" ] || note="$note; $(cat "$WORK/err" "$WORK/out" | grep -v '^ *$' | tail -2 | tr '\n' ' ' | cut -c1-160)"
    [ "$status" = 0 ] || note="$note; exit $status: $(grep -m1 -i 'error' "$WORK/err" "$WORK/out" | cut -c1-100 || true)"
    row pgbench "$n" "$status" "${tps:--}" "${tx:-0}" "-" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
        "$rss" "${ramp:--}" "$note"
}

echo "many clients through PgBouncer (transaction pooling, Unix socket), select-only, -j 2, $SECS s per run, $(nproc) cores"
echo "$("$CB" --version), $(pgbench --version), open files $(ulimit -n)"
printf '%-9s %7s %6s %10s %10s %10s %12s %9s %9s  %s\n' tool clients exit tps transactions "window µs" "process µs" "RSS MiB" ramp errors
for n in $COUNTS; do
    for pair in $(seq 1 "$PAIRS"); do
        if [ "${PGBENCH:-1}" = 0 ]; then
            run_connbench "$n"
        elif [ $((pair % 2)) = 1 ]; then
            run_connbench "$n"; run_pgbench "$n"
        else
            run_pgbench "$n"; run_connbench "$n"
        fi
    done
done
