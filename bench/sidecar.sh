#!/usr/bin/env bash
# The sidecar arms' stability (issue 17): is a Unix socket to a sidecar faster than TCP,
# and does each arm give the same answer run after run?
#
# 1. connbench: RUNS runs of each arm, `connbench load --sandbox tls --path ARM -c 5 -j 1
#    -T SECS`, each on a fresh sandbox, arms alternating (unix, tcp, tcp, unix, ...). Each
#    run reports the hypervisor's steal over its window; a run above 5% steal (another
#    tenant on our cores: the cause of the "slow mode", see docs/statistics.md) is retaken,
#    at most twice, the same rule `connbench run` applies, and every retake is printed.
#    Bars, per arm: coefficient of variation of tps <= 5%, or no more than twice the
#    machine's own spread in the same minutes (the CV of pgbench through the relay, 2.,
#    root mean square over both arms); and no run below 0.9 of the median.
# 2. The peer, like for like: pgbench (the same tpcb-like SQL on connbench's tables, 5
#    clients, 1 thread, SECS s) through a standalone `connbench relay --upstream-tls` on a
#    Unix socket and on TCP, against one sandbox, interleaved. Printed as figures beside
#    connbench's, with the ratio of the means (pgbench runs its own client, so the relay is
#    the only shared part).
#
# Usage: bench/sidecar.sh [RUNS] [SECS]   (defaults: 5 runs, 8 s). Exits 1 on a missed bar,
# 2 on a failed run. CONNBENCH=path/to/connbench tests another build.
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
# Exit status: 0 every bar passed, 1 a bar missed, 2 a run failed (bench/all.sh tells them apart).
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
RUNS=${1:-5}
SECS=${2:-8}
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbs.XXXXXX)
export TMPDIR=$WORK
RELAY_PID=""
stop_relay() { [ -z "$RELAY_PID" ] || { kill -INT "$RELAY_PID" 2>/dev/null || true; wait "$RELAY_PID" 2>/dev/null || true; RELAY_PID=""; }; }
trap 'stop_relay; "$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

echo "sidecar bench: $RUNS runs per arm of $SECS s, 5 clients, 1 thread, TLS from the sidecar; $("$CB" --version), $(pgbench --version)"
echo
echo "1. connbench load --sandbox tls --path ARM (a fresh sandbox per run)"
printf '%-13s %4s %9s %9s %13s %13s %8s\n' arm run tps steal% "client us/tx" "relay us/tx" retakes
# One run of an arm; appends "arm tps" to $WORK/cb.txt. Retakes a run above 5% steal.
cb_run() {
    local arm=$1 run=$2 retakes=0 line
    while :; do
        "$CB" load --sandbox tls --path "$arm" -c 5 -j 1 -T "$SECS" --json >"$WORK/run.json" 2>"$WORK/run.err" ||
            { echo "FAIL  connbench load --path $arm (exit $?): $(tail -1 "$WORK/run.err")"; exit 2; }
        line=$(python3 - "$WORK/run.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
if s["failed_transactions"] or not s["transactions"]:
    print("FAIL"); sys.exit()
m = s["machine"] or {}
steal = m.get("steal_percent")
relay = s["relay_cpu_per_transaction_us"]
print(f"{s['tps']:.1f} {steal if steal is not None else -1:.1f} {s['cpu_per_transaction_us']:.1f} {relay if relay is not None else -1:.1f}")
PY
)
        [ "$line" != FAIL ] || { echo "FAIL  connbench load --path $arm: failed transactions"; exit 2; }
        read -r tps steal client relay <<<"$line"
        if python3 -c "import sys; sys.exit(0 if float('$steal') > 5 else 1)" && [ "$retakes" -lt 2 ]; then
            retakes=$((retakes + 1))
            printf '%-13s %4s %9s %9s  retaken: the hypervisor took %s%% of the CPU\n' "$arm" "$run" "$tps" "$steal" "$steal"
            continue
        fi
        printf '%-13s %4s %9s %9s %13s %13s %8s\n' "$arm" "$run" "$tps" "$steal" "$client" "$relay" "$retakes"
        echo "$arm $tps" >>"$WORK/cb.txt"
        return
    done
}
for run in $(seq 1 "$RUNS"); do
    if [ $((run % 2)) = 1 ]; then arms="sidecar-unix sidecar-tcp"; else arms="sidecar-tcp sidecar-unix"; fi
    for arm in $arms; do cb_run "$arm" "$run"; done
done

