#!/usr/bin/env bash
# A first baseline through the kit's WAN emulator, two binaries alternating against one Source:
# the wide-area start of issue 36 item 4 measured base against head in the same session.
#
# Usage: bench/ab-wan.sh BASE_BIN [N=1000] [RUNS=5] [SIZE=512]
#
# 1. builds our release binary (or takes BENCH_BIN: the head) and the kit's wan_proxy example;
#    the emulator's self-check (as bench/sync-wan.sh)
# 2. a tree of N files of SIZE*3/4..SIZE*5/4 bytes (bench/destination_bench.py), served by the
#    head's `serve` behind one proxy of BENCH_RTT_MS round trip (default 54) and BENCH_MBIT
#    Mbit/s (default 1000), published under the proxy's URL
# 3. RUNS rounds of `BASE_BIN sync URL DEST -q` then `HEAD sync URL DEST -q` (the Resource List
#    path, each into a new directory, each copy checked equal to the tree), timed around the
#    process; the order within a round alternates (base first in odd rounds). The copies are
#    removed only at the end: on ext4 without a journal, files created within a minute or so of
#    a mass delete pay for it (the inode allocator skips recently deleted inodes, one by one:
#    `recently_deleted`), which a first sync into a new directory does not meet
# 4. every run's seconds, sorted, and the medians; and the floor: the round trips the Source's
#    documents need (root and well-known URI together, Capability List, Resource List and
#    Change List together, the downloads at BENCH_WINDOW in flight (default 256, the default
#    --concurrency), the Change List asked for again) plus the bytes at the bandwidth (the
#    emulator accepts connections on loopback: a TCP handshake costs no round trip here)
#
# Environment: BENCH_RTT_MS=54 BENCH_MBIT=1000 BENCH_WINDOW=256 BENCH_BIN=PATH CARGO_TARGET_DIR
#   TMPDIR
# Exit: 0 measured; 1 a run failed, a copy differs, or the emulator is off; 2 usage.
set -euo pipefail

usage() { echo "usage: bench/ab-wan.sh BASE_BIN [N=1000] [RUNS=5] [SIZE=512]" >&2; exit 2; }
case "${1:-}" in -h|--help|"") usage ;; esac
[ $# -le 4 ] || usage
BASE="$1"
N="${2:-1000}"
RUNS="${3:-5}"
SIZE="${4:-512}"
RTT="${BENCH_RTT_MS:-54}"
MBIT="${BENCH_MBIT:-1000}"
WINDOW="${BENCH_WINDOW:-256}"
for v in N RUNS SIZE RTT MBIT WINDOW; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "error: $v must be a non-negative integer, got '${!v}'" >&2; usage; }
done
[ "$N" -ge 1 ] && [ "$RUNS" -ge 1 ] && [ "$MBIT" -ge 1 ] && [ "$WINDOW" -ge 1 ] || usage
[ -x "$BASE" ] || { echo "error: BASE_BIN $BASE is not executable" >&2; exit 2; }
BASE="$(cd "$(dirname "$BASE")" && pwd)/$(basename "$BASE")"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
die() { echo "error: $*" >&2; exit 1; }

VENV="$(scripts/python-peers.sh)"
PY="$VENV/bin/python"
HELPER="$ROOT/bench/destination_bench.py"
our_binary
log "cargo build --release -p resourcesync-testkit --example wan_proxy"
cargo build -q --release -p resourcesync-testkit --example wan_proxy >&2 || die "wan_proxy build failed"
PROXY="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/wan_proxy"
case "$PROXY" in /*) ;; *) PROXY="$ROOT/$PROXY" ;; esac
"$PROXY" --self-check "$RTT" "$MBIT" || die "the WAN emulator is off its configuration"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/resourcesync-abwan.XXXXXX")"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now() { date +%s%N; }

TREE_JSON="$("$PY" "$HELPER" tree "$N" "$SIZE" "$WORK/tree")"
TREE_SUM="$("$PY" "$HELPER" summary "$WORK/tree")"
port="$(free_port)"
"$PROXY" "127.0.0.1:$port" "$RTT" "$MBIT" >"$WORK/proxy.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do grep -q listening "$WORK/proxy.out" && break; sleep 0.05; done
URL="$(sed -n 's/^listening //p' "$WORK/proxy.out")"
[ -n "$URL" ] || die "wan_proxy did not start"
mkfifo "$WORK/serve.fifo"
"$BIN" serve "$WORK/tree" --listen "127.0.0.1:$port" --base-url "$URL" --no-watch \
    --state "$WORK/src/state.sqlite" --out "$WORK/src/www" >"$WORK/serve.fifo" 2>"$WORK/serve.err" &
PIDS+=($!)
line=""
read -r -t 600 line <"$WORK/serve.fifo" || true
case "$line" in serving*) ;; *) tail -20 "$WORK/serve.err" >&2; die "serve did not start" ;; esac
cat "$WORK/serve.fifo" >/dev/null &
log "Source behind the link: $URL ($TREE_JSON)"

BASE_T=()
HEAD_T=()
# one NAME BIN: a baseline into a new directory, timed (ms), the copy checked
RUN=0
one() {
    local name="$1" bin="$2" dest s e got ms
    RUN=$((RUN + 1))
    dest="$WORK/d-$RUN-$name"
    s="$(now)"
    "$bin" sync "$URL" "$dest" -q >"$WORK/run.out" 2>&1 || { tail -5 "$WORK/run.out" >&2; die "$name failed"; }
    e="$(now)"
    ms=$(( (e - s) / 1000000 ))
    got="$("$PY" "$HELPER" summary "$dest" --skip .resourcesync)"
    [ "$got" = "$TREE_SUM" ] || die "$name: the copy differs from the tree"
    printf '%-5s %6d ms  (load %s)\n' "$name" "$ms" "$(load)"
    if [ "$name" = base ]; then BASE_T+=("$ms"); else HEAD_T+=("$ms"); fi
}
for ((r = 1; r <= RUNS; r++)); do
    if (( r % 2 )); then one base "$BASE"; one head "$BIN"; else one head "$BIN"; one base "$BASE"; fi
done

LIST_BYTES="$(find "$WORK/src/www/resourcesync" -name 'resourcelist*.xml' -printf '%s\n' | awk '{s += $1} END {print s + 0}')"
"$PY" - "$N" "$RTT" "$MBIT" "$WINDOW" "$TREE_JSON" "$LIST_BYTES" "${BASE_T[*]}" "${HEAD_T[*]}" <<'EOF'
import json, math, statistics, sys
n, rtt_ms, mbit, window = (int(a) for a in sys.argv[1:5])
tree = json.loads(sys.argv[5])
list_b = int(sys.argv[6])
base = sorted(int(x) for x in sys.argv[7].split())
head = sorted(int(x) for x in sys.argv[8].split())
# root + well-known, Capability List, Resource List (and Change List), the downloads, the
# Change List asked for again.
trips = 1 + 1 + 1 + math.ceil(n / window) + 1
floor = trips * rtt_ms + (list_b + tree["bytes"]) * 8 / (mbit * 1e3)
print()
print("%d files (%.2f MB) through %d ms round trips, %d Mbit/s; ms, sorted:" % (n, tree["bytes"] / 1e6, rtt_ms, mbit))
for name, t in (("base", base), ("head", head)):
    print("%-5s %s  median %d" % (name, " ".join(map(str, t)), statistics.median(t)))
print("floor: %d round trips (%d in flight) + bytes = %d ms" % (trips, window, floor))
EOF
