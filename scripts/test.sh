#!/usr/bin/env bash
# The whole test suite: install what is missing, check formatting and lints, then run
# the unit tests and the integration tests against a real sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
# The bridge-path tests need root (namespaces, links, NAT rules): they are ignored in a
# plain `cargo test`, and run here when we are root, as CI is.
if [ "$(id -u)" -eq 0 ]; then
    cargo test -- --include-ignored
else
    echo "test.sh: not root, so the bridge-path tests are reported as ignored" >&2
    cargo test
fi
