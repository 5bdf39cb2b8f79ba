#!/usr/bin/env bash
# The main job on the embedded sandbox: install what is missing, build, start a
# throwaway PostgreSQL + PgBouncer, profile connections to every sandbox target, print
# the tables, and remove the sandbox. Extra arguments go to `connbench connect`
# (e.g. -n 1000, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet
exec target/release/connbench connect --sandbox "$@"
