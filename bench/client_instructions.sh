#!/usr/bin/env bash
# The client's own instructions per transaction (issue 56): connbench against pgbench,
# sysbench and the floor client, counted by valgrind's callgrind instead of timed.
#
# Why counted: on a noisy 2-core VM a client's CPU time per transaction swings by a
# fifth from run to run with where the scheduler puts the threads (bench/client_cpu.sh
# needs medians of many rounds to see 10%). The instructions a client executes in user
# space are the same run after run (within about 1%), so a change to the hot path shows
# here at once. What this does not see: the kernel's share (three quarters of a
# select-only transaction's client CPU here, and every client's alike) and how fast
# the instructions run. It complements the timed bench; it does not replace it.
#
# Method: each tool runs twice under callgrind, for SHORT and LONG seconds; the
# difference in instructions over the difference in transactions is the steady state's
# cost (start-up, SCRAM, and the report cancel out). Callgrind runs a process's threads
# one at a time, so a thread finds more answers waiting per wake than natively; every
# tool is measured the same way.
#   1. PostgreSQL select-only, prepared, 4 clients on 2 threads, Unix socket: pgbench,
#      connbench, and the floor (bench/floor/pg_floor.c: the wire protocol and nothing
#      else; about 700 of its instructions are the snprintf of the key).
#   2. MariaDB oltp_point_select, prepared, 4 clients: sysbench (4 threads) and connbench
#      (2 threads).
#   3. Replay: pgbench -S (simple protocol, TCP, -c 4 -j 2) recorded through `connbench
#      record`, 5,000 and 20,000 transactions a client; `connbench replay --speed max` of
#      each, counted in its replay threads only (reading the trace comes before the
#      replay, and pgbench has nothing like it), against pgbench -S itself.
#
# Usage: bench/client_instructions.sh [SHORT] [LONG]   (defaults: 2 and 6 seconds)
# Needs valgrind (apt-get install valgrind). CONNBENCH=path tests another build. The
# sandbox and the tools' set-up are bench/clients_common.sh's, as client_cpu.sh's.
# Prints figures and ratios, no bars: exits 0 when every tool ran, 2 when one failed.
set -euo pipefail
set -E
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
SHORT=${1:-2}
LONG=${2:-6}
fail() { echo "FAIL  $1" >&2; exit 2; }
command -v valgrind >/dev/null || fail "valgrind is not installed: apt-get install valgrind"
[ "$LONG" -gt "$SHORT" ] || fail "LONG ($LONG s) must be longer than SHORT ($SHORT s)"
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
# Debian's /usr/bin/pgbench is a Perl wrapper: callgrind must run the binary itself.
PGBENCH=$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1)
[ -n "$PGBENCH" ] || PGBENCH=$(command -v pgbench) || fail "pgbench is not installed"
WORK=$(mktemp -d /tmp/cbi.XXXXXX)
export TMPDIR=$WORK
trap '"$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

. bench/clients_common.sh
clients_setup

