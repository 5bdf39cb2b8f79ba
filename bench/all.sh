#!/usr/bin/env bash
# Every benchmark script that has a bar, with short settings, one after the other (never
# two at once: they measure the same 2 cores). Each script prints its bars with PASS or
# MISS and exits 0 (every bar passed), 1 (a bar missed) or 2 (a run failed); this one
# prints a line per script, keeps everything they printed in bench/results/DATE-HOST.txt
# (the figures docs/benchmarks.md quotes come from there), and its exit status is the
# regression signal:
#
#   0  every bar passed, or missed only as bench/known_misses lists (each printed as KNOWN
#      with its reason: the one place where a miss on this VM is explained and excused);
#   1  a bar missed that bench/known_misses does not list;
#   2  no unlisted miss, but a run failed (a script exited 2, or 1 without a MISS line);
#   3  no unlisted miss and no failed run, but a bar was skipped (SKIP: the cpu and server
#      cpus bars need root): those bars were not checked, so the run is no regression
#      signal for them. Skips are counted in the summary line either way.
#
# Not here: bench/thread_shape.sh (figures, no bar), bench/fuzz.sh (the property tests
# run for minutes: a robustness run, not a performance bar; the test suite runs them too).
#
# Usage: bench/all.sh [--quick]   (CONNBENCH=path/to/connbench to test another build)
#   full:    about 50 minutes on this 2-core VM: the quick lab (bench/verdicts.sh) 4 of
#            them, the recorder's 10-minute memory run 12;
#   --quick: about 18 minutes: fewer pairs, shorter runs, three of sysbench's eight
#            workloads, a 2-minute memory run, and no lab. Its bars are noisier; use it to
#            catch a regression, the full run to quote figures.
# The application bench (bench/app.sh) needs Django from PyPI the first time (cached in
# ~/.cache/connbench-bench-app).
set -uo pipefail
cd "$(dirname "$0")/.."
QUICK=0
case "${1:-}" in
--quick) QUICK=1 ;;
"") ;;
*) echo "usage: bench/all.sh [--quick]" >&2; exit 2 ;;
esac
if [ -z "${CONNBENCH:-}" ]; then cargo build --release --quiet || exit 2; fi
export CONNBENCH=${CONNBENCH:-$PWD/target/release/connbench}
mkdir -p bench/results
out="bench/results/$(date -u +%Y-%m-%dT%H%MZ)-$(hostname -s)$([ "$QUICK" = 1 ] && echo -quick).txt"
{
    echo "bench/all.sh$([ "$QUICK" = 1 ] && echo " --quick") on $(hostname -s), $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(uname -sr)"
    echo "$("$CONNBENCH" --version), $(pgbench --version)"
} >"$out"
started=$(date +%s)
passed=0 known=0 missed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# The reason bench/known_misses gives for MISS line $2 of script $1; fails when none does.
known_reason() {
    local script=$1 line=$2 s pattern reason
    while IFS=$'\t' read -r s pattern reason; do
        case $s in '' | '#'*) continue ;; esac
        if [ "$s" = "$script" ] && grep -qE -- "$pattern" <<<"$line"; then
            echo "$reason"
            return 0
        fi
    done <bench/known_misses
    return 1
}

