#!/usr/bin/env bash
# The relay's bars, measured against the sandbox's PostgreSQL over TCP, with connbench and
# the peer tools (pgbench, psql) side by side and interleaved (direct, relay, direct, ...):
#
# 1. Overhead of a relay with no added delay on a query round trip: connbench's latency
#    p50 and pgbench's latency average of SELECT 1 from one client on one connection,
#    direct vs through the relay. Bar: +50 µs.
# 2. Achieved round trip against the requested one, 1 ms to 200 ms: connbench's latency
#    p50 of SELECT 1 on one persistent connection (as `distance` cells verify a route),
#    beside its query phase on a new connection each time (`connect -q`), and pgbench's
#    latency average; each through a relay with --rtt R minus direct. That end-to-end
#    figure also holds what the endpoints pay for sitting idle for R: a server backend and
#    a client woken after milliseconds asleep wake later than after microseconds (on this
#    VM 0.1-0.25 ms more per round trip, varying from day to day with the host), as they
#    would across a real network of that distance. So the bar judges what the relay
#    itself controls, measured with tcpdump's kernel timestamps on both sides of it during
#    connbench's run: the time from a packet's arrival at the relay to its departure, both
#    ways, minus the requested round trip (the relay's lateness), and the server's answer
#    time through the relay against direct is printed beside it (the server's wake-ups).
#    Bar: the relay's lateness within max(0.15 ms, 0.3%), p50 each way. Without root
#    (tcpdump) the figures are printed and the bar is not judged.
# 3. Throughput: 100 MB (COPY ... TO STDOUT into psql) direct vs through a relay with no
#    delay. Bar: the relay path at least half the direct speed.
# 4. The round-trip model: `connect --predict-rtt` on the direct path against the connect
#    time measured through a relay at 50 and 100 ms, for a SCRAM and a trust role.
#    Bar: within 10% (p50).
#
# 5. The first query on a new connection (`connect -q 'select 1'`'s query phase, p50):
#    what connbench's relay with no delay adds to it over direct, beside what socat adds
#    (a minimal forwarding relay: one process per connection, blocking reads). Both are a
#    second process between client and server, so both pay one more wake-up of a sleeping
#    thread while the fresh backend works (~150 µs) on its first query; on this VM that
#    wake-up is the bulk of the added time. Bar: at most 50 µs, or, where the minimal relay
#    itself adds more (the hop's floor on this machine), within 20 µs of socat's.
#
# Usage: bench/relay.sh [PAIRS]   (default 3). RTTS="1 2 5 10 50 100 200" (ms) to change.
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
# Exit status: 0 every bar passed, 1 a bar missed, 2 a run failed (bench/all.sh tells them apart).
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
PAIRS=${1:-3}
RTTS=${RTTS:-"1 2 5 10 50 100 200"}

if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
misses=0
# Prints a bar's line and counts it when it says MISS.
bar() { echo "$1"; case $1 in *MISS*) misses=$((misses + 1)) ;; esac; }
WORK=$(mktemp -d /tmp/cbr.XXXXXX)
export TMPDIR=$WORK
RELAY_PID=""
SOCAT_PID=""
stop_relay() { [ -z "$RELAY_PID" ] || { kill -INT "$RELAY_PID" 2>/dev/null || true; wait "$RELAY_PID" 2>/dev/null || true; RELAY_PID=""; }; }
trap '[ -z "$SOCAT_PID" ] || kill "$SOCAT_PID" 2>/dev/null || true; stop_relay; "$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$CB" sandbox start >"$WORK/sandbox.txt"
CI=$(awk '$1=="tcp_trust" { $1=""; sub(/^ +/, ""); print }' "$WORK/sandbox.txt")
PORT=$(printf '%s\n' "$CI" | tr ' ' '\n' | awk -F= '$1=="port" { print $2 }')
echo "SELECT 1;" >"$WORK/select1.sql"

# Starts a relay to the server with the given --rtt; sets RCI to the conninfo through it
# (of the trust role, or of conninfo $2 when given).
start_relay() {
    "$CB" relay --listen 127.0.0.1:0 --upstream "127.0.0.1:$PORT" --rtt "$1" 2>"$WORK/relay.err" &
    RELAY_PID=$!
    for _ in $(seq 1 100); do
        grep -q "^relay: 127.0.0.1:" "$WORK/relay.err" && break
        sleep 0.05
    done
    local rport
    rport=$(awk '/^relay: 127.0.0.1:/ { split($2, a, ":"); print a[2]; exit }' "$WORK/relay.err")
    [ -n "$rport" ] || { echo "FAIL  connbench relay did not start:" >&2; cat "$WORK/relay.err" >&2; exit 2; }
    local base=${2:-$CI}
    RCI=${base/port=$PORT/port=$rport}
    RPORT=$rport
}

