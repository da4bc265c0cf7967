#!/usr/bin/env python3
"""Driver of bench/push-latency.sh: change latency from a Source to two Destinations, one
following by push (WebSub Change Notification), one polling the Change List every second.

    push_latency.py BIN WORKDIR N RATE

Starts `BIN serve SRC --hub embedded`, `BIN sync URL PUSHDEST --watch --push` and
`BIN sync URL POLLDEST --watch --interval 1`, waits until both have their baseline, then
writes N new files at RATE per second. Each write is timed when it completes (the file is
written to a temporary name and renamed into SRC, so the Source never sees half a file); a
thread lists both destination directories every millisecond and timestamps the first sight of
each name (a Destination renames a copy into place only after verifying its length and md5,
so a name's appearance is the verified copy). Prints the latency percentiles of each and
checks every copy's content. Only the standard library; loopback only.
"""
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def wait_line(proc, pattern, timeout):
    end = time.time() + timeout
    rx = re.compile(pattern)
    while time.time() < end:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise SystemExit("process exited early: %s" % proc.args)
            continue
        m = rx.search(line)
        if m:
            return m
    raise SystemExit("timed out waiting for %r" % pattern)


def main():
    binary, work, n, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    src = os.path.join(work, "src")
    push_dest = os.path.join(work, "push")
    poll_dest = os.path.join(work, "poll")
    for d in (src, push_dest, poll_dest):
        os.makedirs(d)
    stage = os.path.join(work, "stage")
    os.makedirs(stage)
    with open(os.path.join(src, "seed.txt"), "w") as f:
        f.write("seed\n")
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    procs = []

    def start(args):
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(os.path.join(work, "log-%d.txt" % len(procs)), "w"),
                             text=True, env=env)
        procs.append(p)
        return p

    try:
        serve = start([binary, "serve", src, "--listen", "127.0.0.1:0", "--state", os.path.join(work, "state", "src.sqlite"),
                       "--hub", "embedded", "--rescan-interval", "3600"] + os.environ.get("BENCH_SERVE_ARGS", "").split())
        m = wait_line(serve, r"serving .* at (http://[^/]+/)", 60)
        base = m.group(1)
        push = start([binary, "sync", base, push_dest, "--watch", "--push", "--interval", "3600", "--verbose"])
        poll = start([binary, "sync", base, poll_dest, "--watch", "--interval", "1"])
        seen = {"push": {}, "poll": {}}
        stop = threading.Event()

        def watcher():
            while not stop.is_set():
                for name, d in (("push", push_dest), ("poll", poll_dest)):
                    try:
                        names = os.listdir(d)
                    except OSError:
                        continue
                    now = time.monotonic()
                    s = seen[name]
                    for x in names:
                        if x not in s:
                            s[x] = now
                time.sleep(0.001)

        t = threading.Thread(target=watcher, daemon=True)
        t.start()
        # Both baselines done, and the push destination subscribed and caught up (its
        # second round).
        end = time.time() + 120
        while not ("seed.txt" in seen["push"] and "seed.txt" in seen["poll"]):
            if time.time() > end:
                raise SystemExit("baselines did not complete")
            time.sleep(0.05)
        wait_line(push, r"round 2", 120)
        # Keep reading every stdout: a full pipe would block a process on its next line.
        for p in (serve, push, poll):
            threading.Thread(target=lambda p=p: [None for _ in p.stdout], daemon=True).start()
        time.sleep(1.0)  # settle: not a synchronisation, only lets start-up work finish
        written = {}
        interval = 1.0 / rate
        t0 = time.monotonic()
        for i in range(n):
            name = "f%05d.txt" % i
            body = ("change %d " % i).encode() * 40
            tmp = os.path.join(stage, name)
            with open(tmp, "wb") as f:
                f.write(body)
            os.rename(tmp, os.path.join(src, name))
            written[name] = (time.monotonic(), hashlib.md5(body).hexdigest())
            nxt = t0 + (i + 1) * interval
            d = nxt - time.monotonic()
            if d > 0:
                time.sleep(d)
        end = time.time() + 120
        while not all(k in seen["push"] and k in seen["poll"] for k in written):
            if time.time() > end:
                break
            time.sleep(0.05)
        stop.set()
        t.join()
        ok = True
        print("changes: %d at %.0f/s (loopback)" % (n, rate))
        print("%-28s %8s %8s %8s %8s %8s" % ("destination", "arrived", "p50 ms", "p90 ms", "p99 ms", "max ms"))
        res = {}
        for name, d in (("push (WebSub)", push_dest), ("poll (Change List, 1 s)", poll_dest)):
            key = "push" if name.startswith("push") else "poll"
            lat = [(seen[key][k] - w[0]) * 1000.0 for k, w in written.items() if k in seen[key]]
            res[key] = lat
            print("%-28s %8d %8.1f %8.1f %8.1f %8.1f" % (name, len(lat), pct(lat, 50), pct(lat, 90), pct(lat, 99),
                                                       max(lat) if lat else float("nan")))
            for k, (_, md5) in written.items():
                p = os.path.join(d, k)
                if not os.path.exists(p) or hashlib.md5(open(p, "rb").read()).hexdigest() != md5:
                    ok = False
                    print("  MISSING or WRONG copy: %s in %s" % (k, key))
                    break
        if res["push"] and res["poll"]:
            print("poll p50 / push p50 = %.1fx; poll p99 / push p99 = %.1fx" % (
                pct(res["poll"], 50) / max(pct(res["push"], 50), 1e-9), pct(res["poll"], 99) / max(pct(res["push"], 99), 1e-9)))
            print("goal push p99 <= 250 ms: %s" % ("ok" if pct(res["push"], 99) <= 250 else "MISS"))
        return 0 if ok else 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
