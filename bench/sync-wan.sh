#!/usr/bin/env bash
# Baseline sync across an emulated wide-area link: our `resourcesync sync` (Resource List path
# over HTTP/1.1 and over HTTP/2, Resource Dump path) against resync 2.0.1's
# `resync-sync --baseline`, from our `serve`, through the kit's WAN proxy (no kernel netem on
# this machine), with the floor the link allows printed in the same run.
#
# Usage: bench/sync-wan.sh [N=10000] [SIZE=512]
#
# 1. builds the release `resourcesync` binary (or BENCH_BIN) and the kit's wan_proxy example
#    (crates/testkit/examples/wan_proxy.rs), nothing else
# 2. the emulator's self-check: `wan_proxy --self-check RTT MBIT` (a ping-pong through it must
#    measure the round trip within 10%, a 1 MB echo the capped bandwidth within 10%); the bench
#    stops when it is off
# 3. a tree of N files of SIZE*3/4..SIZE*5/4 bytes (mean SIZE; bench/destination_bench.py), and
#    a subset tree of BENCH_RESYNC_N files for resync-sync
# 4. per Source (list: `serve`; dumps: `serve --dumps`; subset: `serve` of the subset), a proxy
#    of RTT_MS round trip (half each way) and MBIT Mbit/s each way in front of it, the Source
#    published under the proxy's URL (--base-url), so every request crosses the link
# 5. one run each, into a new directory, checked equal to its tree (files, bytes, digest):
#      list/h1      resourcesync sync URL DEST                       (from 32 connections, adaptive
#                   up to --concurrency, 256)
#      list/h2      resourcesync sync --http2-prior-knowledge URL DEST  (one connection; 32 and
#                   BENCH_H2_CONCURRENCY streams asked; `serve` allows 32 streams per
#                   connection, SETTINGS_MAX_CONCURRENT_STREAMS, so more wait their turn)
#      dump         resourcesync sync URL DEST  against the dumps Source
#      resync       resync-sync --baseline URL=DEST  against the subset Source (one request at
#                   a time: its time grows with N, so it is extrapolated to N, and said so)
# 6. the floors: the bytes at the capped bandwidth, plus one round trip per concurrent batch:
#      list  (list document + N bodies) / bandwidth + (2 + ceil(N / 256)) round trips
#            (discovery and list, then N fetches 256 at a time: the default ceiling of the
#            adaptive concurrency; HTTP/2 against `serve` is held to its 32 streams)
#      dump  (list document + dump packages) / bandwidth + 3 round trips
#    (headers and TCP/TLS handshakes left out: a floor no client can go under)
# 7. the table: seconds, resources/s, ours/floor, resync/ours (goals of issue 17: ours >= 100x
#    resync-sync on the list path, within 2x of the floor; reported, not enforced)
#
# Environment: BENCH_RTT_MS=50 BENCH_MBIT=100 BENCH_RESYNC_N=500 (0: skip resync-sync)
#   BENCH_H2_CONCURRENCY=256 BENCH_BIN=PATH CARGO_TARGET_DIR TMPDIR
# Exit: 0 measured (goals met or not); 1 a run failed, a copy differs, or the emulator is off;
# 2 usage.
set -euo pipefail

usage() { echo "usage: bench/sync-wan.sh [N=10000] [SIZE=512]" >&2; exit 2; }
case "${1:-}" in -h|--help) usage ;; esac
[ $# -le 2 ] || usage
N="${1:-10000}"
SIZE="${2:-512}"
RTT="${BENCH_RTT_MS:-50}"
MBIT="${BENCH_MBIT:-100}"
RESYNC_N="${BENCH_RESYNC_N:-500}"
H2C="${BENCH_H2_CONCURRENCY:-256}"
for v in N SIZE RTT MBIT RESYNC_N H2C; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "error: $v must be a non-negative integer, got '${!v}'" >&2; usage; }
done
[ "$N" -ge 1 ] && [ "$SIZE" -ge 1 ] && [ "$MBIT" -ge 1 ] || usage
[ "$RESYNC_N" -le "$N" ] || RESYNC_N="$N"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
die() { echo "error: $*" >&2; exit 1; }

