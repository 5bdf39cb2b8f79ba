"""An order-taking application on an asyncpg pool of one connection: each order checks
the connection out, runs a small transaction (BEGIN, an INSERT, COMMIT) and releases it.
On every release asyncpg's pool resets the connection with its reset query
(`SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`): a round trip the
application's code never wrote.

    asyncpg_pool_orders.py CONNINFO ORDERS [--setup]

CONNINFO is libpq's key=value form (host, port, user, dbname, password). Prints one JSON
line: orders committed, and the application's own mean time an order, checkout to
release (the reset included), measured with a monotonic clock.
"""
import asyncio
import json
import sys
import time

import asyncpg


def kwargs(conninfo):
    kv = dict(p.split("=", 1) for p in conninfo.split())
    out = {"host": kv.get("host"), "port": int(kv.get("port", 5432)), "user": kv.get("user"),
           "database": kv.get("dbname"), "ssl": False}
    if "passfile" in kv:
        out["passfile"] = kv["passfile"]
    if "password" in kv:
        out["password"] = kv["password"]
    return out


async def main():
    conninfo, orders = sys.argv[1], int(sys.argv[2])
    pool = await asyncpg.create_pool(min_size=1, max_size=1, **kwargs(conninfo))
    if "--setup" in sys.argv:
        async with pool.acquire() as c:
            await c.execute("DROP TABLE IF EXISTS cb_hk_orders")
            await c.execute("CREATE TABLE cb_hk_orders (id serial PRIMARY KEY, item int, qty int)")
    took = []
    for i in range(orders):
        t0 = time.monotonic()
        async with pool.acquire() as c:
            async with c.transaction():
                await c.execute("INSERT INTO cb_hk_orders (item, qty) VALUES ($1, $2)", i % 50, 1 + i % 3)
        took.append(time.monotonic() - t0)
    await pool.close()
    mean = sum(took) / len(took) * 1e3 if took else None
    print(json.dumps({"committed": len(took), "mean_ms": mean}))


asyncio.run(main())
