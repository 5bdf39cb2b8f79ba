#!/usr/bin/env bash
# connbench against sysbench 1.0 on the sandbox's MariaDB, interleaved pairs (the tool
# that goes first alternates), printed as ratios with PASS or MISS.
#
# 1. Point selects: connbench `load -S -M prepared -c 4 -j 2` on its accounts table
#    (100,000 rows) against sysbench's oltp_point_select, 4 threads, prepared statements
#    (its default), on its own sbtest1 of 100,000 rows. Bar: tps ratio >= 0.95. Client
#    CPU per transaction (bash `time`, user+sys over the transactions) is printed beside.
# 2. Connect: connbench `connect -q 'SELECT 1'` (mean total: socket, greeting, auth,
#    query) against a sysbench Lua event that disconnects, then connects and runs
#    SELECT 1, timing only the connect and the query (LuaJIT's ffi, clock_gettime), so
#    both figures cover the same wire work: connect(), greeting, auth, OK, query.
#    (sysbench 1.0's con:reconnect() hangs on this build, so the script closes and
#    opens explicitly.) Both run about SECS seconds. The peer does one thing more per
#    connect: libmariadb sleeps 1 µs after every connect() (a clock_nanosleep, counted
#    with strace when it is present), and a 1 µs sleep lasts the thread's timer slack,
#    50 µs by default. So each pair has a third run, both tools at 1 ns of timer slack
#    (prctl PR_SET_TIMERSLACK, inherited across exec), where that sleep costs what it
#    says; the difference between the peer's two figures is the sleep's measured cost.
#    Bar, one-sided: at 1 ns of slack (the peer's sleep taken out, so the comparison is
#    of the same work), connbench's mean no more than 10% above sysbench's (ratio <=
#    1.10; faster passes). The as-shipped ratio is printed beside it.
#
# Usage: bench/mysql_vs_sysbench.sh [PAIRS] [SECONDS]   (defaults: 3 pairs, 5 s per run)
# CONNBENCH=path/to/connbench tests another build. Needs sysbench (Debian's package).
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
# Exit status: 0 every bar passed, 1 a bar missed, 2 a run failed (bench/all.sh tells them apart).
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
PAIRS=${1:-3}
SECS=${2:-5}
command -v sysbench >/dev/null || { echo "mysql_vs_sysbench: sysbench is not installed (apt-get install sysbench)" >&2; exit 2; }
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbm.XXXXXX)
export TMPDIR=$WORK
trap '"$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$CB" sandbox start --engines postgres,mariadb --json >"$WORK/sandbox.json" ||
    { echo "mysql_vs_sysbench: connbench sandbox start failed" >&2; exit 2; }
field() { python3 -c "import json,sys; t=[t for t in json.load(open('$WORK/sandbox.json'))['targets'] if t['name']=='mariadb_unix'][0]; print(t['$1'])"; }
TARGET=$(field conninfo)
SOCKET=$(field socket)
CNF=$(field defaults_file)
PASSWORD=$(sed -n 's/^password=//p' "$CNF")
SB=(--db-driver=mysql --mysql-socket="$SOCKET" --mysql-user=connbench --mysql-password="$PASSWORD" --mysql-db=connbench)
"$CB" init "$TARGET" -s 1 >/dev/null || { echo "mysql_vs_sysbench: connbench init failed" >&2; exit 2; }
sysbench oltp_point_select "${SB[@]}" --tables=1 --table-size=100000 prepare >/dev/null ||
    { echo "mysql_vs_sysbench: sysbench prepare failed" >&2; exit 2; }

fail() { echo "FAIL  $1" >&2; exit 2; }
# Runs a command; its standard output goes to $WORK/out (the result: connbench's JSON is
# parsed from it, so a note on stderr cannot spoil it), its standard error to $WORK/err;
# prints user+sys seconds.
cpu_of() {
    local TIMEFORMAT='%U %S' status=0
    { time "$@" >"$WORK/out" 2>"$WORK/err" || status=$?; } 2>"$WORK/time"
    [ "$status" -eq 0 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "$* (exit $status)"; }
    awk '{ print $1 + $2 }' "$WORK/time"
}

misses=0
bar() { if [ "$2" = 1 ]; then echo "PASS  $1"; else echo "MISS  $1"; misses=$((misses + 1)); fi; }

echo "1. point select, 4 clients, prepared, ${SECS} s per run (bar: connbench/sysbench tps >= 0.95)"
ratios=()
for p in $(seq "$PAIRS"); do
    for tool in $([ $((p % 2)) = 1 ] && echo "sysbench connbench" || echo "connbench sysbench"); do
        if [ "$tool" = sysbench ]; then
            cpu=$(cpu_of sysbench oltp_point_select "${SB[@]}" --tables=1 --table-size=100000 --threads=4 --time="$SECS" run)
            n=$(awk '/transactions:/ { print $2 }' "$WORK/out")
            grep -q "ignored errors: *0 " "$WORK/out" || fail "sysbench point select, pair $p (errors)"
            s_tps=$(awk -v n="$n" -v t="$SECS" 'BEGIN { print n / t }')
            s_cpu=$(awk -v c="$cpu" -v n="$n" 'BEGIN { printf "%.1f", 1e6 * c / n }')
        else
            cpu=$(cpu_of "$CB" load "$TARGET" -S -M prepared -c 4 -j 2 -T "$SECS" --json)
            read -r n c_tps failed < <(python3 -c "import json; s=json.load(open('$WORK/out'))['summary']; print(s['transactions'], s['tps'], s['failed_transactions'])")
            [ "$failed" = 0 ] || fail "connbench load, pair $p ($failed failed)"
            c_cpu=$(awk -v c="$cpu" -v n="$n" 'BEGIN { printf "%.1f", 1e6 * c / n }')
        fi
    done
    r=$(awk -v a="$c_tps" -v b="$s_tps" 'BEGIN { printf "%.3f", a / b }')
    ratios+=("$r")
    printf '  pair %d  connbench %8.0f tps (%s µs CPU/tx)  sysbench %8.0f tps (%s µs CPU/tx)  ratio %s\n' \
        "$p" "$c_tps" "$c_cpu" "$s_tps" "$s_cpu" "$r"
