"""bench/app.sh's verdict: the trace's prediction at +RTT beside the replay's measurement,
and what the application's users saw (figures, no bar). Usage: judge.py WORK RTT_MS
ROUTE_LINE, with WORK holding app.trace.gz, trace.json, replay_pace.json, replay_max.json,
rec.json and relay.json. Exits 0 (PASS), 1 (MISS) or 2 (a replay did not do what was
recorded, so its figure measures something else)."""

import gzip
import json
import os
import sys

work, rtt, route = sys.argv[1], float(sys.argv[2]), sys.argv[3]
load = lambda name: json.load(open(os.path.join(work, name)))  # noqa: E731
trace, rec, relay = load("trace.json"), load("rec.json"), load("relay.json")
pace, fast = load("replay_pace.json")["summary"], load("replay_max.json")["summary"]
prof = trace["profile"]
r = prof["requests"]
pred = {p["scenario"]: p for p in trace["predictions"]}
at, here = pred[f"+{rtt:g} ms"], pred["as recorded"]

# Counted in the trace: round trips (requests the client waited for: think_ns set and a
# response), the requests in no transaction, and the longest client time inside one.
round_trips, outside, in_tx, status = 0, 0, [], {}
with gzip.open(os.path.join(work, "app.trace.gz"), "rt") as f:
    for line in f:
        e = json.loads(line)
        if e["type"] != "request":
            continue
        if e.get("think_ns") is not None and e.get("outcome") != "no_response":
            round_trips += 1
        before = status.get(e["session"], "idle")
        if before != "idle" and e.get("think_ns"):
            sql = e.get("sql") or next((st.get("sql") for st in e.get("steps") or [] if st.get("sql")), "?")
            in_tx.append((e["think_ns"], " ".join(str(sql).split())[:50]))
        status[e["session"]] = e.get("tx") or before
outside = r["requests"] - round(r["requests_per_transaction"] * r["transactions"])

problems = []
for name, s in (("at the recorded pace", pace), ("--speed max", fast)):
    f = s["fidelity"]
    if s["replayed"]["connected"] != s["recorded"]["sessions"] or s["replayed"]["transactions"] != s["recorded"]["transactions"]:
        problems.append(f"replay {name}: {s['replayed']['connected']} of {s['recorded']['sessions']} sessions "
                        f"connected, {s['replayed']['transactions']} transactions of {s['recorded']['transactions']}")
    if f["failed_now_not_then"] or f["requests_not_sent"]:
        problems.append(f"replay {name}: failed now but not when recorded {f['failed_now_not_then']} "
                        f"({'; '.join(f['failed_now_examples'])}), not sent {f['requests_not_sent']}")
tt = pace["transaction_times"]
measured = tt["per_transaction_ms"]
predicted = at["per_transaction_ms"]
ratio = measured / predicted
verdict = "PASS" if abs(ratio - 1) <= 0.10 else "MISS"
client = prof["split"]["client_ms"]
lag = pace["fidelity"]["lag"] or {}
back_to_back = fast["elapsed_s"] * 1000 / fast["replayed"]["transactions"] if fast["replayed"]["transactions"] else float("nan")
model_total = prof["duration_s"] + (rtt * round_trips + (at["connect_ms"] - here["connect_ms"]) * prof["connections"]["sessions"]) / 1000

print(f"  recorded: {prof['connections']['sessions']} session(s), {r['requests']} requests ({round_trips} round trips, "
      f"{outside} in no transaction), {r['transactions']} transactions of {r['round_trips_per_transaction']:.3f} round trips, "
      f"{prof['duration_s']:.1f} s; a transaction {here['transaction_ms']:.3f} ms: server {prof['split']['server_ms']:.3f}, "
      f"network {prof['split']['network_ms']:.3f}, the application's own time inside it {client:.3f}")
print(f"  predicted  connbench trace, \"+{rtt:g} ms\" per_transaction_ms:      {predicted:8.3f} ms a transaction"
      f"  [{at['how']}; the connect's share {at['connect_ms']:.1f} ms / {r['transactions_per_session']:.0f}]")
print(f"  measured   connbench replay --rtt {rtt:g}ms (recorded pace), transaction_times.per_transaction_ms: {measured:8.3f} ms a transaction"
      f"  [mean {tt['now']['mean_ms']:.3f} ms first send to last answer (recorded {tt['recorded']['mean_ms']:.3f}), "
      f"connects {tt['connect_mean_ms']:.1f} ms; {route.strip() or 'route not printed'}]")
diagnosis = os.environ.get("CB_APP_FAST_HASHER") == "1"
print(f"  measured / predicted {ratio:.3f}; bar within 1 +- 0.10: {verdict}"
      + (" (diagnosis run with the MD5 hasher: not the acceptance's figure)" if diagnosis else ""))
big = max(in_tx, default=(0, ""))
print(f"  in both: the application's own time inside a transaction, {client:.3f} ms a transaction when recorded (the longest "
      f"{big[0] / 1e6:.0f} ms, before \"{big[1]}\"); the replay keeps it after each answer, also when behind its schedule")
print(f"  fidelity at the recorded pace: {pace['elapsed_s']:.2f} s, on time {100 * (pace['fidelity']['on_time_share'] or 0):.1f}% "
      f"of requests, lag p50 {lag.get('p50_ms', 0):.1f} ms, max {lag.get('max_ms', 0):.1f} ms (every round trip 50 ms longer than "
      f"recorded: a session falls behind its schedule by design)")
print(f"  --speed max (no think, no schedule), elapsed / transactions: {back_to_back:.3f} ms a transaction (figure, no bar)")
print(f"  what users feel (the driver's pages: an HTTP request's first byte sent to its response's last byte read):")
print(f"    recorded run (+0):                  page mean {rec['mean_ms']:8.2f} ms, {rec['pages']} pages in {rec['elapsed_s']:.1f} s")
print(f"    through connbench relay --rtt {rtt:g}ms: page mean {relay['mean_ms']:8.2f} ms, {relay['pages']} pages in {relay['elapsed_s']:.1f} s")
per_page = rec["mean_ms"] + (model_total - prof["duration_s"]) * 1000 / rec["pages"]
print(f"    the model per page (recorded mean + {rtt:g} ms x {round_trips / rec['pages']:.2f} round trips a page, the connect's "
      f"extra spread): {per_page:8.2f} ms, measured / model {relay['mean_ms'] / per_page:.3f}; the whole run "
      f"{model_total:.1f} s modelled, {relay['elapsed_s']:.1f} s driven, {pace['elapsed_s']:.1f} s replayed at the recorded pace "
      f"(figures, no bar; a page is {r['transactions'] / rec['pages']:.2f} transactions)")
print("method: Django's admin (psycopg 3, Django's pool of one) recorded by connbench record beside it; the prediction "
      "is connbench trace's round-trip model (the recorded mean transaction, first request to last response, + the added "
      "round trip x round trips a transaction, + the connect's share); the measurement is connbench replay at the recorded "
      "pace through its relay adding the round trip, on a copy of the database as it was before the recording: each "
      "transaction's first send to its last answer, the application's recorded think time kept after each answer, "
      "+ the connects' share (replay's transaction_times.per_transaction_ms, the unit of trace's per_transaction_ms); "
      "users' pages are timed by the driver, through connbench relay; each replay on a fresh copy")
if problems:
    for p in problems:
        print(f"FAIL  app: {p}", file=sys.stderr)
    sys.exit(2)
sys.exit(0 if verdict == "PASS" else 1)
