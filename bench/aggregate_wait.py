"""Waits until an aggregator's /api/sources says every Source is synced (bench/aggregate.sh).

Usage: aggregate_wait.py API_URL SOURCES RESOURCES_EACH MIN_SYNCS [TIMEOUT_SECONDS]
Prints the seconds waited. Exit 1 on timeout (with the last answer on stderr).
"""
import json
import sys
import time
import urllib.request

url, n, each, min_syncs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 3600
start = time.time()
last = None
while time.time() - start < timeout:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            last = json.load(r)
    except OSError:
        time.sleep(0.2)
        continue
    done = [s for s in last
            if s["resources"] == each and s["syncs"] >= min_syncs and s["phase"] in ("following", "elsewhere")]
    # With several workers, a Source another worker holds counts once it is synced by someone:
    # the caller sums the workers' views (see aggregate.sh); here, this worker's view.
    if len(done) == n:
        print("%.2f" % (time.time() - start))
        sys.exit(0)
    time.sleep(0.2)
print(json.dumps(last)[:2000], file=sys.stderr)
sys.exit(1)
