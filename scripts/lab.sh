#!/usr/bin/env bash
# The main job on the embedded sandbox: install what is missing, build, start a
# throwaway PostgreSQL + PgBouncer, run every built-in experiment suite in the quick
# profile (about 4 minutes on 2 cores), print each question's answer with its confidence
# interval and verdict, store the runs, and remove the sandbox. Extra arguments go to
# `connbench lab` (e.g. --full, --store FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
CONNBENCH_SETUP_CHROMIUM=0 scripts/setup.sh
cargo build --release --quiet
if [ $# -eq 0 ]; then set -- --quick; fi
exec target/release/connbench lab "$@"
