#!/usr/bin/env bash
# Did a restructuring change what connbench does? Runs the same commands with two builds
# and compares them byte for byte: standard output, standard error and the exit status,
# each build's own `--version` string replaced by VERSION first (it names the commit).
#
#   scripts/same_output.sh BASE_BINARY HEAD_BINARY
#
# What is compared:
#  1. Without a server: `--help` of every command and subcommand, `suites`, every built-in
#     suite's `run --dry-run` (full and --quick, text and JSON), `man`, shell completions,
#     and bad input (a refused value, a missing file, an unknown suite or target).
#  2. On a sandbox (started by HEAD, PostgreSQL and MariaDB): the wire decoders, on the
#     same bytes. Each application's connections pass through HEAD's recorder and then
#     BASE's (app -> HEAD record -> BASE record -> server), so both decode one stream; the
#     two traces must hold the same events, session by session, once the times (every
#     `*_ns` field, the start time) and the recorder's own name and addresses are left out. Applications: pgbench
#     tpcb-like (simple protocol), pgbench -S -M prepared, psql with COPY and an error,
#     connbench load on MariaDB (binary protocol, prepared) and the mariadb client.
#  3. Those traces read by both builds: `trace` as text, JSON (the whole profile), with
#     --rtt and --top, and as HTML.
#  4. A stored run: one quick suite run by HEAD into a store, then `runs`, `runs show`,
#     `report` (text, Markdown, JSON, CSV, HTML) and `compare` by both builds on it.
#
# Exit status: 0 every output the same, 1 one differed (each difference printed, diff -u,
# first lines), 2 a step could not run.
set -euo pipefail
B=$(realpath "${1:?usage: scripts/same_output.sh BASE_BINARY HEAD_BINARY}")
H=$(realpath "${2:?usage: scripts/same_output.sh BASE_BINARY HEAD_BINARY}")
WORK=$(mktemp -d /tmp/cbso.XXXXXX)
chmod 755 "$WORK"
# Both called `connbench`: the usage lines name the program as it was called.
mkdir "$WORK/base" "$WORK/head"
ln -s "$B" "$WORK/base/connbench"
ln -s "$H" "$WORK/head/connbench"
BASE=$WORK/base/connbench
HEAD=$WORK/head/connbench
export TMPDIR=$WORK
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    "$HEAD" sandbox stop >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
BV=$("$BASE" --version | sed 's/^connbench //')
HV=$("$HEAD" --version | sed 's/^connbench //')
echo "same output: base $BV; head $HV"
n=0
diffs=0

# same ARGS...: runs `connbench ARGS` with both builds, each in an empty directory of its
# own, and compares what they print, their exit status and the files they write there.
same() {
    local who bin v f
    for who in base head; do
        if [ $who = base ]; then bin=$BASE v=$BV; else bin=$HEAD v=$HV; fi
        rm -rf "$WORK/cwd.$who" && mkdir "$WORK/cwd.$who"
        (cd "$WORK/cwd.$who" && "$bin" "$@" >"$WORK/$who.out" 2>"$WORK/$who.err"; echo "exit $?" >"$WORK/$who.rc") || true
        find "$WORK/$who.out" "$WORK/$who.err" "$WORK/cwd.$who" -type f -print0 | xargs -0 python3 -c '
import sys
# As printed, and as roff writes it (man: "-" is "\-").
vs = [sys.argv[1].encode(), sys.argv[1].replace("-", "\\-").encode()]
for p in sys.argv[2:]:
    b = open(p, "rb").read()
    for v in vs:
        b = b.replace(v, b"VERSION")
    open(p, "wb").write(b)
' "$v"
    done
    n=$((n + 1))
    for f in out err rc; do
        if ! cmp -s "$WORK/base.$f" "$WORK/head.$f"; then
            echo "DIFF  connbench $* ($f)"
            diff -u "$WORK/base.$f" "$WORK/head.$f" | head -20 || true
            diffs=$((diffs + 1))
            return
        fi
    done
    if ! diff -r "$WORK/cwd.base" "$WORK/cwd.head" >"$WORK/files.diff"; then
        echo "DIFF  connbench $* (files written)"
        head -20 "$WORK/files.diff"
        diffs=$((diffs + 1))
    fi
}

