#!/usr/bin/env bash
# Change latency over WebSub push vs polling the Change List every second, in the same run.
#
# Usage: bench/push-latency.sh [N=1000] [RATE=20]
#
# 1. cargo build --release -p resourcesync-cli (or BENCH_BIN=/path/to/resourcesync)
# 2. bench/push_latency.py: a Source (`serve --hub embedded`, file watcher, default debounce
#    with --hub), a Destination following by push (`sync --watch --push`) and one polling
#    (`sync --watch --interval 1`); N new files written at RATE per second; for each, the time
#    from the write completing at the Source to the verified copy's appearance at each
#    Destination. Prints p50/p90/p99/max of both, their ratio, and whether push p99 <= 250 ms.
#    Every copy's content is checked.
#
# BENCH_SERVE_ARGS="..." adds arguments to `serve` (e.g. --debounce-ms 10).
# Loopback only; everything in a temp dir (TMPDIR, removed at exit). Exit 0 ok, 1 a copy
# missing or wrong, 2 usage.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,14p' "$0"; exit 2 ;; esac
N="${1:-1000}"
RATE="${2:-20}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${BENCH_BIN:-}" ]; then
    BIN="$BENCH_BIN"
else
    (cd "$ROOT" && cargo build --release -p resourcesync-cli >&2)
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/resourcesync"
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/push-latency.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "load: $(uptime)"
python3 "$ROOT/bench/push_latency.py" "$BIN" "$WORK" "$N" "$RATE"
