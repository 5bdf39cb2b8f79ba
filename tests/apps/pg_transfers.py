"""A bank's two endpoints on PostgreSQL, through a driver's own pool: a transfer (a
transaction: read the source balance, move the amount, log it) and a balance look-up
(one statement), each from a connection checked out of the pool and given back.

    pg_transfers.py asyncpg|sqlalchemy CONNINFO ROUNDS [--setup]

CONNINFO is libpq's key=value form (host, port, dbname, user, passfile or password).

asyncpg: asyncpg.create_pool (prepared statements from its cache; on release the pool
resets the connection). sqlalchemy: SQLAlchemy 2 on psycopg2 with pool_pre_ping=True
(it validates each checkout with a query). Prints one JSON line: what was done and the
application's own mean time a transfer, from its first statement to its commit's
answer (the checkout and the release outside it), on a monotonic clock.
"""
import asyncio
import json
import sys
import time

SETUP = [
    "DROP TABLE IF EXISTS cb_app_accounts",
    "DROP TABLE IF EXISTS cb_app_moves",
    "CREATE TABLE cb_app_accounts (id int PRIMARY KEY, balance bigint NOT NULL)",
    "CREATE TABLE cb_app_moves (id bigserial PRIMARY KEY, src int, dst int, amount bigint, at timestamptz DEFAULT now())",
    "INSERT INTO cb_app_accounts SELECT g, 1000 FROM generate_series(1, 1000) g",
]
READ = "SELECT balance FROM cb_app_accounts WHERE id = $1"
MOVE = "UPDATE cb_app_accounts SET balance = balance + $2 WHERE id = $1"
LOG = "INSERT INTO cb_app_moves (src, dst, amount) VALUES ($1, $2, $3)"


def pair(i):
    return 1 + (i * 7) % 1000, 1 + (i * 13 + 1) % 1000


async def with_asyncpg(dsn, rounds, setup):
    import asyncpg

    kv = dict(kv.split("=", 1) for kv in dsn.split())
    pool = await asyncpg.create_pool(
        host=kv["host"], port=int(kv["port"]), user=kv["user"], database=kv["dbname"],
        passfile=kv.get("passfile"), password=kv.get("password"), ssl=False,
        min_size=2, max_size=2,
    )
    if setup:
        async with pool.acquire() as c:
            for s in SETUP:
                await c.execute(s)
    took = []
    for i in range(rounds):
        src, dst = pair(i)
        async with pool.acquire() as c:
            t0 = time.monotonic()
            async with c.transaction():
                await c.fetchval(READ, src)
                await c.execute(MOVE, src, -1)
                await c.execute(MOVE, dst, 1)
                await c.execute(LOG, src, dst, 1)
            took.append(time.monotonic() - t0)
        async with pool.acquire() as c:
            await c.fetchval(READ, dst)
    await pool.close()
    return took


def with_sqlalchemy(dsn, rounds, setup):
    from sqlalchemy import create_engine, text

    url = "postgresql+psycopg2:///?" + "&".join(
        f"{k}={v}" for k, v in (kv.split("=", 1) for kv in dsn.split())
    )
    engine = create_engine(url, pool_size=2, pool_pre_ping=True)
    if setup:
        with engine.begin() as c:
            for s in SETUP:
                c.execute(text(s))
    sa = lambda q: text(q.replace("$1", ":a").replace("$2", ":b").replace("$3", ":c"))
    took = []
    for i in range(rounds):
        src, dst = pair(i)
        with engine.connect() as c:
            t0 = time.monotonic()
            with c.begin():
                c.execute(sa(READ), {"a": src}).scalar()
                c.execute(sa(MOVE), {"a": src, "b": -1})
                c.execute(sa(MOVE), {"a": dst, "b": 1})
                c.execute(sa(LOG), {"a": src, "b": dst, "c": 1})
            took.append(time.monotonic() - t0)
        with engine.connect() as c:
            c.execute(sa(READ), {"a": dst}).scalar()
            c.rollback()
    engine.dispose()
    return took


def main():
    driver, dsn, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    setup = "--setup" in sys.argv
    if driver == "asyncpg":
        took = asyncio.run(with_asyncpg(dsn, rounds, setup))
    elif driver == "sqlalchemy":
        took = with_sqlalchemy(dsn, rounds, setup)
    else:
        sys.exit(f"pg_transfers.py: unknown driver {driver!r}: asyncpg or sqlalchemy")
    mean_ms = 1e3 * sum(took) / len(took) if took else None
    print(json.dumps({"transfers": len(took), "transfer_mean_ms": mean_ms}))


if __name__ == "__main__":
    main()