done
mean=$(printf '%s\n' "${ratios[@]}" | awk '{ s += $1 } END { printf "%.3f", s / NR }')
bar "point select tps ratio: mean $mean (${ratios[*]})" "$(awk -v m="$mean" 'BEGIN { print (m >= 0.95) }')"

echo
echo "2. connect + SELECT 1 over the Unix socket, one client (bar: ratio <= 1.10 at 1 ns slack; faster passes)"
cat >"$WORK/reconnect.lua" <<'LUA'
local ffi = require("ffi")
pcall(ffi.cdef, "typedef struct { long tv_sec; long tv_nsec; } cb_timespec; int clock_gettime(int, cb_timespec *);")
local ts = ffi.new("cb_timespec")
local function now_ns()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
end
function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  total_ns, n = 0, 0
end
function event()
  con:disconnect()
  local t0 = now_ns()
  con = drv:connect()
  con:query("SELECT 1")
  total_ns = total_ns + (now_ns() - t0)
  n = n + 1
end
function thread_done()
  print(string.format("connect+query mean_us %.3f events %d", total_ns / n / 1000, n))
  con:disconnect()
end
LUA
if command -v strace >/dev/null 2>&1; then
    strace -f -c -e trace=clock_nanosleep,connect -o "$WORK/strace" \
        sysbench "$WORK/reconnect.lua" "${SB[@]}" --threads=1 --events=200 --time=0 run >/dev/null 2>&1 || true
    # strace -c's columns: % time, seconds, usecs/call, calls, [errors,] syscall; the
    # successful connects are calls minus errors.
    sleeps=$(awk '$NF=="clock_nanosleep" { s=$4 } $NF=="connect" { c=$4 - (NF==6 ? $5 : 0) } END { if (c > 0) printf "%.2f", s / c; else print "?" }' "$WORK/strace")
    echo "  the peer's sleeps per connect (libmariadb's usleep(1) after connect()), counted with strace: $sleeps"
fi
# Runs a command with 1 ns of timer slack (what it execs inherits it).
slack1() { python3 -c 'import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0) != 0: sys.exit("prctl(PR_SET_TIMERSLACK) failed")
os.execvp(sys.argv[1], sys.argv[1:])' "$@"; }
CONNECTS=$((SECS * 4000)) # about SECS seconds at ~150-250 µs per connect
peer_us() {
    cpu_of "$@" sysbench "$WORK/reconnect.lua" "${SB[@]}" --threads=1 --time="$SECS" run >/dev/null
    awk '/connect\+query mean_us/ { print $3; exit }' "$WORK/out"
}
connbench_us() {
    cpu_of "$@" "$CB" connect "$TARGET" -q 'SELECT 1' -n "$CONNECTS" --json >/dev/null
    python3 -c "import json; t=json.load(open('$WORK/out'))['targets'][0]; assert t['failures'] == 0, 'failures'; print(t['total']['mean_us'])" ||
        fail "connbench connect (failures or no figure)"
}
ratios=()
slack_ratios=()
for p in $(seq "$PAIRS"); do
    # Four runs per pair; their order turns round from pair to pair.
    order="peer cb peer1 cb1"
    [ $((p % 2)) = 1 ] || order="cb1 peer1 cb peer"
    for run in $order; do
        case $run in
        peer) s_us=$(peer_us) ;;
        peer1) s1_us=$(peer_us slack1) ;;
        cb) c_us=$(connbench_us) ;;
        cb1) c1_us=$(connbench_us slack1) ;;
        esac
    done
    [ -n "$s_us" ] && [ -n "$s1_us" ] || fail "sysbench connect script, pair $p (no figure)"
    [ -n "$c_us" ] && [ -n "$c1_us" ] || fail "connbench connect, pair $p (no figure)"
    r=$(awk -v a="$c_us" -v b="$s_us" 'BEGIN { printf "%.3f", a / b }')
    r1=$(awk -v a="$c1_us" -v b="$s1_us" 'BEGIN { printf "%.3f", a / b }')
    ratios+=("$r")
    slack_ratios+=("$r1")
    printf '  pair %d  as shipped: connbench %.1f µs  sysbench %.1f µs  ratio %s;  1 ns slack: connbench %.1f µs  sysbench %.1f µs  ratio %s;  the peer'"'"'s sleep cost %.1f µs\n' \
        "$p" "$c_us" "$s_us" "$r" "$c1_us" "$s1_us" "$r1" "$(awk -v a="$s_us" -v b="$s1_us" 'BEGIN { print a - b }')"
done
mean=$(printf '%s\n' "${ratios[@]}" | awk '{ s += $1 } END { printf "%.3f", s / NR }')
mean1=$(printf '%s\n' "${slack_ratios[@]}" | awk '{ s += $1 } END { printf "%.3f", s / NR }')
bar "connect ratio at 1 ns timer slack: mean $mean1 (${slack_ratios[*]}); as shipped $mean (${ratios[*]}), the difference being the peer's usleep(1)" \
    "$(awk -v m="$mean1" 'BEGIN { print (m <= 1.1) }')"
[ "$misses" -eq 0 ] || exit 1
