#!/usr/bin/env bash
# The whole test suite: install what is missing, check formatting and lints, then run
# the unit tests and the integration tests against a real sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."
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
