"""A booking application on MySQL Connector/Python with autocommit off and server-side
prepared statements (a `prepared=True` cursor: COM_STMT_PREPARE / EXECUTE / CLOSE for
each statement). Each booking checks a seat, reserves it and writes a log line, then
commits: the transaction begins implicitly (autocommit off) and no BEGIN is sent.

    mysql_bookings.py HOST PORT USER PASSWORD DATABASE BOOKINGS [--setup]

Prints one JSON line: bookings committed, and the application's own mean time a booking
(first request to the commit's answer), measured with a monotonic clock.
"""
import json
import sys
import time

import mysql.connector


def main():
    host, port, user, password, database, bookings = sys.argv[1:7]
    conn = mysql.connector.connect(
        host=host, port=int(port), user=user, password=password, database=database,
        autocommit=False, use_pure=True, ssl_disabled=True,
    )
    if "--setup" in sys.argv:
        c = conn.cursor()
        c.execute("DROP TABLE IF EXISTS cb_app_seats")
        c.execute("DROP TABLE IF EXISTS cb_app_log")
        c.execute("CREATE TABLE cb_app_seats (id INT PRIMARY KEY, taken INT NOT NULL) ENGINE=InnoDB")
        c.execute("CREATE TABLE cb_app_log (id INT AUTO_INCREMENT PRIMARY KEY, seat INT, at DATETIME) ENGINE=InnoDB")
        c.executemany("INSERT INTO cb_app_seats VALUES (%s, 0)", [(i,) for i in range(1000)])
        conn.commit()
        c.close()
    committed = 0
    took = []
    for i in range(int(bookings)):
        seat = (i * 7) % 1000
        t0 = time.monotonic()
        c = conn.cursor(prepared=True)
        c.execute("SELECT taken FROM cb_app_seats WHERE id = %s", (seat,))
        c.fetchall()
        c.execute("UPDATE cb_app_seats SET taken = taken + 1 WHERE id = %s", (seat,))
        c.execute("INSERT INTO cb_app_log (seat, at) VALUES (%s, NOW())", (seat,))
        conn.commit()
        took.append(time.monotonic() - t0)
        c.close()
        committed += 1
    conn.close()
    mean_ms = 1e3 * sum(took) / len(took) if took else None
    print(json.dumps({"committed": committed, "mean_ms": mean_ms}))


if __name__ == "__main__":
    main()
