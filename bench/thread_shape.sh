#!/usr/bin/env bash
# How the client's thread shape decides a point select's tps on a machine whose cores the
# server shares: 4 clients on 2 threads (connbench -j 2, pgbench -j 2) against 4 clients
# on 4 threads (sysbench --threads=4, connbench -j 4), on the sandbox's PostgreSQL over
# its Unix socket, the same statement (sysbench's point select on sbtest1, ids drawn
# uniformly) and the same prepared protocol, in rounds: each round runs the four once, in
# an order that rotates from round to round.
#
# Why it exists: issue 35's bar compares connbench -c 4 -j 2 with sysbench --threads=4.
# With 2 client threads and 4 backends on 2 cores, a thread serves its two clients fast
# when both backends run on its core and slowly (each wake-up crosses cores) when they
# are split, and the kernel keeps whichever placement it started with for the run. The
# two-thread shape lands on the slow placement in some runs, for pgbench as for
# connbench; a one-thread-per-client shape pairs each client with its backend. This
# script shows that per tool: every run's tps, the mean, and the runs below 0.7x the
# tool's own fastest run (a label for the slow placement, not a measurement of it).
#
# Usage: bench/thread_shape.sh [ROUNDS] [SECONDS]   (defaults: 8 rounds, 3 s per run)
# CONNBENCH=path/to/connbench tests another build. Needs sysbench and pgbench.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-8}
SECS=${2:-3}
SIZE=100000
for t in sysbench pgbench; do
    command -v "$t" >/dev/null || { echo "thread_shape: $t is not installed" >&2; exit 2; }
done
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbt.XXXXXX)
export TMPDIR=$WORK # this script's own sandbox pointer
trap '"$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$CB" sandbox start --json >"$WORK/sandbox.json" || { echo "thread_shape: connbench sandbox start failed" >&2; exit 2; }
PG=$(python3 -c "import json; print([t for t in json.load(open('$WORK/sandbox.json'))['targets'] if t['name'] == 'unix'][0]['conninfo'])")
word() { tr ' ' '\n' <<<"$PG" | sed -n "s/^$1=//p"; }
export PGPASSFILE
PGPASSFILE=$(word passfile)
HOST=$(word host) PORT=$(word port) USER_=$(word user) DB=$(word dbname)
SB=(--db-driver=pgsql --pgsql-host="$HOST" --pgsql-port="$PORT" --pgsql-user="$USER_" --pgsql-db="$DB")
sysbench oltp_point_select "${SB[@]}" --tables=1 --table-size=$SIZE prepare >/dev/null ||
    { echo "thread_shape: sysbench prepare failed" >&2; exit 2; }
# sysbench's statement, character for character, as connbench's oltp-point-select sends it.
printf '\\set id random(1, %d)\nSELECT c FROM sbtest1 WHERE id=:id;\n' $SIZE >"$WORK/point.sql"

run() {
    case $1 in
    connbench-j2 | connbench-j4)
        "$CB" load "$PG" -b oltp-point-select --sysbench "rand-type=uniform,table-size=$SIZE" -M prepared \
            -c 4 -j "${1#connbench-j}" -T "$SECS" --json |
            python3 -c "import json, sys; print(json.load(sys.stdin)['summary']['tps'])"
        ;;
    pgbench-j2)
        pgbench -h "$HOST" -p "$PORT" -U "$USER_" -n -M prepared -c 4 -j 2 -T "$SECS" -f "$WORK/point.sql" "$DB" 2>&1 |
            awk '/^tps/ { print $3 }'
        ;;
    sysbench-t4)
        sysbench oltp_point_select "${SB[@]}" --tables=1 --table-size=$SIZE --rand-type=uniform \
            --db-ps-mode=auto --threads=4 --time="$SECS" run | awk -v t="$SECS" '/transactions:/ { print $2 / t }'
        ;;
    esac
}

TOOLS=(connbench-j2 pgbench-j2 sysbench-t4 connbench-j4)
echo "PostgreSQL point select, prepared, 4 clients, ${SECS} s per run, $ROUNDS rounds (tps)"
for r in $(seq "$ROUNDS"); do
    line="  round $r"
    for k in 0 1 2 3; do
        tool=${TOOLS[$(((k + r) % 4))]}
        tps=$(run "$tool")
        [ -n "$tps" ] || { echo "thread_shape: $tool printed no tps" >&2; exit 1; }
        echo "$tool $tps" >>"$WORK/tps"
        line+=$(printf '  %s %7.0f' "$tool" "$tps")
    done
    echo "$line"
done
for tool in "${TOOLS[@]}"; do
    awk -v t="$tool" '$1 == t { v[n++] = $2; s += $2; if ($2 > m) m = $2 }
        END { slow = 0; for (i = 0; i < n; i++) if (v[i] < 0.7 * m) slow++
              printf "%-13s mean %7.0f tps  fastest %7.0f  runs below 0.7x its fastest: %d of %d\n", t, s / n, m, slow, n }' "$WORK/tps"
done
awk '{ s[$1] += $2; n[$1]++ } END { b = s["sysbench-t4"] / n["sysbench-t4"];
    printf "mean tps against sysbench --threads=4: connbench -j 2 %.3f, pgbench -j 2 %.3f, connbench -j 4 %.3f\n",
        s["connbench-j2"] / n["connbench-j2"] / b, s["pgbench-j2"] / n["pgbench-j2"] / b, s["connbench-j4"] / n["connbench-j4"] / b }' "$WORK/tps"
