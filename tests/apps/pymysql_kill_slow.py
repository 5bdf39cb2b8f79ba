"""A report endpoint on PyMySQL that gives up on a slow query: one connection runs
`SELECT SLEEP(5)`, and after half a second a second connection stops it with
`KILL QUERY <the first's connection id>`, as a client-side timeout or an admin's
"cancel" button does on MySQL and MariaDB (which have no protocol-level cancel).

    pymysql_kill_slow.py HOST PORT USER PASSWORD DATABASE

Prints one JSON line: the slow query's own time (monotonic clock), its result, and
whether the KILL was answered without error.
"""
import json
import sys
import threading
import time

import pymysql


def main():
    host, port, user, password, database = sys.argv[1:6]
    connect = lambda: pymysql.connect(host=host, port=int(port), user=user, password=password,
                                      database=database, autocommit=True)
    slow, admin = connect(), connect()
    out = {}

    def run():
        t0 = time.monotonic()
        try:
            with slow.cursor() as c:
                c.execute("SELECT SLEEP(5) AS stopped_by_kill")
                out["result"] = c.fetchone()[0]
        except pymysql.MySQLError as e:
            out["error"] = e.args[0]
        out["slow_ms"] = (time.monotonic() - t0) * 1e3

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    with admin.cursor() as c:
        c.execute(f"KILL QUERY {slow.thread_id()}")
    out["killed"] = True
    t.join()
    slow.close()
    admin.close()
    print(json.dumps(out))


main()