log "python peers (scripts/python-peers.sh)"
VENV="$(scripts/python-peers.sh)"
PY="$VENV/bin/python"
HELPER="$ROOT/bench/destination_bench.py"
our_binary
log "cargo build --release -p resourcesync-testkit --example wan_proxy"
cargo build -q --release -p resourcesync-testkit --example wan_proxy >&2 || die "wan_proxy build failed"
PROXY="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/wan_proxy"
case "$PROXY" in /*) ;; *) PROXY="$ROOT/$PROXY" ;; esac

echo "== emulator self-check (${RTT} ms round trip, ${MBIT} Mbit/s each way)"
"$PROXY" --self-check "$RTT" "$MBIT" || die "the WAN emulator is off its configuration: figures would be wrong"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/resourcesync-syncwan.XXXXXX")"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now() { date +%s%N; }
secs() { python3 -c "print('%.3f' % (($2 - $1) / 1e9))"; }

log "generating $N files of ~$SIZE bytes"
TREE_JSON="$("$PY" "$HELPER" tree "$N" "$SIZE" "$WORK/tree")"
TREE_SUM="$("$PY" "$HELPER" summary "$WORK/tree")"
if [ "$RESYNC_N" -gt 0 ]; then
    "$PY" "$HELPER" tree "$RESYNC_N" "$SIZE" "$WORK/subset" >/dev/null
    SUBSET_SUM="$("$PY" "$HELPER" summary "$WORK/subset")"
fi
log "$TREE_JSON"

# start NAME TREE [serve args...]: a proxy, then `serve` behind it publishing the proxy's URL;
# sets URL (the proxy's site root).
start() {
    local name="$1" tree="$2"; shift 2
    local port line="" u
    port="$(free_port)"
    "$PROXY" "127.0.0.1:$port" "$RTT" "$MBIT" >"$WORK/proxy-$name.out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 200); do grep -q listening "$WORK/proxy-$name.out" && break; sleep 0.05; done
    u="$(sed -n 's/^listening //p' "$WORK/proxy-$name.out")"
    [ -n "$u" ] || die "wan_proxy did not start"
    mkfifo "$WORK/serve-$name.fifo"
    "$BIN" serve "$tree" --listen "127.0.0.1:$port" --base-url "$u" --no-watch "$@" \
        --state "$WORK/src-$name/state.sqlite" --out "$WORK/src-$name/www" \
        >"$WORK/serve-$name.fifo" 2>"$WORK/serve-$name.err" &
    PIDS+=($!)
    read -r -t 600 line <"$WORK/serve-$name.fifo" || true
    case "$line" in serving*) ;; *) tail -20 "$WORK/serve-$name.err" >&2; die "serve ($name) did not start" ;; esac
    cat "$WORK/serve-$name.fifo" >/dev/null &
    URL="$u"
    log "$name Source behind the link: $URL"
}

declare -A T
# run KEY TREE_SUM DEST SKIP CMD...: times CMD, checks DEST
run() {
    local key="$1" sum="$2" dest="$3" skip="$4"; shift 4
    local s e got f="$WORK/run-${1//\//-}.out"
    log "$key: $* (load $(load))"
    s="$(now)"
    "$@" >"$f" 2>&1 || { tail -5 "$f" >&2; die "$key failed"; }
    e="$(now)"
    T[$key]="$(secs "$s" "$e")"
    got="$("$PY" "$HELPER" summary "$dest" ${skip:+--skip "$skip"})"
    [ "$got" = "$sum" ] || die "$key: the copy differs from the tree ($got vs $sum)"
    printf '%-28s %9s s\n' "$key" "${T[$key]}"
}

start list "$WORK/tree"
LIST_URL="$URL"
start dumps "$WORK/tree" --dumps
DUMP_URL="$URL"
run list/h1 "$TREE_SUM" "$WORK/d-h1" .resourcesync "$BIN" sync "$LIST_URL" "$WORK/d-h1" -q
run list/h2 "$TREE_SUM" "$WORK/d-h2" .resourcesync "$BIN" sync --http2-prior-knowledge "$LIST_URL" "$WORK/d-h2" -q
run "list/h2x$H2C" "$TREE_SUM" "$WORK/d-h2n" .resourcesync "$BIN" sync --http2-prior-knowledge --concurrency "$H2C" "$LIST_URL" "$WORK/d-h2n" -q
run dump "$TREE_SUM" "$WORK/d-dump" .resourcesync "$BIN" sync "$DUMP_URL" "$WORK/d-dump" -q
if [ "$RESYNC_N" -gt 0 ]; then
    start subset "$WORK/subset"
    mkdir -p "$WORK/cwd-resync"
    run resync "$SUBSET_SUM" "$WORK/d-resync" "" \
        sh -c 'cd "$1" && shift && exec "$@"' sh "$WORK/cwd-resync" "$VENV/bin/resync-sync" --baseline "$URL=$WORK/d-resync"
fi

LIST_BYTES="$(cat "$WORK"/src-list/www/resourcesync/resourcelist*.xml | wc -c)"
DUMP_BYTES="$(find "$WORK/src-dumps/www" -name '*.zip' -printf '%s\n' | awk '{s += $1} END {print s + 0}')"
DUMP_DOCS="$(find "$WORK/src-dumps/www/resourcesync" -name 'resourcedump*.xml' -printf '%s\n' | awk '{s += $1} END {print s + 0}')"

"$PY" - "$N" "$RESYNC_N" "$RTT" "$MBIT" "$H2C" "$TREE_JSON" "$LIST_BYTES" "$DUMP_BYTES" "$DUMP_DOCS" \
    "${T[list/h1]}" "${T[list/h2]}" "${T[list/h2x$H2C]}" "${T[dump]}" "${T[resync]:-}" <<'EOF'
import json, math, sys
n, rn, rtt_ms, mbit, h2c = (int(a) for a in sys.argv[1:6])
tree = json.loads(sys.argv[6])
list_b, dump_b, dump_docs = (int(a) for a in sys.argv[7:10])
h1, h2, h2n, dump = (float(a) for a in sys.argv[10:14])
resync = float(sys.argv[14]) if sys.argv[14] else None
bw, rtt = mbit * 1e6 / 8, rtt_ms / 1e3
floor_list = (list_b + tree["bytes"]) / bw + (2 + math.ceil(n / 256)) * rtt
floor_dump = (list_b + dump_docs + dump_b) / bw + 3 * rtt
resync_n = resync * n / rn if resync else None
print()
print("Baseline of N=%d resources (%.2f MB) from `resourcesync serve` through the WAN emulator:"
      % (n, tree["bytes"] / 1e6))
print("%d ms round trips (%d ms each way), %d Mbit/s each way" % (rtt_ms, rtt_ms // 2, mbit))
print()
print("%-44s %9s %12s %9s %12s" % ("client", "seconds", "resources/s", "/ floor", "resync / it"))
def row(name, s, floor):
    r = "%.0fx" % (resync_n / s) if resync_n else "n/a"
    print("%-44s %9.2f %12.0f %8.2fx %12s" % (name, s, n / s, s / floor, r))
row("ours, Resource List, HTTP/1.1, adaptive", h1, floor_list)
row("ours, Resource List, HTTP/2 (h2c) x 32", h2, floor_list)
row("ours, Resource List, HTTP/2 (h2c) x %d asked" % h2c, h2n, floor_list)
row("ours, Resource Dump", dump, floor_dump)
if resync:
    print("%-44s %9.2f %12.0f %9s %12s   (measured on %d, x %.0f)"
          % ("resync-sync --baseline, extrapolated to N", resync_n, n / resync_n, "", "1x", rn, n / rn))
print("%-44s %9.2f %12.0f" % ("floor, list path (bytes + ceil(N/256)+2 RTT)", floor_list, n / floor_list))
print("%-44s %9.2f %12.0f" % ("floor, dump path (bytes + 3 RTT)", floor_dump, n / floor_dump))
print()
best = min(h1, h2)
print("goal list path: ours >= 100x resync-sync: %s; within 2x of the floor: %.2fx %s"
      % (("%.0fx %s" % (resync_n / best, "ok" if resync_n / best >= 100 else "MISS")) if resync else "n/a",
         best / floor_list, "ok" if best / floor_list <= 2 else "MISS"))
print("dump path: %.2fx the floor" % (dump / floor_dump))
EOF
