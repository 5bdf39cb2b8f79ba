#!/usr/bin/env bash
# Client CPU per transaction (issue 56): connbench against pgbench and sysbench, and
# both against the floor, a client that does nothing but the wire protocol.
#
# 1. PostgreSQL, select-only, prepared, 4 clients on 2 threads, over the Unix socket:
#    pgbench (-M prepared -f select-only), connbench (load -S -M prepared), and
#    bench/floor/pg_floor.c (compiled here with cc) waiting with epoll and, when
#    liburing's header is installed, with io_uring. Interleaved rounds, the order
#    rotating from round to round.
# 2. MariaDB, oltp_point_select on sysbench's sbtest table, prepared, 4 clients:
#    sysbench (--threads=4) against connbench (load -b oltp-point-select -c 4 -j 2),
#    interleaved, the first alternating.
#
# Every tool's CPU is read the same way: the process's user and system time (bash
# `time`) over the transactions it reports, connecting included. User and system are
# printed apart: the system share is what the kernel charges a client for a
# transaction (its send wakes the server, its wait sleeps and is woken), and the floor
# shows how much of it no client can avoid here.
#
# Bars (issue 56), each on the median of the rounds' ratios:
#   connbench / pgbench CPU per transaction <= 0.80 (PostgreSQL);
#   connbench / sysbench CPU per transaction <= 0.90 (MariaDB).
# Printed beside: floor / pgbench (what the best possible client reaches here) and
# io_uring / epoll for the floor (what batching system calls saves).
#
# Usage: bench/client_cpu.sh [ROUNDS] [SECONDS]   (defaults: 5 rounds, 8 s per run)
# CONNBENCH=path/to/connbench tests another build. Exits 0 when both bars pass, 1 when
# one is missed, 2 when a run failed.
set -euo pipefail
set -E
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-8}
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbu.XXXXXX)
export TMPDIR=$WORK
trap '"$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
fail() { echo "FAIL  $1" >&2; exit 2; }

. bench/clients_common.sh
clients_setup
URING=""
if [ -e /usr/include/liburing.h ] &&
    cc -O2 -DWITH_URING -o "$WORK/floor_uring" bench/floor/pg_floor.c -lpthread -luring; then
    URING=1
fi

# Runs a tool; sets U and S (µs of user and system CPU per transaction) and TPS.
# count_* reads the transactions from the tool's own output.
measure() {
    local counter=$1 TIMEFORMAT='%U %S' status=0 n
    shift
    { time "$@" >"$WORK/out" 2>"$WORK/err" || status=$?; } 2>"$WORK/time"
    [ "$status" = 0 ] || { tail -5 "$WORK/out" "$WORK/err" >&2; fail "$* (exit $status)"; }
    n=$($counter) || fail "$*: no transaction count in its output"
    [ -n "$n" ] && [ "$n" -gt 0 ] || fail "$*: no transaction count in its output"
    read -r U S < <(awk -v n="$n" '{ printf "%.2f %.2f\n", $1 * 1e6 / n, $2 * 1e6 / n }' "$WORK/time")
    TPS=$(awk -v n="$n" -v t="$SECS" 'BEGIN { printf "%.0f", n / t }')
}
run_tool() {
    case $1 in
    pgbench) measure count_pgbench pgbench -n -M prepared -c 4 -j 2 -s 1 -f "$WORK/select-only.sql" -T "$SECS" "$UNIX" ;;
    connbench) measure count_connbench "$CB" load "$UNIX" -S -M prepared -c 4 -j 2 -T "$SECS" --json ;;
    floor) measure count_floor "$WORK/floor" "$SOCK" "$(kv user)" "$(kv dbname)" epoll "$SECS" 2 2 ;;
    floor_uring) measure count_floor "$WORK/floor_uring" "$SOCK" "$(kv user)" "$(kv dbname)" uring "$SECS" 2 2 ;;
    sysbench) measure count_sysbench sysbench oltp_point_select "${SB[@]}" --tables=1 --table-size=100000 \
        --db-ps-mode=auto --threads=4 --time="$SECS" run ;;
    connbench_mariadb) measure count_connbench "$CB" load "$MARIADB" -b oltp-point-select -M prepared -c 4 -j 2 \
        -T "$SECS" --sysbench table-size=100000 --json ;;
    esac
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "client CPU per transaction: $ROUNDS interleaved rounds x $SECS s per run, $(nproc) cores"
echo "$("$CB" --version), $(pgbench --version), $(sysbench --version)"
echo "µs of CPU per transaction, user + system = total (the process's time over its transactions)"