# connbench: the query phase's p50 in ms (one round trip on a new connection).
cb_query_p50() {
    "$CB" connect "$1" -n "$2" -q 'select 1' --json >"$WORK/cb.json" 2>"$WORK/cb.err" ||
        { echo "FAIL  connbench connect -q 'select 1' against $1 (exit $?): $(tail -1 "$WORK/cb.err")" >&2; exit 2; }
    awk '/"name": "query"/ { q=1 } q && $1=="\"p50_us\":" { gsub(/,/, "", $2); printf "%.4f\n", $2 / 1000; exit }' "$WORK/cb.json"
}
# connbench: latency p50 in ms of SELECT 1 from one client on one persistent connection.
cb_load_p50() {
    "$CB" load "$1" -f "$WORK/select1.sql" -c 1 -T "$2" --json >"$WORK/cbl.json" 2>"$WORK/cbl.err" ||
        { echo "FAIL  connbench load against $1 (exit $?): $(tail -1 "$WORK/cbl.err")" >&2; exit 2; }
    python3 -c "import json; print(json.load(open('$WORK/cbl.json'))['summary']['latency']['p50_ms'])"
}
# pgbench: latency average in ms of SELECT 1 from one client.
pgb_latency() {
    pgbench -n -c 1 -j 1 -t "$2" -f "$WORK/select1.sql" "$1" >"$WORK/pgb.out" 2>&1
    awk '/latency average/ { print $4 }' "$WORK/pgb.out"
}

printf '%s\n' "relay bench: $PAIRS interleaved pairs; $("$CB" --version), $(pgbench --version)"

echo
echo "1. added latency of a relay with no delay (bar: <= 50 us at p50)"
start_relay 0ms
for pair in $(seq 1 "$PAIRS"); do
    d=$(cb_load_p50 "$CI" 3); r=$(cb_load_p50 "$RCI" 3)
    pd=$(pgb_latency "$CI" 20000); pr=$(pgb_latency "$RCI" 20000)
    bar "$(awk -v p="$pair" -v d="$d" -v r="$r" -v pd="$pd" -v pr="$pr" 'BEGIN {
        printf "  pair %d  connbench load p50: direct %.1f us, relay %.1f us, +%.1f us %s   pgbench avg: direct %.1f us, relay %.1f us, +%.1f us",
            p, d * 1000, r * 1000, (r - d) * 1000, ((r - d) * 1000 <= 50) ? "PASS" : "MISS", pd * 1000, pr * 1000, (pr - pd) * 1000 }')"
done
stop_relay