# same_file NAME A B: two files one step wrote, compared.
same_file() {
    n=$((n + 1))
    if ! cmp -s "$2" "$3"; then
        echo "DIFF  $1"
        diff -u "$2" "$3" | head -20 || true
        diffs=$((diffs + 1))
    fi
}

# 1. Without a server.
same --help
same --version
COMMANDS=$("$HEAD" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } /^$/ { on = 0 }')
for c in $COMMANDS; do
    same "$c" --help
    same help "$c"
done
for sub in "sandbox start" "sandbox stop" "sandbox status" "kubernetes job" "kubernetes suite" "runs show"; do
    # shellcheck disable=SC2086
    same $sub --help
done
same suites
SUITES=$("$HEAD" suites | awk 'NF > 1 && $1 ~ /^[a-z]+$/ && $1 != "run" { print $1 }')
for s in $SUITES; do
    same run "$s" --dry-run
    same run "$s" --dry-run --quick
    same run "$s" --dry-run --quick --json
done
same lab --dry-run --quick
same man
for sh in bash zsh fish; do same completions "$sh"; done
same load unix -T 3x
same connect 'host=/nonexistent/dir port=5432' --rounds 0
same run no-such-suite
same trace /nonexistent/trace.jsonl
same replay /nonexistent/trace.jsonl --target unix
same relay --listen 127.0.0.1:0 --upstream 127.0.0.1:1 --rtt -5ms
same record --listen nowhere --upstream 127.0.0.1:1 --out "$WORK/x.trace"
same load 'postgres://u:secret@127.0.0.1:1/db' -T 1s --connect-timeout 1s
echo "  $n commands without a server"

# 2. The decoders on the same bytes: app -> HEAD's recorder -> BASE's -> server.
"$HEAD" sandbox start --json >"$WORK/sandbox.json" 2>"$WORK/sandbox.err" ||
    { echo "FAIL  same_output: sandbox start: $(tail -2 "$WORK/sandbox.err")" >&2; exit 2; }
field() { python3 -c "import json,sys; d=json.load(open('$WORK/sandbox.json')); print($1)"; }
PGPORT=$(field "d['postgres_port']")
TCP=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='tcp'][0]")
UNIX=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='unix'][0]")
MYPORT=$(field "d['mariadb']['port']")
MYTCP=$(field "[t['conninfo'] for t in d['targets'] if t['name']=='mariadb_tcp'][0]")
MYCNF=$(field "d['mariadb']['defaults_file']")
pgbench -i -q -s 1 "$UNIX" >"$WORK/init.out" 2>&1 || { echo "FAIL  same_output: pgbench -i: $(tail -2 "$WORK/init.out")" >&2; exit 2; }
"$HEAD" init mariadb_tcp >"$WORK/init.out" 2>&1 || "$HEAD" init "$MYTCP" >"$WORK/init.out" 2>&1 ||
    { echo "FAIL  same_output: init on MariaDB: $(tail -2 "$WORK/init.out")" >&2; exit 2; }

# recorder BIN NAME UPSTREAM_PORT ENGINE: starts BIN's recorder to 127.0.0.1:UPSTREAM_PORT
# writing $WORK/NAME.trace; sets RPORT.
recorder() {
    "$1" record --engine "$4" --listen 127.0.0.1:0 --upstream "127.0.0.1:$3" --out "$WORK/$2.trace" \
        >"$WORK/$2.rec.out" 2>"$WORK/$2.rec.err" &
    PIDS+=($!)
    for _ in $(seq 1 100); do grep -q "^record: 127.0.0.1:" "$WORK/$2.rec.err" && break; sleep 0.05; done
    RPORT=$(awk '/^record: 127.0.0.1:/ { split($2, a, ":"); print a[2]; exit }' "$WORK/$2.rec.err")
    [ -n "$RPORT" ] || { echo "FAIL  same_output: $1 record: $(cat "$WORK/$2.rec.err")" >&2; exit 2; }
}
# through NAME ENGINE SERVER_PORT COMMAND...: COMMAND with @PORT@ standing for the outer
# recorder's port, both recorders stopped after it, their traces compared without times.
through() {
    local name=$1 engine=$2 port=$3
    shift 3
    PIDS=()
    recorder "$BASE" "$name.base" "$port" "$engine"
    local inner=$RPORT
    recorder "$HEAD" "$name.head" "$inner" "$engine"
    local args=() a
    for a in "$@"; do args+=("${a//@PORT@/$RPORT}"); done
    "${args[@]}" >"$WORK/$name.app" 2>&1 || true
    for p in "${PIDS[@]}"; do kill -INT "$p"; wait "$p" || true; done
    PIDS=()
    for who in base head; do
        python3 - "$WORK/$name.$who.trace" >"$WORK/$name.$who.events" <<'EOF'
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items()
                if not k.endswith('_ns') and k not in ('start_time', 'recorder', 'options')}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
