#!/usr/bin/env bash
# Our binary against an earlier one (BENCH_BASE_BIN), in the same run, alternating:
#   baseline sync, no-change incremental sync (with the check of the copies on disk, and with
#   --no-check), and publish --hash md5 with a fresh state, of N files (default 10,000) of about
#   512 B served by `resourcesync serve --no-watch` on 127.0.0.1.
# Prints every timing and, per kind, the medians and their ratio (ours / base).
# Usage: BENCH_BASE_BIN=/path/to/old/resourcesync bench/ab-sync-publish.sh [N] [ROUNDS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
our_binary
BASE="${BENCH_BASE_BIN:?set BENCH_BASE_BIN to the binary to compare with}"
N="${1:-10000}"
ROUNDS="${2:-5}"
W="$(mktemp -d)"
trap 'kill "${SP:-}" 2>/dev/null || true; rm -rf "$W"' EXIT
python3 "$ROOT/bench/destination_bench.py" tree "$N" 512 "$W/tree" >/dev/null
"$BIN" serve "$W/tree" --listen 127.0.0.1:0 --no-watch --state "$W/serve.sqlite" >"$W/serve.out" 2>&1 &
SP=$!
for _ in $(seq 200); do grep -q serving "$W/serve.out" && break; sleep 0.05; done
URL="$(grep -o 'http://[^ ]*well-known/resourcesync' "$W/serve.out" | head -1)"
[ -n "$URL" ] || { echo "error: serve did not start: $(cat "$W/serve.out")" >&2; exit 1; }
log "load $(load); $N files at $URL"
secs() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "error: $* failed" >&2; exit 1; }; e=$(date +%s%N); echo $(( (e - s) / 1000 )); }
for r in $(seq "$ROUNDS"); do
  for who in base ours; do
    if [ "$who" = base ]; then b="$BASE"; else b="$BIN"; fi
    d="$W/dest-$who-$r"
    echo "baseline $who $(secs "$b" sync "$URL" "$d")"
    echo "incremental $who $(secs "$b" sync "$URL" "$d")"
    if [ "$who" = ours ]; then echo "incremental-no-check ours $(secs "$b" sync "$URL" "$d" --no-check)"; fi
    rm -rf "$W/pub"; mkdir -p "$W/pub"
    echo "publish $who $(secs "$b" publish "$W/tree" --base-url http://example.org/ --out "$W/pub/out" --state "$W/pub/state.sqlite" --hash md5)"
  done
done | tee "$W/times"
python3 - "$W/times" <<'PY'
import statistics, sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kind, who, us = line.split()
    t[(kind, who)].append(int(us) / 1e6)
for kind in ("baseline", "incremental", "publish"):
    b, o = statistics.median(t[(kind, "base")]), statistics.median(t[(kind, "ours")])
    print(f"{kind}: base {b:.3f} s, ours {o:.3f} s, ratio {o / b:.2f}")
nc = t.get(("incremental-no-check", "ours"))
if nc:
    print(f"incremental --no-check: ours {statistics.median(nc):.3f} s, ratio to base incremental {statistics.median(nc) / statistics.median(t[('incremental', 'base')]):.2f}")
PY