echo
echo "2. achieved round trip vs requested (bar: the relay's own lateness within max(0.15 ms, 0.3%), p50 each way, tcpdump)"
CAPTURE=0
if [ "$(id -u)" = 0 ] && command -v tcpdump >/dev/null 2>&1; then CAPTURE=1; fi
# Captures the loopback traffic of ports $1 and $2 while the command after them runs.
captured() {
    local a=$1 b=$2
    shift 2
    if [ "$CAPTURE" = 0 ]; then "$@"; return; fi
    tcpdump -i lo -nn -s 128 --immediate-mode -w "$WORK/cap.pcap" "tcp port $a or tcp port $b" 2>"$WORK/tcpdump.err" &
    local tp=$!
    for _ in $(seq 1 100); do grep -q "listening on" "$WORK/tcpdump.err" && break; sleep 0.05; done
    "$@"
    kill -INT "$tp" 2>/dev/null || true; wait "$tp" 2>/dev/null || true
}
# From the capture, with one client: the p50s (µs) of the relay's hop each way (arrival of
# a data packet at relay port $1 to its departure to server port $2, and back), and of the
# server's answer (request's last packet out to the server to the answer's first).
# Direct (no relay port): "- - server".
hops() {
    tcpdump -r "$WORK/cap.pcap" -tt -nn 2>/dev/null | awk -v R="$1" -v P="$2" '
    function port(x,   n, a) { sub(/:$/, "", x); n = split(x, a, "."); return a[n] }
    function p50(v, n) { if (n == 0) return "-"; asort(v); return sprintf("%.0f", v[int((n + 1) / 2)]) }
    / length [1-9]/ {
        t = $1 * 1e6; sp = port($3); dp = port($5)
        if (dp == R) { creq = t }
        else if (dp == P) { if (creq) up[++nu] = t - creq; creq = 0; sreq = t }
        else if (sp == P) { if (sreq) srv[++ns] = t - sreq; sreq = 0; sresp = t }
        else if (sp == R) { if (sresp) down[++nd] = t - sresp; sresp = 0 }
    }
    END { print p50(up, nu), p50(down, nd), p50(srv, ns) }'
}
base=$(captured "$PORT" "$PORT" cb_load_p50 "$CI" 3)
read -r _ _ sbase <<<"$([ "$CAPTURE" = 1 ] && hops none "$PORT" || echo "- - -")"
qbase=$(cb_query_p50 "$CI" 500)
pbase=$(pgb_latency "$CI" 2000)
printf '  %10s %16s %10s   %8s %8s %9s %8s   %8s %16s %16s\n' requested "cb load achieved" error "relay up" "down" lateness verdict "server +" "cb new-conn query" "pgbench added"
for rtt in $RTTS; do
    start_relay "${rtt}ms"
    secs=$(awk -v r="$rtt" 'BEGIN { s = int(r * 40 / 1000) + 1; if (s < 3) s = 3; print s }')
    n=$(awk -v r="$rtt" 'BEGIN { n = int(4000 / (r + 1)); if (n < 15) n = 15; if (n > 300) n = 300; print n }')
    r=$(captured "$RPORT" "$PORT" cb_load_p50 "$RCI" "$secs")
    read -r hup hdown hsrv <<<"$([ "$CAPTURE" = 1 ] && hops "$RPORT" "$PORT" || echo "- - -")"
    q=$(cb_query_p50 "$RCI" "$n")
    pr=$(pgb_latency "$RCI" "$n")
    stop_relay
    bar "$(awk -v want="$rtt" -v b="$base" -v r="$r" -v qb="$qbase" -v q="$q" -v pb="$pbase" -v pr="$pr" \
        -v up="$hup" -v down="$hdown" -v srv="$hsrv" -v sb="$sbase" 'BEGIN {
        a = r - b; e = a - want
        if (up == "-" || down == "-") { late = "-"; verdict = "(no bar: tcpdump needs root)"; extra = "-" }
        else {
            l = (up + down) / 1000 - want; late = sprintf("%+.3f ms", l)
            tol = (0.15 > 0.003 * want) ? 0.15 : 0.003 * want
            verdict = (l <= tol && l >= -0.01) ? "PASS" : "MISS"
            extra = (srv == "-" || sb == "-") ? "-" : sprintf("%+.3f ms", (srv - sb) / 1000)
        }
        printf "  %7.1f ms %13.3f ms %+7.3f ms   %8s %8s %9s %8s   %8s %13.3f ms %13.3f ms", want, a, e,
            (up == "-") ? "-" : sprintf("%.3f", up / 1000), (down == "-") ? "-" : sprintf("%.3f", down / 1000),
            late, verdict, extra, q - qb, pr - pb }')"
done
echo "  (relay up/down: ms from a packet's arrival at the relay to its departure, p50; lateness: up + down - requested;"
echo "   server +: the server's answer time through the relay minus direct, p50: its wake-ups after sitting idle)"

echo
echo "3. 100 MB through psql (COPY TO STDOUT), direct vs relay with no delay (bar: relay >= 0.5x)"
start_relay 0ms
copy() {
    local TIMEFORMAT='%R'
    { time psql "$1" -qAt -c "COPY (SELECT repeat('x', 999) FROM generate_series(1, 100000)) TO STDOUT" >/dev/null; } 2>&1
}
for pair in $(seq 1 "$PAIRS"); do
    d=$(copy "$CI"); r=$(copy "$RCI")
    bar "$(awk -v p="$pair" -v d="$d" -v r="$r" 'BEGIN {
        printf "  pair %d  direct %.3f s (%.0f MB/s), relay %.3f s (%.0f MB/s), speed ratio %.2f %s", p, d, 100 / d, r, 100 / r, d / r, (d / r >= 0.5) ? "PASS" : "MISS" }')"
done
stop_relay