misses=0
verdict() { # NAME MEDIAN BAR
    if awk -v m="$2" -v b="$3" 'BEGIN { exit !(m <= b) }'; then echo "PASS  $1: median $2, bar <= $3"; else
        echo "MISS  $1: median $2, bar <= $3"
        misses=$((misses + 1))
    fi
}

echo
echo "1. PostgreSQL select-only, prepared, 4 clients, 2 threads, Unix socket"
TOOLS=(pgbench connbench floor)
[ -n "$URING" ] || echo "   (the floor's io_uring run is skipped: no liburing header; apt-get install liburing-dev)"
[ -z "$URING" ] || TOOLS+=(floor_uring)
: >"$WORK/pg_ratios"
declare -A TOT LINE
for round in $(seq 1 "$ROUNDS"); do
    n=${#TOOLS[@]}
    echo "  round $round"
    for k in $(seq 0 $((n - 1))); do
        tool=${TOOLS[$(((k + round - 1) % n))]}
        run_tool "$tool"
        TOT[$tool]=$(awk -v u="$U" -v s="$S" 'BEGIN { print u + s }')
        LINE[$tool]=$(printf '%-11s %5s + %5s = %5.2f µs %6s tps' "$tool" "$U" "$S" "${TOT[$tool]}" "$TPS")
    done
    for tool in "${TOOLS[@]}"; do echo "    ${LINE[$tool]}"; done
    r_cb=$(awk -v a="${TOT[connbench]}" -v b="${TOT[pgbench]}" 'BEGIN { printf "%.3f", a / b }')
    r_floor=$(awk -v a="${TOT[floor]}" -v b="${TOT[pgbench]}" 'BEGIN { printf "%.3f", a / b }')
    r_uring=$([ -n "$URING" ] && awk -v a="${TOT[floor_uring]}" -v b="${TOT[floor]}" 'BEGIN { printf "%.3f", a / b }' || echo -)
    echo "    connbench/pgbench $r_cb   floor/pgbench $r_floor   floor io_uring/epoll $r_uring"
    echo "$r_cb $r_floor $r_uring" >>"$WORK/pg_ratios"
done
m_cb=$(awk '{ print $1 }' "$WORK/pg_ratios" | median)
m_floor=$(awk '{ print $2 }' "$WORK/pg_ratios" | median)
echo "INFO  floor/pgbench: median $m_floor (the least any client spends here, against pgbench)"
[ -z "$URING" ] || echo "INFO  floor io_uring/epoll: median $(awk '{ print $3 }' "$WORK/pg_ratios" | median) (what batching the system calls saves)"
verdict "connbench/pgbench CPU per transaction" "$m_cb" 0.80

echo
echo "2. MariaDB oltp_point_select, prepared, 4 clients (sysbench 4 threads, connbench 2)"
: >"$WORK/my_ratios"
for round in $(seq 1 "$ROUNDS"); do
    for tool in $([ $((round % 2)) = 1 ] && echo "sysbench connbench_mariadb" || echo "connbench_mariadb sysbench"); do
        run_tool "$tool"
        TOT[$tool]=$(awk -v u="$U" -v s="$S" 'BEGIN { print u + s }')
        LINE[$tool]=$(printf '%-9s %5s + %5s = %5.2f µs %6s tps' "${tool%_mariadb}" "$U" "$S" "${TOT[$tool]}" "$TPS")
    done
    r=$(awk -v a="${TOT[connbench_mariadb]}" -v b="${TOT[sysbench]}" 'BEGIN { printf "%.3f", a / b }')
    echo "  round $round  ${LINE[sysbench]}   ${LINE[connbench_mariadb]}   connbench/sysbench $r"
    echo "$r" >>"$WORK/my_ratios"
done
verdict "connbench/sysbench CPU per transaction" "$(median <"$WORK/my_ratios")" 0.90
[ "$misses" = 0 ] || exit 1
