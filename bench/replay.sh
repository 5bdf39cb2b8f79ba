#!/usr/bin/env bash
# connbench replay against pgreplay, the peer that replays PostgreSQL's server log (issue
# 44), on the sandbox's PostgreSQL over TCP.
#
# 0. Two pgbench runs go through `connbench record` while the server logs every statement
#    the way pgreplay needs it (ALTER SYSTEM on the sandbox's own server: log_statement=
#    all, connections and disconnections, log_line_prefix '%m|%u|%d|%c|', lc_messages C),
#    so one run feeds both replayers (the trace connbench, the server's log pgreplay):
#    A. tpcb-like, -c 4 -T SECS (the simple protocol, pgbench's tables, scale 1);
#    B. select-only (-S), -c 4 -t N with N = 2,250 x SECS per client (about SECS through
#       the recorder): no row locks, the workload pgreplay can replay (its README:
#       statements of sessions that change the same rows can overtake each other on
#       replay, hit a lock, and the replay "deadlocks and hangs"). A count per client, not
#       a time: each recorded session then holds the same number of statements, as each
#       of pgbench's clients in part 3 does. With -T the sessions' counts differ by what
#       the recording's scheduling gave each client (18,188 to 24,770 in one 10 s
#       recording), and a replay of them at full speed ends with fewer sessions running
#       than the server's ceiling is measured with: the last quarter of the statements
#       at one to three clients' rate (0.84-0.91 of pgbench -S -T in one run, 0.91-0.93
#       with balanced sessions on the same machine).
# 1. Fidelity on A at the recorded pace, on a fresh `pgbench -i` database: the server's
#    counters per statement kind (UPDATEs of accounts, tellers and branches: n_tup_upd;
#    INSERTs into history: n_tup_ins) against the recording's (the same counters, read
#    after it). connbench's lag behind the schedule is printed whole and split: waiting
#    for the server (its previous answer came after the intended time: at scale 1 every
#    transaction queues on the one branch row, and a replay's interleaving of the
#    sessions meets other lock waits than the recording's) and connbench's own send delay
#    (the send minus the later of the intended time and that answer: the replay engine's
#    share). Bars: every count equal; connbench's own send delay p99 <= 1 ms (the total
#    is printed: the server sets it). pgreplay is given A too, with 3 x SECS to finish;
#    whether it did is printed.
# 2. Lag on B at the recorded pace, printed the same way, beside pgreplay's "maximum lag
#    behind schedule" (whole seconds, its only figure). Bar: connbench's own send delay
#    p99 <= 1 ms.
# 3. Speed on B, each replayer as fast as it goes (connbench --speed max; pgreplay -s 1000
#    -j: a thousand times the pace, idle stretches skipped), interleaved pairs, each on a
#    fresh `pgbench -i`: the recorded statements over each replayer's elapsed time.
#    Beside it, pgbench -S's own statements per second on the same statements (-c 4 -t N,
#    its tps without the initial connections): the server's ceiling. Bar: connbench >=
#    min(3 x pgreplay, 0.9 x pgbench). On 2 cores the server takes most of the CPU, so
#    each client's CPU per statement is printed beside (connbench's replay threads, from
#    its report; pgbench's whole process, from the kernel's count): what a client costs
#    the server it shares the machine with.
#
# Usage: bench/replay.sh [PAIRS] [SECS]   (defaults: 3 pairs, 10 s recordings). Needs
# pgreplay (apt-get install pgreplay). Exits 0 when every bar passed, 1 when one missed, 2
# when a run failed. CONNBENCH=path/to/connbench tests another build; KEEP=DIR keeps each
# connbench replay's JSON report there.
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
PAIRS=${1:-3}
SECS=${2:-10}
command -v pgreplay >/dev/null || { echo "FAIL  replay: pgreplay is not installed (apt-get install pgreplay)" >&2; exit 2; }
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbp.XXXXXX)
chmod 755 "$WORK"
export TMPDIR=$WORK
REC_PID=""
trap '[ -z "$REC_PID" ] || kill -INT "$REC_PID" 2>/dev/null || true; "$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
misses=0
bar() { echo "$1"; case $1 in *MISS*) misses=$((misses + 1)) ;; esac; }