echo
echo "4. predicted vs measured connect time through the relay (bar: within 10%, p50)"
CI_SCRAM=$(awk '$1=="tcp" { $1=""; sub(/^ +/, ""); print }' "$WORK/sandbox.txt")
printf '  %-10s %6s %14s %14s %8s\n' role rtt predicted measured ratio
for role in trust scram; do
    ci=$CI; [ "$role" = scram ] && ci=$CI_SCRAM
    "$CB" connect "$ci" -n 200 --predict-rtt 50ms --predict-rtt 100ms --json >"$WORK/pred.json" ||
        { echo "FAIL  connbench connect --predict-rtt against $ci" >&2; exit 2; }
    for rtt in 50 100; do
        pred=$(python3 -c "import json,sys; t=json.load(open('$WORK/pred.json'))['targets'][0]; print([p for p in t['predictions'] if p['rtt_ms']==$rtt][0]['relay_p50_ms'])")
        start_relay "${rtt}ms" "$ci"
        "$CB" connect "$RCI" -n 20 --json >"$WORK/meas.json" ||
            { echo "FAIL  connbench connect through the relay at ${rtt} ms" >&2; exit 2; }
        stop_relay
        meas=$(python3 -c "import json; print(json.load(open('$WORK/meas.json'))['targets'][0]['total']['p50_us'] / 1000)")
        bar "$(awk -v r="$role" -v q="$rtt" -v p="$pred" -v m="$meas" 'BEGIN {
            printf "  %-10s %3d ms %11.2f ms %11.2f ms %8.3f %s", r, q, p, m, m / p, (m / p > 0.9 && m / p < 1.1) ? "PASS" : "MISS" }')"
    done
done

echo
echo "5. first query on a new connection: added over direct, connbench relay vs socat, 5 interleaved rounds (bar: <= 50 us, or within 20 us of socat's, medians of the rounds)"
if command -v socat >/dev/null 2>&1; then
    start_relay 0ms
    SOCAT_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    socat "TCP-LISTEN:$SOCAT_PORT,bind=127.0.0.1,fork,reuseaddr,nodelay" "TCP:127.0.0.1:$PORT,nodelay" &
    SOCAT_PID=$!
    for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$SOCAT_PORT") 2>/dev/null && break; sleep 0.05; done
    SCI=${CI/port=$PORT/port=$SOCAT_PORT}
    # Five rounds of 80 connections per path in each pair, the paths' order turning round
    # by round, and the bar on the medians of the rounds' figures: the first query's time
    # drifts by tens of microseconds over a minute on this VM (an idle backend's and a
    # sleeping thread's wake-ups), more than the relay-vs-socat difference judged here, so
    # the three paths are measured in the same moments rather than one after another.
    for pair in $(seq 1 "$PAIRS"); do
        : >"$WORK/fq.txt"
        for round in 1 2 3 4 5; do
            case $((round % 3)) in
                1) d=$(cb_query_p50 "$CI" 80); r=$(cb_query_p50 "$RCI" 80); s=$(cb_query_p50 "$SCI" 80) ;;
                2) r=$(cb_query_p50 "$RCI" 80); s=$(cb_query_p50 "$SCI" 80); d=$(cb_query_p50 "$CI" 80) ;;
                0) s=$(cb_query_p50 "$SCI" 80); d=$(cb_query_p50 "$CI" 80); r=$(cb_query_p50 "$RCI" 80) ;;
            esac
            echo "$d $r $s" >>"$WORK/fq.txt"
        done
        bar "$(python3 - "$pair" "$WORK/fq.txt" <<'PY'
import statistics as st, sys
rounds = [[float(x) * 1000 for x in line.split()] for line in open(sys.argv[2])]
d = st.median(r[0] for r in rounds)
a = st.median(r[1] - r[0] for r in rounds)  # the relay's addition, per round
b = st.median(r[2] - r[0] for r in rounds)  # socat's
diff = st.median(r[1] - r[2] for r in rounds)  # relay minus socat, measured side by side
ok = a <= 50 or diff <= 20
print(f"  pair {sys.argv[1]}  query p50 (median of 5 rounds): direct {d:.1f} us; connbench relay +{a:.1f}; "
      f"socat +{b:.1f}; relay - socat {diff:+.1f} us; {'PASS' if ok else 'MISS'}")
PY
)"
    done
    kill "$SOCAT_PID" 2>/dev/null || true; wait "$SOCAT_PID" 2>/dev/null || true; SOCAT_PID=""
    stop_relay
else
    echo "  skipped: socat is not installed (scripts/setup.sh installs it)"
fi
[ "$misses" = 0 ] || { echo "relay: $misses bar(s) missed" >&2; exit 1; }
