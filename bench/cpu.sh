#!/usr/bin/env bash
# Where the CPU goes (issue 13): connbench's server CPU figure against an independent
# reading of the same processes, in the same run.
#
# The sandbox's PostgreSQL (postmaster, background processes, and every backend forked
# later) is put in a cgroup of its own; the kernel's cgroup accounting (cpuacct.usage, or
# cpu.stat's usage_usec on cgroup v2) is read before and after each run. connbench reads
# the same server through its own mechanism, `--server-pid` (the postmaster's process
# tree in /proc, reaped children included). pgbench runs the same select-only SQL beside
# it, interleaved, and its server CPU per transaction is read from the cgroup alone.
#
# Bars:
# 1. connbench's server CPU within 10% of the cgroup's over the same run (the cgroup's
#    window is a few milliseconds longer: it includes connecting and disconnecting).
# 2. Client + server CPU over a saturated select-only run (4 clients, 2 threads) adds up
#    to between 1.2 and 2.05 cores on this 2-core machine.
# Printed as figures: server CPU per transaction under connbench and under pgbench.
#
# Needs root (to make the cgroup). Usage: bench/cpu.sh [PAIRS] [SECONDS] (default 3, 8).
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
# Exit status: 0 every bar passed, 1 a bar missed, 2 a run failed (bench/all.sh tells them apart).
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
PAIRS=${1:-3}
SECS=${2:-8}
[ "$(id -u)" = 0 ] || { echo "bench/cpu.sh: needs root to create a cgroup" >&2; exit 2; }
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbc.XXXXXX)
export TMPDIR=$WORK
# A cgroup with CPU accounting: v1's cpuacct, or v2 (unified or at the root). Not named
# connbench-*: every sandbox start removes the empty connbench-* groups whose sandbox
# directory is gone, and this one is empty until the server moves in.
CG=""
for base in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if [ -e "$base/cpuacct.usage" ] || [ -e "$base/cgroup.procs" ]; then
        CG="$base/cbbench-cpu-$$"
        mkdir "$CG" && break
    fi
done
[ -n "$CG" ] || { echo "bench/cpu.sh: no cgroup hierarchy found" >&2; exit 2; }
cleanup() {
    "$CB" sandbox stop >/dev/null 2>&1 || true
    rmdir "$CG" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
# The cgroup's CPU so far, in seconds.
cg_cpu() {
    if [ -e "$CG/cpuacct.usage" ]; then
        awk '{ printf "%.6f\n", $1 / 1e9 }' "$CG/cpuacct.usage"
    else
        awk '$1 == "usage_usec" { printf "%.6f\n", $2 / 1e6 }' "$CG/cpu.stat"
    fi
}

"$CB" sandbox start --json >"$WORK/sandbox.json"
field() { python3 -c "import json, sys; d = json.load(open('$WORK/sandbox.json')); print($1)"; }
UNIX=$(field "next(t['conninfo'] for t in d['targets'] if t['name'] == 'unix')")
PM=$(field "d['postgres_pid']")
"$CB" init "$UNIX" -s 1 >/dev/null
# Every process of the server's tree into the cgroup; backends forked later follow.
# (A backend that exits between the listing and the move, init's own, say, is skipped:
# its CPU was spent before any measured window.)
for pid in $(ps -o pid= --ppid "$PM") "$PM"; do echo "$pid" 2>/dev/null >"$CG/cgroup.procs" || [ "$pid" != "$PM" ]; done
cat >"$WORK/select-only.sql" <<'SQL'
\set aid random(1, 100000 * :scale)
SELECT abalance FROM connbench.accounts WHERE aid = :aid;
SQL

echo "cpu bench: $PAIRS interleaved pairs of select-only, 4 clients, 2 threads, $SECS s; server cgroup $CG"
echo "$("$CB" --version), $(pgbench --version)"
printf '%-9s %4s %9s %12s %12s %8s %14s %14s\n' tool pair tps "server s" "cgroup s" ratio "server us/tx" "client+server"
misses=0
for pair in $(seq 1 "$PAIRS"); do
    for tool in connbench pgbench; do
        before=$(cg_cpu)
        if [ "$tool" = connbench ]; then
            "$CB" load "$UNIX" -S -c 4 -j 2 -T "$SECS" --server-pid "$PM" --json >"$WORK/cb.json" 2>"$WORK/cb.err" ||
                { echo "FAIL  connbench load (exit $?): $(tail -1 "$WORK/cb.err")"; exit 2; }
            after=$(cg_cpu)
            line=$(python3 - "$WORK/cb.json" "$before" "$after" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
cg = float(sys.argv[3]) - float(sys.argv[2])
server = s["server_cpu_s"]
cores = (s["cpu_user_s"] + s["cpu_system_s"] + server) / s["measured_s"]
print(f"{s['tps']:.0f} {server:.3f} {cg:.3f} {server / cg:.3f} {s['server_cpu_per_transaction_us']:.1f} {cores:.2f}")
PY
)
            read -r tps server cg ratio per cores <<<"$line"
            printf '%-9s %4s %9s %12s %12s %8s %14s %14s\n' "$tool" "$pair" "$tps" "$server" "$cg" "$ratio" "$per" "$cores"
            if python3 -c "import sys; sys.exit(0 if abs($ratio - 1) <= 0.10 else 1)"; then :; else
                echo "MISS  pair $pair: connbench's server CPU $server s against the cgroup's $cg s (ratio $ratio; bar within 10%)"
                misses=$((misses + 1))
            fi
            if python3 -c "import sys; sys.exit(0 if 1.2 <= $cores <= 2.05 else 1)"; then :; else
                echo "MISS  pair $pair: client + server $cores cores (bar 1.2 to 2.05)"
                misses=$((misses + 1))
            fi
            echo "$per" >>"$WORK/cb_per.txt"
        else
            pgbench -n -c 4 -j 2 -T "$SECS" -D scale=1 -f "$WORK/select-only.sql" "$UNIX" >"$WORK/pgb.out" 2>&1 ||
                { echo "FAIL  pgbench: $(tail -1 "$WORK/pgb.out")"; exit 2; }
            after=$(cg_cpu)
            tps=$(awk '/^tps = / { printf "%.0f\n", $3; exit }' "$WORK/pgb.out")
            tx=$(awk '/number of transactions actually processed/ { split($NF, a, "/"); print a[1]; exit }' "$WORK/pgb.out")
            per=$(python3 -c "print(f'{($after - $before) * 1e6 / $tx:.1f}')")
            cg=$(python3 -c "print(f'{$after - $before:.3f}')")
            printf '%-9s %4s %9s %12s %12s %8s %14s %14s\n' "$tool" "$pair" "$tps" - "$cg" - "$per" -
            echo "$per" >>"$WORK/pgb_per.txt"
        fi
    done
done
python3 - "$WORK/cb_per.txt" "$WORK/pgb_per.txt" <<'PY'
import statistics as st, sys
cb = [float(x) for x in open(sys.argv[1])]
pg = [float(x) for x in open(sys.argv[2])]
print(f"figure: server CPU per select-only transaction, connbench {st.mean(cb):.1f} us, pgbench "
      f"{st.mean(pg):.1f} us (cgroup), ratio {st.mean(cb) / st.mean(pg):.2f}")
PY
if [ "$misses" = 0 ]; then
    echo "PASS  server CPU within 10% of the cgroup's, and client + server 1.2 to 2.05 cores, in every pair"
else
    exit 1
fi