"$CB" sandbox start --engines postgres --json >"$WORK/sandbox.json"
field() { python3 -c "import json,sys; d=json.load(open('$WORK/sandbox.json')); print($1)"; }
DIR=$(field "d['dir']")
PORT=$(field "d['postgres_port']")
ADMIN=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='unix'][0]")
TCP=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='tcp'][0]")
PASSFILE=$(field "d['passfile']")
LOG=$(find "$DIR" -name 'postgres.log' | head -1)
[ -n "$LOG" ] || { echo "FAIL  replay: no postgres.log under $DIR" >&2; exit 2; }
db() { printf '%s\n' "${1/dbname=connbench/dbname=$2}"; }
psql_admin() { PGOPTIONS="-c client_min_messages=warning" psql "$(db "$ADMIN" postgres)" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }
echo "replay bench: $PAIRS interleaved pairs; recording $SECS s; $("$CB" --version), $(pgbench --version), pgreplay $(pgreplay -v 2>&1 | awk '{ print $NF; exit }')"

# A fresh pgbench -i database NAME (dropped first: the bench's own databases only).
fresh() {
    psql_admin "DROP DATABASE IF EXISTS $1" >/dev/null
    psql_admin "CREATE DATABASE $1" >/dev/null
    pgbench -i -q -s 1 "$(db "$ADMIN" "$1")" >/dev/null 2>&1
    psql "$(db "$ADMIN" "$1")" -XAtq -c "SELECT pg_stat_reset()" >/dev/null
}
# The server's statement counts in database NAME: updates of accounts, tellers, branches,
# inserts into history (after a second, so the backends have reported them).
counts() {
    sleep 1
    psql "$(db "$ADMIN" "$1")" -XAtq -F ' ' -c "SELECT
        sum(n_tup_upd) FILTER (WHERE relname = 'pgbench_accounts'),
        sum(n_tup_upd) FILTER (WHERE relname = 'pgbench_tellers'),
        sum(n_tup_upd) FILTER (WHERE relname = 'pgbench_branches'),
        sum(n_tup_ins) FILTER (WHERE relname = 'pgbench_history')
        FROM pg_stat_user_tables"
}

# record NAME PGBENCH-ARGS...: pgbench on a fresh database cbrec through the recorder,
# logged; leaves $WORK/NAME.trace.gz, $WORK/NAME.replay (pgreplay's parsed log),
# $WORK/NAME.counts (the server's counts after it) and $WORK/NAME.pgbench.
record() {
    local name=$1 from s
    shift
    fresh cbrec
    for s in "log_statement = 'all'" "log_connections = on" "log_disconnections = on" \
        "log_line_prefix = '%m|%u|%d|%c|'" "lc_messages = 'C'" "log_min_error_statement = 'log'" \
        "log_min_messages = 'error'"; do
        psql_admin "ALTER SYSTEM SET $s" >/dev/null
    done
    psql_admin "SELECT pg_reload_conf()" >/dev/null
    sleep 0.5
    from=$(wc -c <"$LOG")
    "$CB" record --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT" --out "$WORK/$name.trace.gz" \
        >"$WORK/record.out" 2>"$WORK/record.err" &
    REC_PID=$!
    for _ in $(seq 1 100); do grep -q "^record: 127.0.0.1:" "$WORK/record.err" && break; sleep 0.05; done
    local rport through
    rport=$(awk '/^record: 127.0.0.1:/ { split($2, a, ":"); print a[2]; exit }' "$WORK/record.err")
    [ -n "$rport" ] || { echo "FAIL  replay: connbench record did not start: $(cat "$WORK/record.err")" >&2; exit 2; }
    through="$(db "$TCP" cbrec)"
    through=${through/port=$PORT/port=$rport}
    pgbench -n -c 4 -j 2 "$@" "$through" >"$WORK/$name.pgbench" 2>&1 ||
        { echo "FAIL  replay: pgbench $* through the recorder: $(tail -2 "$WORK/$name.pgbench")" >&2; exit 2; }
    kill -INT "$REC_PID"; wait "$REC_PID" || true; REC_PID=""
    sleep 0.5
    for s in log_statement log_connections log_disconnections log_line_prefix lc_messages \
        log_min_error_statement log_min_messages; do
        psql_admin "ALTER SYSTEM RESET $s" >/dev/null
    done
    psql_admin "SELECT pg_reload_conf()" >/dev/null
    tail -c +"$((from + 1))" "$LOG" | grep '|cbrec|' >"$WORK/$name.log" || true
    counts cbrec >"$WORK/$name.counts"
    echo "  $name: pgbench $* -c 4: $(awk '/^number of transactions actually processed/ { print $NF }' "$WORK/$name.pgbench") transactions;" \
        "$(head -1 "$WORK/record.out" | sed 's/^record: //; s/ in \/.*//')"
    pgreplay -f -o "$WORK/$name.replay" "$WORK/$name.log" >"$WORK/pgreplay-parse.out" 2>&1 ||
        { echo "FAIL  replay: pgreplay could not parse the server's log: $(tail -2 "$WORK/pgreplay-parse.out")" >&2; exit 2; }
}
# The statements a trace holds (its requests: one statement each with pgbench's simple protocol).
statements_of() {
    python3 - "$WORK/$1.trace.gz" <<'PY'
import gzip, json, sys
n = 0
for line in gzip.open(sys.argv[1], "rt"):
    if '"type":"request"' in line.replace(" ", ""):
        n += 1
print(n)
PY
}

