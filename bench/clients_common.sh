# Sourced by bench/client_cpu.sh and bench/client_instructions.sh (not run on its own):
# what both set up to compare clients on the same sandbox, and how each tool's
# transactions are read from its own output. The caller sets CB (the connbench binary)
# and WORK (its scratch directory, TMPDIR), and defines fail.
#
# clients_setup: the floor client compiled; a sandbox of PostgreSQL and MariaDB started;
# connbench's dataset at scale 1 with a grant for the floor's trust role; sysbench's
# sbtest1 of 100,000 rows; pgbench's select-only script. Sets UNIX, TCP, PORT, TRUST,
# SOCK, MARIADB and SB (sysbench's connection flags); kv KEY reads TRUST's conninfo.

target() { python3 -c "import json; print([t for t in json.load(open('$WORK/sandbox.json'))['targets'] if t['name'] == '$1'][0]['$2'])"; }
kv() { printf '%s\n' "$TRUST" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

clients_setup() {
    cc -O2 -o "$WORK/floor" bench/floor/pg_floor.c -lpthread || fail "cc bench/floor/pg_floor.c"
    "$CB" sandbox start --engines postgres,mariadb --json >"$WORK/sandbox.json" || fail "connbench sandbox start"
    UNIX=$(target unix conninfo)
    TCP=$(target tcp conninfo)
    PORT=$(printf '%s\n' "$TCP" | tr ' ' '\n' | sed -n 's/^port=//p')
    TRUST=$(target unix_trust conninfo)
    SOCK="$(kv host)/.s.PGSQL.$(kv port)"
    MARIADB=$(target mariadb_unix conninfo)
    local msock password
    msock=$(target mariadb_unix socket)
    password=$(sed -n 's/^password=//p' "$(target mariadb_unix defaults_file)")
    SB=(--db-driver=mysql --mysql-socket="$msock" --mysql-user=connbench --mysql-password="$password" --mysql-db=connbench)

    "$CB" init "$UNIX" -s 1 >/dev/null || fail "connbench init (PostgreSQL)"
    # The floor speaks only trust authentication: the sandbox's trust role may read the
    # table connbench init made (this sandbox's own, dropped with it).
    psql -qX "$UNIX" -c "GRANT USAGE ON SCHEMA connbench TO $(kv user); GRANT SELECT ON connbench.accounts TO $(kv user)" ||
        fail "GRANT to the floor's role"
    sysbench oltp_point_select "${SB[@]}" --tables=1 --table-size=100000 prepare >/dev/null || fail "sysbench prepare"
    cat >"$WORK/select-only.sql" <<'SQL'
\set aid random(1, 100000 * :scale)
SELECT abalance FROM connbench.accounts WHERE aid = :aid;
SQL
}

# The transactions each tool reports in $WORK/out (a failed one makes no count).
count_pgbench() { awk -F': ' '/actually processed/ { split($2, a, "/"); print a[1] }' "$WORK/out"; }
count_floor() { awk '/^transactions / { print $2 }' "$WORK/out"; }
count_sysbench() {
    grep -q "ignored errors: *0 " "$WORK/out" || return 1
    awk '/transactions:/ { print $2 }' "$WORK/out"
}
count_connbench() {
    python3 -c "import json, sys; s = json.load(open('$WORK/out'))['summary']
sys.exit(1) if s['failed_transactions'] else print(s['transactions'])"
}
