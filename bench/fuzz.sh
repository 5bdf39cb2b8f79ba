#!/usr/bin/env bash
# The parsers of outside text and bytes (targets and their redaction, scripts, suite
# files, the PostgreSQL backend reader, the MySQL greeting and reply readers), run far longer than the test suite runs them:
# the property tests of tests/it/fuzz.rs, again and again with PROPTEST_CASES inputs per
# property and a fresh seed each time, until MINUTES have passed. Prints the rounds and
# inputs tried; exits 1 at the first failure (proptest prints the smallest input; add it
# as a regression test).
#
# Usage: bench/fuzz.sh [MINUTES] [CASES]   (defaults: 10 minutes, 20000 inputs per property
# per round). Needs no database: the backend reader is fed by an in-process peer.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-10}
CASES=${2:-20000}
cargo test --release --test it --no-run --quiet 2>/dev/null
# The properties: the indented fns of tests/it/fuzz.rs's proptest! blocks; those that
# open a socket to a peer thread per input (the MySQL readers) run a twentieth of CASES.
PROPS=$(grep -cE '^    fn ' tests/it/fuzz.rs)
EXCHANGES=$(grep -cE '^    fn any_mysql_' tests/it/fuzz.rs)
end=$(($(date +%s) + MINUTES * 60))
rounds=0
start=$(date +%s)
while [ "$(date +%s)" -lt "$end" ]; do
    if ! PROPTEST_CASES=$CASES cargo test --release --quiet --test it fuzz:: >"${TMPDIR:-/tmp}/connbench-fuzz.out" 2>&1; then
        cat "${TMPDIR:-/tmp}/connbench-fuzz.out"
        echo "FAIL  round $((rounds + 1)): a property failed (the smallest input is above)"
        exit 1
    fi
    rounds=$((rounds + 1))
    echo "round $rounds: $PROPS properties x $CASES inputs (the $EXCHANGES socket exchanges x $((CASES / 20))), no failure ($(($(date +%s) - start)) s so far)"
done
echo "PASS  $rounds rounds, $((rounds * ((PROPS - EXCHANGES) * CASES + EXCHANGES * (CASES / 20)))) inputs in $(($(date +%s) - start)) s, no failure"