# connbench replay of trace NAME on database DB with extra flags: "elapsed_s failed_now
# lag(p50 p99 max) waiting_for_server(p50 p99 max) send_delay(p50 p99 max)
# cpu_per_request_us", ms ("null" with --speed max).
cb_replay() {
    local name=$1 dbn=$2
    shift 2
    "$CB" replay "$WORK/$name.trace.gz" --target "$(db "$TCP" "$dbn")" --progress 0 --json "$@" >"$WORK/cb.json" 2>"$WORK/cb.err" ||
        { echo "FAIL  replay: connbench replay $name $* (exit $?): $(tail -2 "$WORK/cb.err")" >&2; exit 2; }
    [ -z "${KEEP:-}" ] || cp "$WORK/cb.json" "$KEEP/$name.$dbn.$(date +%s%N).json"
    python3 -c "import json; s=json.load(open('$WORK/cb.json'))['summary']; f=s['fidelity']
t = lambda k: ' '.join(str((f.get(k) or {}).get(q, 'null')) for q in ('p50_ms', 'p99_ms', 'max_ms'))
print(s['elapsed_s'], f['failed_now_not_then'], t('lag'), t('waiting_for_server'), t('send_delay'), s['cpu_per_request_us'])"
}
# pgreplay of NAME's log on database DB at speed FACTOR (-j), at most LIMIT s:
# "elapsed_s max_lag_s" or "hung after LIMIT s".
pg_replay() {
    local name=$1 dbn=$2 speed=$3 limit=$4 t0 t1 status=0
    # pgreplay replays into the database the log names (cbrec): the fresh copy takes its name.
    psql_admin "DROP DATABASE IF EXISTS cbrec" >/dev/null
    psql_admin "ALTER DATABASE $dbn RENAME TO cbrec" >/dev/null
    t0=$(date +%s.%N)
    PGPASSFILE=$PASSFILE timeout "$limit" pgreplay -r -h 127.0.0.1 -p "$PORT" -s "$speed" -j "$WORK/$name.replay" >"$WORK/pgreplay.out" 2>&1 || status=$?
    t1=$(date +%s.%N)
    if [ "$status" = 124 ]; then
        psql_admin "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'cbrec'" >/dev/null
        sleep 0.5
    elif [ "$status" != 0 ]; then
        echo "FAIL  replay: pgreplay -r -s $speed: $(tail -3 "$WORK/pgreplay.out")" >&2; exit 2
    fi
    psql_admin "ALTER DATABASE cbrec RENAME TO $dbn" >/dev/null
    if [ "$status" = 124 ]; then
        echo "hung after ${limit} s ($(tail -1 "$WORK/pgreplay.out"))"
    else
        echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $(awk 'tolower($0) ~ /maximum lag behind schedule/ { print $(NF - 1); exit }' "$WORK/pgreplay.out")"
    fi
}