echo
echo "2. pgbench through a standalone connbench relay --upstream-tls (one sandbox, interleaved)"
"$CB" sandbox start >"$WORK/sandbox.txt"
conninfo() { awk -v n="$1" '$1==n { $1=""; sub(/^ +/, ""); print }' "$WORK/sandbox.txt"; }
TCP=$(conninfo tcp)
PORT=$(printf '%s\n' "$TCP" | tr ' ' '\n' | awk -F= '$1=="port" { print $2 }')
PASSFILE=$(printf '%s\n' "$TCP" | tr ' ' '\n' | awk -F= '$1=="passfile" { print $2 }')
"$CB" init "$TCP" -s 1 >/dev/null
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
mkdir -p "$WORK/s"
# Starts the relay listening on $1 (a socket path or 127.0.0.1:0); sets RCI.
start_relay() {
    "$CB" relay --listen "$1" --upstream "127.0.0.1:$PORT" --upstream-tls >"$WORK/relay.out" 2>"$WORK/relay.err" &
    RELAY_PID=$!
    for _ in $(seq 1 100); do
        grep -qs "^relay: " "$WORK/relay.err" && break
        sleep 0.05
    done
    case $1 in
        */*) RCI="host=$(dirname "$1") port=${1##*.} dbname=connbench user=connbench passfile=$PASSFILE" ;;
        *)
            local rport
            rport=$(awk '/^relay: 127.0.0.1:/ { split($2, a, ":"); print a[2]; exit }' "$WORK/relay.err")
            RCI="host=127.0.0.1 port=$rport dbname=connbench user=connbench passfile=$PASSFILE sslmode=disable"
            ;;
    esac
}
printf '%-13s %4s %9s\n' arm run tps
for run in $(seq 1 "$RUNS"); do
    if [ $((run % 2)) = 1 ]; then arms="sidecar-unix sidecar-tcp"; else arms="sidecar-tcp sidecar-unix"; fi
    for arm in $arms; do
        if [ "$arm" = sidecar-unix ]; then start_relay "$WORK/s/.s.PGSQL.6432"; else start_relay 127.0.0.1:0; fi
        pgbench -n -c 5 -j 1 -T "$SECS" -D scale=1 -f "$WORK/tpcb-like.sql" "$RCI" >"$WORK/pgb.out" 2>&1 ||
            { echo "FAIL  pgbench through the relay ($arm): $(tail -1 "$WORK/pgb.out")"; exit 2; }
        stop_relay
        tps=$(awk '/^tps = / { print $3; exit }' "$WORK/pgb.out")
        printf '%-13s %4s %9s\n' "$arm" "$run" "$tps"
        echo "$arm $tps" >>"$WORK/pgb.txt"
    done
done

echo
python3 - "$WORK/cb.txt" "$WORK/pgb.txt" <<'PY' || { [ $? = 3 ] && exit 1; exit 2; }
import statistics as st, sys
def load(path):
    out = {}
    for line in open(path):
        arm, tps = line.split()
        out.setdefault(arm, []).append(float(tps))
    return out
cb, pgb = load(sys.argv[1]), load(sys.argv[2])
misses = 0
def cv(v):
    return 100 * st.stdev(v) / st.mean(v)
# The machine's spread in these minutes: pgbench through the same relay, on the same
# sandbox, in the same run of this script. On a noisy host its CV reaches 3-8% (and 5.5-13.8%
# for connbench's arm on 2026-11-26, docs/benchmarks.md): a fixed 5% bar judged the host.
# Twice the peer's spread: with 3-5 runs an estimated CV is itself uncertain by about
# half its value, so a ratio of two of them within 2 is noise; the slow mode this bar was
# made for (runs at 0.3-0.5 of the median) lands far beyond it and below 0.9 as well.
machine = (sum(cv(pgb[a]) ** 2 for a in ("sidecar-unix", "sidecar-tcp")) / 2) ** 0.5
cv_bar = max(5.0, 2 * machine)
for arm in ("sidecar-unix", "sidecar-tcp"):
    v = cb[arm]
    low = min(v) / st.median(v)
    ok = cv(v) <= cv_bar and low >= 0.9
    misses += not ok
    print(f"{'PASS' if ok else 'MISS'}  {arm}: connbench tps mean {st.mean(v):.0f}, CV {cv(v):.1f}% "
          f"(bar <= {cv_bar:.1f}%: 5% or twice pgbench's {machine:.1f}%), "
          f"lowest/median {low:.2f} (bar >= 0.90); pgbench through the standalone relay mean "
          f"{st.mean(pgb[arm]):.0f}, CV {cv(pgb[arm]):.1f}%; "
          f"ratio connbench/pgbench {st.mean(v) / st.mean(pgb[arm]):.2f}")
u, t = st.mean(cb["sidecar-unix"]), st.mean(cb["sidecar-tcp"])
print(f"figure: sidecar via unix / sidecar via tcp, connbench {u / t:.3f}, pgbench "
      f"{st.mean(pgb['sidecar-unix']) / st.mean(pgb['sidecar-tcp']):.3f} (means of the runs; "
      f"`connbench run transport` gives the verdict with its interval)")
sys.exit(3 if misses else 0)  # 3: a bar missed; a crash exits 1
PY
