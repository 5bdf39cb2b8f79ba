#!/usr/bin/env bash
# Every benchmark with short settings, one after the other (never two at once: they
# measure the same 2 cores), in about 15 minutes (4 of them the quick lab). Each script
# prints its bars with PASS or MISS and exits non-zero on a miss or a failed run; this
# one prints a summary line per script, keeps everything they printed in bench/results/DATE-HOST.txt (the figures the
# README quotes come from there), and exits 1 when any script did not pass.
#
# Usage: bench/all.sh            (CONNBENCH=path/to/connbench to test another build)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet || exit 2; fi
export CONNBENCH=${CONNBENCH:-$PWD/target/release/connbench}
mkdir -p bench/results
out="bench/results/$(date -u +%Y-%m-%dT%H%MZ)-$(hostname -s).txt"
{
    echo "bench/all.sh on $(hostname -s), $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(uname -sr)"
    echo "$("$CONNBENCH" --version), $(pgbench --version)"
} >"$out"
failed=0
run() {
    local name=$1 status
    shift
    echo "== $name: $*" >>"$out"
    "$@" >>"$out" 2>&1
    status=$?
    if [ "$status" = 0 ]; then
        echo "PASS  $name" | tee -a "$out"
    else
        echo "MISS  $name (exit $status; see $out)" | tee -a "$out"
        failed=$((failed + 1))
    fi
}
run "connect vs pgbench -C" bench/connect_vs_pgbench.sh 3 200
run "load vs pgbench" env CASES="select tpcb connect" bench/load_vs_pgbench.sh 3 5
run "relay" bench/relay.sh 2
run "sidecar" bench/sidecar.sh 5 8
run "cpu" bench/cpu.sh 3 8
run "mysql vs sysbench" bench/mysql_vs_sysbench.sh 3 5
# The server's size: a CPU quota is a cgroup write, so root only.
if [ "$(id -u)" = 0 ]; then
    run "server cpus" bench/server_cpus.sh 2 5
else
    echo "SKIP  server cpus (a CPU quota needs root)" | tee -a "$out"
fi
run "verdicts (lab --quick)" bench/verdicts.sh
echo "raw output: $out"
[ "$failed" = 0 ] || exit 1
