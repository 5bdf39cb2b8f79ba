"""An order-taking application on PyMySQL that validates its connection before each
order, as a hand-rolled pool's checkout does: `conn.ping(reconnect=False)` (COM_PING, a
round trip the application's own SQL never asked for), then an INSERT and a COMMIT with
autocommit off (the transaction begins implicitly). At connect PyMySQL sends
`SET NAMES` and `SET AUTOCOMMIT`: session set-up that changes the session.

    pymysql_ping_orders.py HOST PORT USER PASSWORD DATABASE ORDERS [--setup]

Prints one JSON line: orders committed, and the application's own mean time an order,
the ping included, measured with a monotonic clock.
"""
import json
import sys
import time

import pymysql


def main():
    host, port, user, password, database, orders = sys.argv[1:7]
    conn = pymysql.connect(host=host, port=int(port), user=user, password=password,
                           database=database, autocommit=False, charset="utf8mb4")
    if "--setup" in sys.argv:
        with conn.cursor() as c:
            c.execute("DROP TABLE IF EXISTS cb_hk_my_orders")
            c.execute("CREATE TABLE cb_hk_my_orders (id INT AUTO_INCREMENT PRIMARY KEY, item INT, qty INT) ENGINE=InnoDB")
        conn.commit()
    took = []
    for i in range(int(orders)):
        t0 = time.monotonic()
        conn.ping(reconnect=False)
        with conn.cursor() as c:
            c.execute("INSERT INTO cb_hk_my_orders (item, qty) VALUES (%s, %s)", (i % 50, 1 + i % 3))
        conn.commit()
        took.append(time.monotonic() - t0)
    conn.close()
    mean = sum(took) / len(took) * 1e3 if took else None
    print(json.dumps({"committed": len(took), "mean_ms": mean}))


main()
