#!/usr/bin/env bash
# The verdicts bar (issue 11): runs `connbench lab --quick` on a fresh store, then reads
# its report JSON and checks what the quick lab promises:
#   - it ends within 240 s;
#   - every ratio interval is positive;
#   - every verdict agrees with its interval (no faster/slower whose interval holds 1, no
#     inconclusive whose interval lies wholly outside the noise band) and with its
#     p-value (the interval excludes 1 exactly when p < 0.05);
#   - the median relative half-width of the ratio intervals is at most 5%;
#   - at most 3 answers are inconclusive.
# Prints each bar with its figure and PASS/MISS, the coefficient of variation per suite,
# and exits 1 when a bar is missed (2 when a run failed).
#
# Usage: bench/verdicts.sh            (CONNBENCH=path/to/connbench to test another build;
#        KEEP=DIR keeps the lab's output, store and report JSON in DIR)
# Needs python3 to read the JSON.
set -euo pipefail
set -E # the ERR trap below also in functions and command substitutions
# Exit status: 0 every bar passed, 1 a bar missed, 2 a run failed (bench/all.sh tells them apart).
trap 'echo "FAIL  ${0##*/}, line $LINENO: $BASH_COMMAND (exit $?)" >&2; exit 2' ERR
cd "$(dirname "$0")/.."
CB=${CONNBENCH:-target/release/connbench}
[ -n "${CONNBENCH:-}" ] || cargo build --release --quiet
WORK=$(mktemp -d /tmp/cbv.XXXXXX)
trap '[ -z "${KEEP:-}" ] || { mkdir -p "$KEEP" && cp "$WORK"/* "$KEEP"/; }; rm -rf "$WORK"' EXIT
start=$(date +%s.%N)
if ! "$CB" lab --quick --store "$WORK/lab.sqlite" --no-html >"$WORK/lab.txt" 2>"$WORK/lab.err"; then
    echo "verdicts: connbench lab --quick failed:" >&2
    tail -20 "$WORK/lab.err" >&2
    exit 2
fi
end=$(date +%s.%N)
runs=$(awk '/^  [a-z]+ \(run [0-9]+\):/ { sub(/.*\(run /, ""); sub(/\).*/, ""); print }' "$WORK/lab.txt" | sort -un | tr '\n' ' ')
[ -n "$runs" ] || { echo "verdicts: the lab printed no runs" >&2; cat "$WORK/lab.txt" >&2; exit 2; }
# shellcheck disable=SC2086
"$CB" report $runs --store "$WORK/lab.sqlite" --json "$WORK/report.json" 2>/dev/null
python3 - "$WORK/report.json" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" <<'PY' || { [ $? = 3 ] && exit 1; exit 2; }
import json, statistics, sys
report = json.load(open(sys.argv[1]))
wall = float(sys.argv[2])
widths, negative, disagree, inconclusive, total = [], 0, [], 0, 0
print(f"{'suite':<10} {'cells':>5} {'median CV':>10} {'max CV':>8} {'rounds':>7}  stopped")
for run in report["runs"]:
    fig = run["suite"]["figure"]
    band = run["suite"].get("noise_threshold", 0.02)
    cvs = [c["described"][fig]["cv"] for c in run["cells"] if fig in c["described"]]
    rounds = [c.get("rounds", len(c["values"].get(fig, []))) for c in run["cells"]]
    print(f"{run['suite']['name']:<10} {len(run['cells']):>5} {100*statistics.median(cvs):>9.1f}% "
          f"{100*max(cvs):>7.1f}% {min(rounds):>3}-{max(rounds):<3}  {run.get('stopped', '-')}")
    for c in run["cells"]:
        cmp = c.get("comparison")
        if not cmp:
            continue
        total += 1
        r = cmp["ratio"]
        lo, hi, point = r["ci_low"], r["ci_high"], r["point"]
        verdict = cmp["verdict"].replace("_", "-")
        p = cmp.get("p_value", (cmp.get("welch") or {}).get("p_value"))
        widths.append((hi - lo) / (2 * point))
        negative += lo <= 0
        inconclusive += verdict == "inconclusive"
        excludes = lo > 1 or hi < 1
        if verdict in ("faster", "slower") and not excludes:
            disagree.append(f"{c['name']}: {verdict} but the interval holds 1")
        if verdict == "inconclusive" and (lo > 1 + band or hi < 1 / (1 + band)):
            disagree.append(f"{c['name']}: inconclusive but the interval lies beyond the band")
        if p is not None and excludes != (p < 0.05):
            disagree.append(f"{c['name']}: interval {'excludes' if excludes else 'holds'} 1 but p = {p:.3g}")
misses = 0
def bar(name, figure, ok):
    global misses
    misses += not ok
    print(f"{'PASS' if ok else 'MISS'}  {name}: {figure}")
print()
bar("lab --quick within 240 s", f"{wall:.0f} s", wall <= 240)
bar("every ratio interval positive", f"{negative} of {total} not", negative == 0)
bar("verdicts agree with intervals and p-values", f"{len(disagree)} of {total} disagree", not disagree)
for d in disagree:
    print("      " + d)
med = statistics.median(widths) if widths else float("nan")
bar("median relative half-width <= 5%", f"{100*med:.1f}%", med <= 0.05)
bar("at most 3 inconclusive", f"{inconclusive} of {total}", inconclusive <= 3)
sys.exit(3 if misses else 0)  # 3: a bar missed; a crash exits 1
PY