count_replay() {
    python3 -c "import json, sys; s = json.load(open('$WORK/out'))['summary']
sys.exit(1) if s['fidelity']['requests_not_sent'] else print(s['replayed']['requests'])"
}
# A recording of pgbench -S, N transactions a client, through `connbench record`.
record_select() {
    local n=$1 rport
    "$CB" record --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT" --out "$WORK/select-$n.trace.gz" \
        >"$WORK/record.out" 2>"$WORK/record.err" &
    local rec=$!
    for _ in $(seq 1 100); do grep -q "^record: 127.0.0.1:" "$WORK/record.err" && break; sleep 0.05; done
    rport=$(awk '/^record: 127.0.0.1:/ { split($2, a, ":"); print a[2]; exit }' "$WORK/record.err")
    [ -n "$rport" ] || fail "connbench record did not start: $(cat "$WORK/record.err")"
    pgbench -n -S -c 4 -j 2 -t "$n" "${TCP/port=$PORT/port=$rport}" >"$WORK/record.pgbench" 2>&1 ||
        fail "pgbench -S through the recorder: $(tail -2 "$WORK/record.pgbench")"
    kill -INT "$rec"
    # Stopped by Ctrl-C, as a user stops it: it exits 130 once the trace is written.
    local status=0
    wait "$rec" || status=$?
    [ "$status" = 0 ] || [ "$status" = 130 ] || fail "connbench record (exit $status): $(tail -2 "$WORK/record.err")"
}
# One run of TOOL for SECS seconds under callgrind; prints "instructions transactions".
counted() {
    local tool=$1 secs=$2 counter cmd only=()
    case $tool in
    pgbench) counter=count_pgbench cmd=("$PGBENCH" -n -M prepared -c 4 -j 2 -f "$WORK/select-only.sql" -T "$secs" "$UNIX") ;;
    connbench) counter=count_connbench cmd=("$CB" load "$UNIX" -S -M prepared -c 4 -j 2 -T "$secs" --json) ;;
    floor) counter=count_floor cmd=("$WORK/floor" "$SOCK" "$(kv user)" "$(kv dbname)" epoll "$secs" 2 2) ;;
    sysbench) counter=count_sysbench cmd=(sysbench oltp_point_select "${SB[@]}" --tables=1 --table-size=100000
        --db-ps-mode=auto --threads=4 --time="$secs" run) ;;
    connbench_mariadb) counter=count_connbench cmd=("$CB" load "$MARIADB" -b oltp-point-select -M prepared -c 4 -j 2
        -T "$secs" --sysbench table-size=100000 --json) ;;
    pgbench_S) counter=count_pgbench cmd=("$PGBENCH" -n -S -c 4 -j 2 -T "$secs" "$TCP") ;;
    # SECS is the recording's transactions a client here; the statements are counted.
    replay) counter=count_replay cmd=("$CB" replay "$WORK/select-$secs.trace.gz" --target "$TCP" --speed max
        --progress 0 --json) only=(--toggle-collect='connbench::replay::playback::worker') ;;
    esac
    valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out" --fair-sched=yes "${only[@]}" "${cmd[@]}" \
        >"$WORK/out" 2>"$WORK/err" || { tail -5 "$WORK/out" "$WORK/err" >&2; fail "$tool under callgrind"; }
    local ir n
    ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$WORK/err" | tail -1)
    n=$($counter) || fail "$tool: no transaction count in its output"
    [ -n "$ir" ] && [ -n "$n" ] || fail "$tool: no instruction or transaction count"
    [ "$n" -gt 0 ] || fail "$tool: no transaction in its $secs s run under callgrind (connecting took it all): run with a longer SHORT"
    echo "$ir $n"
}
declare -A PER
measure() { # TOOL [SHORT LONG]
    local tool=$1 short long
    short=$(counted "$tool" "${2:-$SHORT}")
    long=$(counted "$tool" "${3:-$LONG}")
    read -r PER[$tool] line < <(echo "$short $long" | awk '{
        if ($4 <= $2) exit 1
        per = ($3 - $1) / ($4 - $2)
        printf "%.0f %d and %d transactions\n", per, $2, $4 }') || fail "$tool: no more transactions in the longer run"
    printf '  %-10s %6s instructions per transaction   (%s)\n' "${tool%_mariadb}" "${PER[$tool]}" "$line"
}
ratio() { awk -v a="${PER[$1]}" -v b="${PER[$2]}" 'BEGIN { printf "%.3f", a / b }'; }

echo "client instructions per transaction (user space, callgrind), $SHORT s against $LONG s runs"
echo "$("$CB" --version), $("$PGBENCH" --version), $(sysbench --version), $(valgrind --version)"
echo
echo "1. PostgreSQL select-only, prepared, 4 clients, 2 threads, Unix socket"
# pgbench under callgrind spends its first seconds connecting (SCRAM, five connections;
# at 10:20 on 2026-11-29 a 2 s run processed no transaction at all): twice as long.
measure pgbench $((SHORT * 2)) $((LONG * 2))
for tool in connbench floor; do measure "$tool"; done
echo "  connbench/pgbench $(ratio connbench pgbench)   floor/pgbench $(ratio floor pgbench)"
echo
echo "2. MariaDB oltp_point_select, prepared, 4 clients (sysbench 4 threads, connbench 2)"
for tool in sysbench connbench_mariadb; do measure "$tool"; done
echo "  connbench/sysbench $(ratio connbench_mariadb sysbench)"
echo
echo "3. Replay at full speed of a pgbench -S recording (TCP, 4 sessions on 2 threads), against pgbench -S"
pgbench -i -q -s 1 "$TCP" >/dev/null 2>&1 || fail "pgbench -i on the sandbox"
record_select 5000
record_select 20000
# As in part 1, pgbench needs longer runs under callgrind.
measure pgbench_S $((SHORT * 2)) $((LONG * 2))
measure replay 5000 20000
echo "  replay/pgbench -S $(ratio replay pgbench_S)   (the replay's are statements)"
