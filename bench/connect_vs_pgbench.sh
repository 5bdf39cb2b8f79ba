#!/usr/bin/env bash
# connbench connect vs pgbench -C: the same sandbox endpoints, the same minute,
# interleaved runs (pgbench, connbench, pgbench, connbench, ...), printed as ratios.
#
# pgbench -C reports "average connection time" (PQconnectdb + PQfinish per transaction,
# averaged). connbench reports the wire-timed total of each connect, mean and median.
# Both tools' client CPU per connection (user + sys, from bash's `time`) is printed
# beside the times: on SCRAM targets libpq spends milliseconds of client CPU on PBKDF2,
# and that CPU is inside pgbench's figure.
#
# Usage: bench/connect_vs_pgbench.sh [PAIRS] [CONNECTIONS]   (defaults: 5 pairs, 300)
# Targets: TARGETS="unix unix_trust ..." (default below). Needs pgbench (postgresql-client).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-5}
N=${2:-300}
TARGETS=${TARGETS:-"unix_trust tcp_trust unix tcp tls pgbouncer_unix_trust pgbouncer_unix"}

cargo build --release --quiet
CB=$PWD/target/release/connbench
WORK=$(mktemp -d /tmp/cbb.XXXXXX)
export TMPDIR=$WORK # the sandbox pointer of this script's own sandbox
trap '"$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$CB" sandbox start >"$WORK/sandbox.txt"
echo "SELECT 1;" >"$WORK/select1.sql"
conninfo() { awk -v n="$1" '$1==n { $1=""; sub(/^ +/, ""); print }' "$WORK/sandbox.txt"; }

# Runs a command; prints "user+sys seconds" of it on fd 3.
cpu_of() {
    local TIMEFORMAT='%U %S'
    { time "$@" >"$WORK/out" 2>&1; } 2>"$WORK/time"
    awk '{ print $1 + $2 }' "$WORK/time"
}

# A value from connbench's pretty JSON: the KEY line after "name": "total".
total_key() { awk -v k="\"$1\":" '/"name": "total"/ { t=1 } t && $1==k { gsub(/,/, "", $2); print $2; exit }' "$WORK/out"; }

printf '%s\n' "connbench connect vs pgbench -C: $PAIRS interleaved pairs x $N connections per target"
printf '%s\n' "$("$CB" --version), $(pgbench --version)"
printf '\n%-22s %4s %12s %12s %12s %8s %11s %11s\n' target pair "pgbench avg" "cb mean" "cb median" ratio "pgb cpu/c" "cb cpu/c"
for t in $TARGETS; do
    ci=$(conninfo "$t")
    [ -n "$ci" ] || { echo "no sandbox target $t" >&2; exit 2; }
    ratios=()
    for pair in $(seq 1 "$PAIRS"); do
        pcpu=$(cpu_of pgbench -n -C -c 1 -j 1 -t "$N" -f "$WORK/select1.sql" "$ci")
        pavg=$(awk '/average connection time/ { print $5 }' "$WORK/out")
        [ -n "$pavg" ] || { cat "$WORK/out" >&2; exit 1; }
        ccpu=$(cpu_of "$CB" connect "$ci" -n "$N" --warmup 1 --json)
        cmean=$(total_key mean_us)
        cp50=$(total_key p50_us)
        ratio=$(awk -v c="$cmean" -v p="$pavg" 'BEGIN { printf "%.3f", (c / 1000) / p }')
        ratios+=("$ratio")
        awk -v t="$t" -v pr="$pair" -v pa="$pavg" -v cm="$cmean" -v c5="$cp50" -v r="$ratio" \
            -v pc="$pcpu" -v cc="$ccpu" -v n="$N" 'BEGIN {
            printf "%-22s %4d %9.3f ms %9.3f ms %9.3f ms %8s %8.3f ms %8.3f ms\n",
                t, pr, pa, cm / 1000, c5 / 1000, r, pc * 1000 / n, cc * 1000 / n }'
    done
    printf '%s\n' "${ratios[@]}" | awk -v t="$t" '{ s += $1; n++; if (min == "" || $1 < min) min = $1; if ($1 > max) max = $1 }
        END { printf "%-22s  mean ratio connbench/pgbench = %.3f (min %.3f, max %.3f, %d pairs)\n\n", t, s / n, min, max, n }'
done
echo "ratio = connbench mean total / pgbench average connection time; cpu/c = client CPU (user+sys) per connection"
