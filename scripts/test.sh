#!/usr/bin/env bash
# The whole test suite: install what is missing, check formatting and lints, then run
# the unit tests and the integration tests against a real sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
cargo test