# Each session's events in their order; sessions' events interleave as the moment had
# them, which two recorders in a row need not see alike.
events = [strip(json.loads(line)) for line in open(sys.argv[1])]
for e in sorted(events, key=lambda e: e.get('session', -1)):
    print(json.dumps(e, sort_keys=True))
EOF
    done
    local events
    events=$(wc -l <"$WORK/$name.head.events")
    [ "$events" -gt 3 ] || { echo "FAIL  same_output: $name: $events events ($(tail -2 "$WORK/$name.app"))" >&2; exit 2; }
    same_file "the decoders on $name ($events events)" "$WORK/$name.base.events" "$WORK/$name.head.events"
}
through pgbench-tpcb postgres "$PGPORT" pgbench -n -c 2 -t 200 "${TCP/port=$PGPORT/port=@PORT@}"
through pgbench-prepared postgres "$PGPORT" pgbench -n -S -M prepared -c 2 -t 300 "${TCP/port=$PGPORT/port=@PORT@}"
through psql postgres "$PGPORT" psql -X "${TCP/port=$PGPORT/port=@PORT@}" -c "CREATE TEMP TABLE t(a int, b text)" \
    -c "COPY t FROM PROGRAM 'seq 1 100 | sed s/$/,x/' CSV" -c "SELECT count(*), max(b) FROM t" \
    -c "SELECT 1/0" -c "COPY (SELECT * FROM t) TO STDOUT"
MYREC=${MYTCP/127.0.0.1:$MYPORT/127.0.0.1:@PORT@}
through mariadb-load mysql "$MYPORT" "$HEAD" load "$MYREC" -S -M prepared -c 2 -T 2s
through mariadb-client mysql "$MYPORT" mariadb --defaults-file="$MYCNF" -h 127.0.0.1 -P @PORT@ --protocol=tcp connbench \
    -e "CREATE TEMPORARY TABLE t (a INT, b TEXT); INSERT INTO t VALUES (1, 'x'), (2, 'y'); SELECT * FROM t; SELECT nosuch FROM t; SHOW WARNINGS"

# 3. Both builds read the traces.
for t in pgbench-tpcb pgbench-prepared psql mariadb-load mariadb-client; do
    f="$WORK/$t.head.trace"
    same trace "$f"
    same trace "$f" --json
    same trace "$f" --rtt 1ms --rtt 50ms --top 3
    same trace "$f" --html trace.html
done
echo "  $n comparisons with the decoders and trace"

# 4. A stored run, read back by both.
STORE=$WORK/store.db
"$HEAD" run pooling --quick --store "$STORE" >"$WORK/run.out" 2>&1 ||
    { echo "FAIL  same_output: run pooling --quick: $(tail -2 "$WORK/run.out")" >&2; exit 2; }
"$HEAD" run pooling --quick --store "$STORE" >"$WORK/run.out" 2>&1 ||
    { echo "FAIL  same_output: run pooling --quick (2): $(tail -2 "$WORK/run.out")" >&2; exit 2; }
same runs --store "$STORE"
same runs show 1 --store "$STORE"
same report 1 --store "$STORE"
same report 1 --store "$STORE" --markdown
same report 1 --store "$STORE" --json
same compare 1 2 --store "$STORE"
same report 1 --store "$STORE" --csv csv
same report 1 --store "$STORE" --html report.html
echo "same output: $n comparisons, $diffs differed"
[ "$diffs" = 0 ]
