#!/usr/bin/env bash
# The server's size (issue 34): pgbench's own select-only tps with the sandbox's servers
# under a CPU quota of 0.5 core and of 2 cores, interleaved (0.5, 2, 2, 0.5, ...: the
# size that goes first alternates from pair to pair), printed with their ratio. pgbench is
# the independent judge: connbench only starts the sandbox and sets the quota.
#
# One sandbox (`sandbox start --server-cpus 2`); between runs the quota is changed live,
# by writing the cgroup's quota file that `sandbox start --json` names (what
# `Sandbox::set_cpus` does), so both sizes share the same cluster, caches and tables.
# Each run also reads the server group's CPU counter before and after, and prints the
# cores the server used: at 0.5 it should sit at the quota when saturated.
#
# Bar (issue 34's acceptance): tps at 0.5 core <= 0.6 x tps at 2 cores. Prints PASS or
# MISS and exits 1 on a miss, 2 on a failed run. Needs root (the quota is a cgroup write).
#
# Usage: bench/server_cpus.sh [PAIRS] [SECONDS]   (defaults: 3 pairs, 10 s per run)
# CLIENTS=8 sets pgbench's -c (and -j 2); CONNBENCH=path/to/connbench tests another build.
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
# Exit status: 0 every bar passed, 1 a bar missed, 2 a run failed (bench/all.sh tells them apart).
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
PAIRS=${1:-3}
SECS=${2:-10}
CLIENTS=${CLIENTS:-8}

if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet; fi
CB=${CONNBENCH:-$PWD/target/release/connbench}
WORK=$(mktemp -d /tmp/cbs.XXXXXX)
chmod 755 "$WORK" # the servers' user enters the sandbox directory made under it
export TMPDIR=$WORK # this script's own sandbox pointer
trap '"$CB" sandbox stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$CB" sandbox start --engines postgres --server-cpus 2 --json >"$WORK/sandbox.json" ||
    { echo "server_cpus: connbench sandbox start --server-cpus 2 failed" >&2; exit 2; }
py() { python3 -c "import json, sys; s = json.load(open('$WORK/sandbox.json')); $1"; }
UNIX=$(py 'print(next(t["conninfo"] for t in s["targets"] if t["name"] == "unix"))')
QUOTA_DIR=$(py 'print(s["cgroups"]["server"]["quota_dir"])')
CPU_DIR=$(py 'print(s["cgroups"]["server"]["cpu_dir"])')
V2=$(py 'print(int(s["cgroups"]["v2"]))')
pgbench -i -s 1 -q "$UNIX" >"$WORK/init.log" 2>&1 ||
    { echo "server_cpus: pgbench -i failed:" >&2; tail -5 "$WORK/init.log" >&2; exit 2; }

# The group's CFS period, as connbench set it (10 ms): the quota is cores x period.
if [ "$V2" = 1 ]; then PERIOD=$(awk '{ print $2 }' "$QUOTA_DIR/cpu.max"); else PERIOD=$(cat "$QUOTA_DIR/cpu.cfs_period_us"); fi
set_cores() { # the quota in cores, as Cgroups::set_cpus writes it
    local us
    us=$(awk -v c="$1" -v p="$PERIOD" 'BEGIN { printf "%d", c * p }')
    if [ "$V2" = 1 ]; then echo "$us $PERIOD" >"$QUOTA_DIR/cpu.max"; else echo "$us" >"$QUOTA_DIR/cpu.cfs_quota_us"; fi
}
usage_us() { # the server group's CPU so far, in microseconds
    if [ "$V2" = 1 ]; then awk '$1 == "usage_usec" { print $2 }' "$CPU_DIR/cpu.stat"
    else awk '{ printf "%d", $1 / 1000 }' "$CPU_DIR/cpuacct.usage"; fi
}

declare -A TPS CORES
run() { # size pair
    set_cores "$1"
    local before after start end
    before=$(usage_us); start=$(date +%s.%N)
    pgbench -n -S -c "$CLIENTS" -j 2 -T "$SECS" "$UNIX" >"$WORK/out" 2>&1 ||
        { echo "FAIL  pgbench at $1 cores, pair $2:" >&2; tail -5 "$WORK/out" >&2; exit 2; }
    after=$(usage_us); end=$(date +%s.%N)
    local tps cores
    tps=$(awk '/^tps = / { print $3; exit }' "$WORK/out")
    cores=$(awk -v a="$before" -v b="$after" -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", (b - a) / 1e6 / (e - s) }')
    [ -n "$tps" ] || { echo "FAIL  pgbench at $1 cores, pair $2: no tps in its output" >&2; exit 2; }
    printf '  pair %d  %4s cores  tps %10.1f  server used %s cores\n' "$2" "$1" "$tps" "$cores"
    TPS[$1]="${TPS[$1]:-} $tps"
    CORES[$1]="${CORES[$1]:-} $cores"
}

echo "pgbench -S -c $CLIENTS -j 2 -T $SECS on the sandbox's unix target, $PAIRS pairs"
for pair in $(seq 1 "$PAIRS"); do
    if [ $((pair % 2)) = 1 ]; then run 0.5 "$pair"; run 2 "$pair"; else run 2 "$pair"; run 0.5 "$pair"; fi
done
mean() { awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.3f", s / NF }' <<<"$1"; }
small=$(mean "${TPS[0.5]}"); large=$(mean "${TPS[2]}")
ratio=$(awk -v a="$small" -v b="$large" 'BEGIN { printf "%.3f", a / b }')
echo "mean tps: 0.5 cores $small, 2 cores $large; ratio 0.5/2 = $ratio"
echo "server CPU at 0.5 cores (mean of runs): $(mean "${CORES[0.5]}") cores; at 2: $(mean "${CORES[2]}") cores"
if awk -v r="$ratio" 'BEGIN { exit !(r <= 0.6) }'; then
    echo "PASS  tps at 0.5 core <= 0.6 x tps at 2 cores ($ratio)"
else
    echo "MISS  tps at 0.5 core <= 0.6 x tps at 2 cores ($ratio)"
    exit 1
fi
