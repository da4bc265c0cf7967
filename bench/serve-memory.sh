#!/usr/bin/env bash
# Peak memory of `resourcesync serve` against the number of resources (issue 15 item 1): for
# each N (default 10000 100000 300000), a tree of N files of about 512 B (as
# bench/source-memory.sh makes them), served on 127.0.0.1 (state and documents outside the tree,
# no watcher), then the peak RSS (VmHWM of /proc/PID/status) of the server:
#   ready     once it answers (its first scan and full publish done),
#   served    after every resource was asked once (GET, 16 keep-alive connections, by a small
#             Python asyncio client; every answer must be 200 with the file's length).
# Prints one line per N (N, seconds to serve all, requests/s, peak MB ready, peak MB served),
# then the ratio of the peaks at the largest N to those at 100,000 (or the second size given):
# memory that does not grow with the resources keeps it near 1.0.
# Usage: [BENCH_BIN=…] [BENCH_TREES=DIR] bench/serve-memory.sh [N...]
#   BENCH_TREES keeps the generated trees (DIR/tree-N) for later runs; they are left as found.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
our_binary
SIZES=("$@")
[ "${#SIZES[@]}" -gt 0 ] || SIZES=(10000 100000 300000)
W="$(mktemp -d)"
PID=""
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$PID" 2>/dev/null || true
    fi
    rm -rf "$W"
}
trap cleanup EXIT
TREES="${BENCH_TREES:-$W}"
mkdir -p "$TREES"
log "load $(load); sizes ${SIZES[*]}; trees under $TREES"

hwm() { awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

for n in "${SIZES[@]}"; do
    tree="$TREES/tree-$n"
    if [ ! -d "$tree" ]; then
        log "generating $n files"
        python3 "$ROOT/bench/destination_bench.py" tree "$n" 512 "$tree" >/dev/null
    fi
    out="$W/out-$n"
    rm -rf "$out"; mkdir -p "$out"
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "$BIN" serve "$tree" --listen "127.0.0.1:$port" --base-url "http://127.0.0.1:$port/" \
        --state "$out/state.sqlite" --no-watch --rescan-interval 86400 \
        --resourcelist-interval 86400 >"$out/log" 2>&1 &
    PID=$!
    # Ready: the Source Description answers (the first scan and publish are done by then).
    python3 - "$port" "$PID" <<'PY' || { echo "error: serve did not start: $(tail -5 "$out/log")" >&2; exit 1; }
import http.client, os, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 1800
while time.monotonic() < deadline:
    if not os.path.exists(f"/proc/{pid}"):
        sys.exit(1)
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/.well-known/resourcesync")
        if c.getresponse().status == 200:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(1)
PY
    ready="$(hwm "$PID")"
    timing="$(python3 - "$port" "$tree" <<'PY'
import asyncio, os, sys, time, urllib.parse
port, tree = int(sys.argv[1]), sys.argv[2]
files = []
for d, dirs, names in os.walk(tree):
    dirs[:] = [x for x in dirs if not x.startswith(".")]
    for f in names:
        if not f.startswith("."):
            p = os.path.join(d, f)
            files.append((urllib.parse.quote(os.path.relpath(p, tree)), os.path.getsize(p)))
todo = iter(files)
bad = []

async def worker():
    r, w = await asyncio.open_connection("127.0.0.1", port)
    for path, size in todo:
        w.write(f"GET /{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        status = int((await r.readline()).split()[1])
        length = 0
        while (line := await r.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            if k.lower() == "content-length":
                length = int(v)
        await r.readexactly(length)
        if status != 200 or length != size:
            bad.append((path, status, length))
    w.close()

async def main():
    await asyncio.gather(*(worker() for _ in range(16)))

t = time.monotonic()
asyncio.run(main())
secs = time.monotonic() - t
if bad:
    sys.exit(f"{len(bad)} bad answers, e.g. {bad[:3]}")
print(f"{secs:.1f} {len(files) / secs:.0f}")
PY
)"
    served="$(hwm "$PID")"
    echo "$n $timing $ready $served"
    kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=""
    rm -rf "$out"
done | tee "$W/results"

python3 - "$W/results" "${SIZES[@]}" <<'PY'
import sys
rows = {int(r[0]): r[1:] for r in (l.split() for l in open(sys.argv[1]))}
sizes = [int(s) for s in sys.argv[2:]]
print("N".rjust(9) + "serve s".rjust(9) + "req/s".rjust(8) + "ready MB".rjust(10) + "served MB".rjust(11))
for n in sizes:
    secs, rps, ready, served = rows[n]
    print(f"{n:9}{float(secs):9.1f}{int(rps):8}{float(ready):10.1f}{float(served):11.1f}")
if len(sizes) >= 2:
    ref = 100000 if 100000 in sizes and sizes[-1] != 100000 else sizes[-2]
    top = sizes[-1]
    print(f"ratio peak({top}) / peak({ref}): ready {float(rows[top][2]) / float(rows[ref][2]):.2f}, "
          f"served {float(rows[top][3]) / float(rows[ref][3]):.2f}")
PY