# The last cb_replay's lag, split: the total behind the schedule (printed), the part
# waiting for the server (printed), connbench's own send delay (the bar: p99 <= 1 ms).
lag_lines() {
    echo "    lag behind the schedule:       p50 $lag50 ms, p99 $lag99 ms, max $lagmax ms"
    echo "    of which waiting for server:   p50 $w50 ms, p99 $w99 ms, max $wmax ms"
    bar "$(awk -v a="$d50" -v p="$d99" -v m="$dmax" 'BEGIN {
        printf "    and connbench\047s own delay:     p50 %s ms, p99 %s ms, max %s ms  %s", a, p, m, (p != "null" && p <= 1.0) ? "PASS" : "MISS" }')"
}

echo
echo "0. recordings (pgbench through connbench record, the server logging for pgreplay)"
PER_CLIENT=$((2250 * SECS))
record tpcb -T "$SECS"
record select -S -t "$PER_CLIENT"

echo
echo "1. tpcb-like at the recorded pace (bars: the server's counts per statement kind equal the recording's; connbench's own send delay p99 <= 1 ms)"
fresh cbpace
read -r el failed lag50 lag99 lagmax w50 w99 wmax d50 d99 dmax _ <<<"$(cb_replay tpcb cbpace)"
now=$(counts cbpace)
recorded=$(cat "$WORK/tpcb.counts")
bar "$(awk -v r="$recorded" -v n="$now" -v f="$failed" -v e="$el" 'BEGIN {
    printf "  connbench replay: %.2f s; server counts %s (recorded %s) %s; failed now but not when recorded %d", e, n, r, (n == r) ? "PASS" : "MISS", f }')"
lag_lines
fresh cbpace
echo "  pgreplay:         $(pg_replay tpcb cbpace 1 $((3 * SECS)))"

echo
echo "2. select-only at the recorded pace (bar: connbench's own send delay p99 <= 1 ms)"
fresh cbpace
read -r el failed lag50 lag99 lagmax w50 w99 wmax d50 d99 dmax _ <<<"$(cb_replay select cbpace)"
echo "  connbench replay: ${el} s; failed now but not when recorded ${failed}"
lag_lines
fresh cbpace
out=$(pg_replay select cbpace 1 $((3 * SECS)))
case $out in
hung*) echo "  pgreplay:         $out" ;;
*) read -r gel glag <<<"$out"
   echo "  pgreplay:         ${gel} s; maximum lag behind schedule ${glag:-?} s (pgreplay's own figure, whole seconds)" ;;
esac

echo
echo "3. select-only as fast as each goes, statements/s (bar: connbench >= min(3 x pgreplay, 0.9 x pgbench -S))"
n=$(statements_of select)
PGB=$(db "$TCP" cbpgb)
for pair in $(seq 1 "$PAIRS"); do
    fresh cbfast
    read -r cel _ _ _ _ _ _ _ _ _ _ ccpu <<<"$(cb_replay select cbfast --speed max)"
    fresh cbfast
    read -r gel _ <<<"$(pg_replay select cbfast 1000 $((3 * SECS)))"
    fresh cbpgb
    # pgbench's CPU, user and system, from the kernel's count for a reaped child.
    pcpu=$(python3 -c "import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=open('$WORK/pgb.out', 'w'), stderr=subprocess.STDOUT, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print((r.ru_utime + r.ru_stime) * 1e6 / $n)" pgbench -n -S -c 4 -j 2 -t "$PER_CLIENT" "$PGB")
    ptps=$(awk '/^tps = / { print $3; exit }' "$WORK/pgb.out")
    bar "$(awk -v p="$pair" -v n="$n" -v c="$cel" -v g="$gel" -v t="$ptps" -v cc="$ccpu" -v pc="$pcpu" 'BEGIN {
        cs = n / c; gs = n / g; ps = t; want = (3 * gs < 0.9 * ps) ? 3 * gs : 0.9 * ps
        printf "  pair %d  %d statements: connbench %.0f/s (%.2f s)  pgreplay %.0f/s (%.2f s)  pgbench -S %.0f/s  connbench/pgreplay %.2f  connbench/pgbench %.2f  %s\n",
            p, n, cs, c, gs, g, ps, cs / gs, cs / ps, (cs >= want) ? "PASS" : "MISS"
        printf "          CPU per statement: connbench %.1f us (its replay threads), pgbench %.1f us (the whole process)", cc, pc }')"
done
[ "$misses" = 0 ] || { echo "replay: $misses bar(s) missed" >&2; exit 1; }
