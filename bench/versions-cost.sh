#!/usr/bin/env bash
# The cost of `sync --versions` (issue 37; docs/history.md): a Source of N files (default
# 10,000) of about 512 B, PCT percent of them (default 1) changed per round for ROUNDS rounds
# (default 20); two Destinations follow it, one with --versions and one without, in turn (the
# order alternating per round). The Source is published in place (`resourcesync publish`) and
# served as static files by Python's http.server on 127.0.0.1.
# Prints the baseline and per-round times of each, their totals and ratio (with / without),
# and what each Destination holds on disk (du, hard links counted once) and the bodies kept.
# Usage: [BENCH_BIN=path/to/resourcesync] bench/versions-cost.sh [N] [ROUNDS] [PCT]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
our_binary
N="${1:-10000}"
ROUNDS="${2:-20}"
PCT="${3:-1}"
W="$(mktemp -d)"
trap 'kill "${SP:-}" 2>/dev/null || true; rm -rf "$W"' EXIT
python3 "$ROOT/bench/destination_bench.py" tree "$N" 512 "$W/tree" >/dev/null
python3 "$ROOT/bench/destination_bench.py" serve "$W/tree" >"$W/serve.out" 2>&1 &
SP=$!
for _ in $(seq 200); do grep -q http "$W/serve.out" && break; sleep 0.05; done
URL="$(head -1 "$W/serve.out")"
case "$URL" in http://127.0.0.1:*/) ;; *) echo "error: static server said '$URL'" >&2; exit 1 ;; esac
publish() { "$BIN" publish "$W/tree" --base-url "$URL" --state "$W/pub.sqlite" >/dev/null; }
publish
log "load $(load); $N files at $URL, $PCT% changed per round, $ROUNDS rounds"
secs() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "error: $* failed" >&2; exit 1; }; e=$(date +%s%N); echo $(( (e - s) / 1000 )); }
run() { # run KIND WHO
  if [ "$2" = with ]; then
    echo "$1 with $(secs "$BIN" sync "$URL" "$W/dest-with" --versions --no-check)"
  else
    echo "$1 without $(secs "$BIN" sync "$URL" "$W/dest-without" --no-check)"
  fi
}
{
  run baseline without
  run baseline with
  for r in $(seq "$ROUNDS"); do
    python3 - "$W/tree" "$N" "$PCT" "$r" <<'PY'
import os, random, sys
root, n, pct, r = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
               if "resourcesync" not in d and not f.startswith("."))
rng = random.Random(r)
for p in rng.sample(files, max(1, int(len(files) * pct / 100))):
    with open(p, "wb") as f:
        f.write((f"{p} round {r} ".encode() * 40)[:512])
PY
    publish
    if [ $((r % 2)) = 0 ]; then run round with; run round without
    else run round without; run round with; fi
  done
} | tee "$W/times"
python3 - "$W/times" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kind, who, us = line.split()
    t[(kind, who)].append(int(us) / 1e6)
for kind in ("baseline", "round"):
    a, b = t[(kind, "without")], t[(kind, "with")]
    print(f"{kind}: without {sum(a):.2f} s (median {statistics.median(a):.3f}), "
          f"with --versions {sum(b):.2f} s (median {statistics.median(b):.3f}), "
          f"ratio of totals {sum(b) / sum(a):.2f}")
PY
for who in without with; do
  echo "disk $who: $(du -sk "$W/dest-$who" | cut -f1) KiB (du, hard links once)"
done
echo "bodies kept: $(find "$W/dest-with/.resourcesync/versions" -type f | wc -l)"
