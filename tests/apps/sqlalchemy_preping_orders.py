"""An order-taking application on SQLAlchemy's pool over psycopg2 with
`pool_pre_ping=True`: each order checks a connection out (the pool pings it first with
`SELECT 1`, in autocommit), runs a small transaction (`with engine.begin()`: BEGIN, an
INSERT, COMMIT) and returns it. At its first connect SQLAlchemy's dialect initialises
itself (the server's version, the current schema, `show standard_conforming_strings`,
the isolation level): look-ups and SHOWs the application's code never wrote either.

    sqlalchemy_preping_orders.py CONNINFO ORDERS [--setup]

CONNINFO is libpq's key=value form. Prints one JSON line: orders committed, and the
application's own mean time an order, checkout (the ping included) to return, measured
with a monotonic clock.
"""
import json
import sys
import time

import psycopg2
import sqlalchemy
from sqlalchemy import text


def main():
    conninfo, orders = sys.argv[1], int(sys.argv[2])
    engine = sqlalchemy.create_engine(
        "postgresql+psycopg2://", creator=lambda: psycopg2.connect(conninfo),
        pool_pre_ping=True, pool_size=1, max_overflow=0,
    )
    if "--setup" in sys.argv:
        with engine.begin() as c:
            c.execute(text("DROP TABLE IF EXISTS cb_hk_lines"))
            c.execute(text("CREATE TABLE cb_hk_lines (id serial PRIMARY KEY, item int, qty int)"))
    took = []
    for i in range(orders):
        t0 = time.monotonic()
        with engine.begin() as c:
            c.execute(text("INSERT INTO cb_hk_lines (item, qty) VALUES (:item, :qty)"),
                      {"item": i % 50, "qty": 1 + i % 3})
        took.append(time.monotonic() - t0)
    engine.dispose()
    mean = sum(took) / len(took) * 1e3 if took else None
    print(json.dumps({"committed": len(took), "mean_ms": mean}))


main()
