"""An order-taking application on psycopg 3 in pipeline mode: each order is a
transaction (BEGIN, five INSERTs of its lines, an UPDATE of the customer's total,
COMMIT) whose statements go as Parse/Bind/Describe/Execute groups with no Sync between
them; the transaction's end syncs. Orders are taken BATCH at a time in one pipeline,
so a batch's later orders are sent before the earlier ones are answered: a batch costs
the application one round trip, not one an order.

    psycopg_pipeline_orders.py CONNINFO BATCHES BATCH [--setup]

CONNINFO is libpq's key=value form. Prints one JSON line: the statements executed (by
kind), orders committed, and the application's own mean times, on a monotonic clock: an
order (its transaction's start to its COMMIT's answer, which psycopg waits for as the
transaction ends) and a batch (the pipeline's start to its end).
"""
import json
import sys
import time

import psycopg

SETUP = [
    "DROP TABLE IF EXISTS cb_app_lines",
    "DROP TABLE IF EXISTS cb_app_customers",
    "CREATE TABLE cb_app_customers (id int PRIMARY KEY, total bigint NOT NULL)",
    "CREATE TABLE cb_app_lines (id bigserial PRIMARY KEY, customer int, item int, qty int)",
    "INSERT INTO cb_app_customers SELECT g, 0 FROM generate_series(1, 100) g",
]
LINE = "INSERT INTO cb_app_lines (customer, item, qty) VALUES (%s, %s, %s)"
TOTAL = "UPDATE cb_app_customers SET total = total + %s WHERE id = %s"


def main():
    conninfo, batches, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    setup = "--setup" in sys.argv[4:]
    with psycopg.connect(conninfo) as conn:
        if setup:
            with conn.transaction():
                for s in SETUP:
                    conn.execute(s)
        executed = {"insert": 0, "update": 0}
        took = []
        order_took = []
        orders = 0
        for b in range(batches):
            t0 = time.monotonic()
            with conn.pipeline():
                for k in range(batch):
                    customer = 1 + (b * batch + k) % 100
                    t1 = time.monotonic()
                    with conn.transaction():
                        with conn.cursor() as cur:
                            for item in range(5):
                                cur.execute(LINE, (customer, item, 1 + k))
                                executed["insert"] += 1
                            cur.execute(TOTAL, (5 * (1 + k), customer))
                            executed["update"] += 1
                    order_took.append(time.monotonic() - t1)
                    orders += 1
            took.append(time.monotonic() - t0)
    print(json.dumps({
        "orders": orders,
        "executed": executed,
        "order_mean_ms": 1000 * sum(order_took) / len(order_took) if order_took else None,
        "batch_mean_ms": 1000 * sum(took) / len(took) if took else None,
    }))


main()