# run NAME SCRIPT [VAR=value ...] [ARGS ...]: runs bench/SCRIPT with the variables in its
# environment and the arguments, and judges its exit status and MISS lines.
run() {
    local name=$1 script=$2 status line reason unknown=0 misses=0
    shift 2
    local vars=()
    while [ $# -gt 0 ] && [[ $1 == [A-Z]*=* ]]; do vars+=("$1"); shift; done
    echo "== $name: ${vars[*]} bench/$script $*" >>"$out"
    local t0=$SECONDS
    env "${vars[@]}" "bench/$script" "$@" >"$log" 2>&1
    status=$?
    cat "$log" >>"$out"
    local took="$((SECONDS - t0)) s"
    local excused=()
    while IFS= read -r line; do
        misses=$((misses + 1))
        if reason=$(known_reason "$script" "$line"); then
            excused+=("$line -- known: $reason")
        else
            unknown=$((unknown + 1))
        fi
    done < <(grep -E '(^|[[:space:]])MISS([[:space:]]|$)' "$log")
    if [ "$status" = 0 ]; then
        echo "PASS   $name ($took)" | tee -a "$out"
        passed=$((passed + 1))
    elif [ "$status" = 1 ] && [ "$misses" -gt 0 ] && [ "$unknown" = 0 ]; then
        echo "KNOWN  $name ($took): only known misses" | tee -a "$out"
        printf '         %s\n' "${excused[@]}" | tee -a "$out"
        known=$((known + 1))
    elif [ "$status" = 1 ] && [ "$unknown" -gt 0 ]; then
        echo "MISS   $name ($took): $unknown bar(s) missed that bench/known_misses does not list:" | tee -a "$out"
        grep -E '(^|[[:space:]])MISS([[:space:]]|$)' "$log" | while IFS= read -r line; do
            known_reason "$script" "$line" >/dev/null || echo "         $line"
        done | tee -a "$out"
        missed=$((missed + 1))
    else
        echo "FAIL   $name ($took): exit $status without a bar missed; see $out" | tee -a "$out"
        grep -E '^FAIL' "$log" | head -3 | sed 's/^/         /' | tee -a "$out"
        failed=$((failed + 1))
    fi
}

root() { [ "$(id -u)" = 0 ]; }
# A bar that cannot run here: counted, and the exit status says so (3, above).
skip() {
    echo "SKIP   $1" | tee -a "$out"
    skipped=$((skipped + 1))
}
if [ "$QUICK" = 1 ]; then
    run "connect vs pgbench -C" connect_vs_pgbench.sh 2 100
    run "load vs pgbench" load_vs_pgbench.sh CASES="select tpcb connect" 2 3
    run "relay" relay.sh 1
    run "sidecar" sidecar.sh 3 4
    if root; then run "cpu" cpu.sh 2 4; else skip "cpu (a cgroup needs root)"; fi
    run "mysql vs sysbench" mysql_vs_sysbench.sh 2 3
    run "sysbench oltp" sysbench_oltp.sh WORKLOADS="point_select read_only read_write" 2 3
    if root; then run "server cpus" server_cpus.sh 2 3; else skip "server cpus (a CPU quota needs root)"; fi
    run "replay vs pgreplay" replay.sh 1 5
    run "recorder" recorder.sh 3 3 120
    run "an application recorded and replayed" app.sh 3
    # Not a skip: --quick's set leaves the lab out by design.
    echo "OMIT   verdicts (lab --quick, 4 minutes: not in --quick; bench/all.sh without it runs it)" | tee -a "$out"
else
    run "connect vs pgbench -C" connect_vs_pgbench.sh 3 200
    run "load vs pgbench" load_vs_pgbench.sh CASES="select tpcb connect" 3 5
    run "relay" relay.sh 2
    run "sidecar" sidecar.sh 5 8
    if root; then run "cpu" cpu.sh 3 8; else skip "cpu (a cgroup needs root)"; fi
    run "mysql vs sysbench" mysql_vs_sysbench.sh 3 5
    run "sysbench oltp" sysbench_oltp.sh 3 5
    if root; then run "server cpus" server_cpus.sh 2 5; else skip "server cpus (a CPU quota needs root)"; fi
    run "replay vs pgreplay" replay.sh 3 10
    run "recorder" recorder.sh 5 5 600
    run "an application recorded and replayed" app.sh 5
    run "verdicts (lab --quick)" verdicts.sh
fi
summary="all.sh: $passed passed, $known with known misses only, $missed missed, $failed failed, $skipped skipped, in $(($(date +%s) - started)) s"
echo "$summary" | tee -a "$out"
echo "raw output: $out"
[ "$missed" = 0 ] || exit 1
[ "$failed" = 0 ] || exit 2
[ "$skipped" = 0 ] || exit 3
exit 0
