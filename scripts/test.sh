#!/usr/bin/env bash
# The whole test suite: install what is missing, check formatting and lints, then run
# the unit tests and the integration tests against a real sandbox.
#
#   scripts/test.sh            the whole suite
#   scripts/test.sh --stress   the same with every core kept busy by a CPU hog for the
#                              whole run, as on a laptop or CI runner doing other work:
#                              a test that races a timer, a rate or a kill fails here
#                              first. Any other argument is passed to `cargo test` after
#                              `--` (e.g. a test name filter).
#
# At the end it lists the tests that were skipped, by name and why (a test that needs
# root, a cgroup controller or a tool returns early, which the test harness shows as
# passed), and fails when it runs as root and a root-only test was skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
stress=0
filters=()
for a in "$@"; do
    case "$a" in
        --stress) stress=1 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) filters+=("$a") ;;
    esac
done
scripts/setup.sh
# kubernetes-validate (PyPI) checks the Job manifest offline against Kubernetes' schemas;
# it lives in a venv under target/, installed once.
KV=target/tools/kubernetes-validate
if [ ! -x "$KV/bin/kubernetes-validate" ]; then
    rm -rf "$KV"
    python3 -m venv "$KV"
    "$KV/bin/pip" install -q --disable-pip-version-check 'kubernetes-validate==1.37.0'
fi
export KUBERNETES_VALIDATE="$PWD/$KV/bin/kubernetes-validate"
# Real applications' drivers (tests/apps/requirements.txt), in their own venv, installed
# again when the list changes.
APPS=target/tools/apps
if ! cmp -s tests/apps/requirements.txt "$APPS/requirements.txt"; then
    rm -rf "$APPS"
    python3 -m venv "$APPS"
    "$APPS/bin/pip" install -q --disable-pip-version-check -r tests/apps/requirements.txt
    cp tests/apps/requirements.txt "$APPS/requirements.txt"
fi
export CONNBENCH_APPS_PYTHON="$PWD/$APPS/bin/python"
cargo fmt --all --check
cargo clippy --all-targets --quiet -- -D warnings
if [ "$stress" = 1 ]; then
    # Build first: the hogs are for the tests, not the compiler.
    cargo test --no-run --quiet
    # One busy loop per core, at the tests' own priority, stopped however this script ends:
    # by the trap, or, when this script is killed outright (SIGKILL runs no trap), by the
    # loop itself once this script's process is gone.
    hogs=()
    for _ in $(seq "$(nproc)"); do
        sh -c 'while [ -d /proc/'$$' ]; do :; done' &
        hogs+=($!)
    done
    echo "test.sh: $(nproc) CPU hogs running (pids ${hogs[*]})" >&2
fi
# Each skipped test appends a line here: name, "root-only" or "-", why
# (tests/it/common.rs, `skip`).
skipped=$(mktemp "${TMPDIR:-/tmp}/connbench-skipped.XXXXXX")
export CONNBENCH_SKIPPED="$skipped"
trap 'rm -f "$skipped"; [ "$stress" = 1 ] && kill "${hogs[@]}" 2>/dev/null; true' EXIT
status=0
# The bridge-path tests need root (namespaces, links, NAT rules): they are ignored in a
# plain `cargo test`, and run here when we are root, as CI is.
if [ "$(id -u)" -eq 0 ]; then
    cargo test -- --include-ignored "${filters[@]}" || status=$?
else
    cargo test -- "${filters[@]}" || status=$?
fi
count=$(wc -l <"$skipped")
echo "test.sh: $count test(s) skipped$([ "$count" -gt 0 ] && echo ':')" >&2
sort "$skipped" | awk -F'\t' '{ printf "  %s (%s): %s\n", $1, $2 == "root-only" ? "needs root" : "skipped", $3 }' >&2
if [ "$(id -u)" -ne 0 ]; then
    ignored=$(cargo test --quiet -- --list --ignored "${filters[@]}" 2>/dev/null | sed -n 's/: test$//p')
    echo "test.sh: not root, so $(printf '%s' "$ignored" | grep -c . || true) root-only test(s) were ignored:" >&2
    printf '%s\n' "$ignored" | sed '/^$/d; s/^/  /' >&2
elif grep -q "	root-only	" "$skipped"; then
    echo "test.sh: FAIL: running as root, yet root-only tests were skipped (above)" >&2
    [ "$status" -ne 0 ] || status=1
fi
exit "$status"
