#!/usr/bin/env bash
# Installs what connbench needs and is missing, from Debian's packages: PostgreSQL
# (server, client, pgbench), PgBouncer, MariaDB (server and client), iproute2 and nftables (the bridge net path),
# Prometheus (the metrics endpoint's test), tcpdump (record --from-pcap's tests), and
# Chromium, which the tests use to open the HTML report headless. Idempotent: does
# nothing when all is there.
# Sourced by scripts/lab.sh and scripts/test.sh.
set -euo pipefail

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v pgbench >/dev/null 2>&1 || need+=(postgresql-client)
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || need+=(pgbouncer)
# MariaDB, the second engine (the sandbox starts it beside PostgreSQL), and its client.
[ -x /usr/sbin/mariadbd ] || command -v mariadbd >/dev/null 2>&1 || need+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need+=(mariadb-client)
# sysbench, the peer tool of bench/mysql_vs_sysbench.sh.
command -v sysbench >/dev/null 2>&1 || need+=(sysbench)
# socat, the minimal relay that bench/relay.sh measures connbench's relay against.
command -v socat >/dev/null 2>&1 || need+=(socat)
# Prometheus (and promtool), which the tests start to scrape `--metrics-listen` for real.
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# tcpdump, whose captures `connbench record --from-pcap` reads (its tests capture loopback).
command -v tcpdump >/dev/null 2>&1 || [ -x /usr/bin/tcpdump ] || need+=(tcpdump)
# Python's venv, for kubernetes-validate (PyPI), which the tests use to check the
# Kubernetes Job connbench prints against Kubernetes' schemas, offline.
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# The bridge net path (netpath = "bridge") creates namespaces and NAT rules with these.
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need+=(iproute2)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need+=(nftables)
if [ "${CONNBENCH_SETUP_CHROMIUM:-1}" = 1 ]; then
    command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
fi

if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]} (Debian packages)" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || {
            echo "setup: not root and no sudo; install as root: apt-get install ${need[*]}" >&2
            exit 2
        }
        SUDO=sudo
    fi
    # Debian's packages try to start their own services; we start our own instead.
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

command -v cargo >/dev/null 2>&1 || {
    echo "setup: cargo not found; install Rust 1.85 or newer (https://rustup.rs) and run again" >&2
    exit 2
}
