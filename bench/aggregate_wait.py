"""Waits until aggregators' /api/sources say every Source is synced (bench/aggregate.sh).

Usage: aggregate_wait.py API_URL[,API_URL...] SOURCES RESOURCES_EACH MIN_SYNCS [TIMEOUT_SECONDS]
A Source is done when one of the aggregators (workers sharing a state) shows it following with
RESOURCES_EACH resources after at least MIN_SYNCS syncs, and its copies republished since the
aggregator started (`--serve`: the republish is part of the work, and comes after `following`;
without it the clock stopped before one large Source's republish but after most small ones'). Prints the seconds waited; exit 1 on
timeout (with the last answers on stderr).
"""
import json
import sys
import time
import urllib.request

urls = sys.argv[1].split(",")
n, each, min_syncs = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 3600
start = time.time()
last = {}
while time.time() - start < timeout:
    done = set()
    for u in urls:
        try:
            with urllib.request.urlopen(u, timeout=10) as r:
                last[u] = json.load(r)
        except OSError:
            continue
        done |= {s["name"] for s in last[u]
                 if s["resources"] == each and s["syncs"] >= min_syncs and s["phase"] == "following"
                 and s.get("republishes", 0) >= 1}
    if len(done) == n:
        print("%.2f" % (time.time() - start))
        sys.exit(0)
    time.sleep(0.2)
print(json.dumps(last)[:2000], file=sys.stderr)
sys.exit(1)
