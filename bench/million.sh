#!/usr/bin/env bash
# One million resources end to end, by hand (too long for CI: about an hour on 2 cores): a
# Source publishes and serves a tree of N small files, a Destination baselines it from the
# Resource List and from the Resource Dump, 1% of the files change, the Source re-publishes,
# the Destination syncs incrementally and audits. Each step's wall time and peak RSS, against
# the floors measured in the same run: tar of the tree (read every file), md5sum of every file
# (2 processes), stat of every file.
#
# Usage: bench/million.sh [N=1000000] [SIZE=512]
#   (bench/million.sh 100000 checks the script in a few minutes)
#
# Steps (all on loopback, our release binary; state, documents and copies in a temp dir):
# (the floors: best of 3 runs each)
#   floor tar      tar -cf - TREE | cat >/dev/null        (GNU tar skips reading for /dev/null)
#   floor md5sum   find TREE -type f -print0 | xargs -0 -P2 -n1000 md5sum >/dev/null
#   floor stat     find TREE -type f -printf '%s %T@\n' >/dev/null
#   publish        resourcesync publish TREE --dumps --base-url URL    (first publish: reads all)
#   serve          resourcesync serve TREE --dumps --no-watch (same state: a re-scan) up to its
#                  "serving" line; its peak RSS (VmHWM) is read at the end of the run
#   sync list      resourcesync sync --no-dump URL D1
#   sync dump      resourcesync sync URL D2                (from the Resource Dump)
#   change 1%      N/100 files rewritten (new content, new length; not timed)
#   re-publish     resourcesync publish (the Change List; the server is stopped meanwhile and
#                  started again after, not timed). With --dumps a new snapshot's Resource Dump
#                  is written too, which reads and deflates every file: stat is not its floor
#                  (md5sum is printed beside it)
#   incremental    resourcesync sync URL D1
#   unchanged      resourcesync sync URL D1 once more, nothing changed (goal: < 50 ms at 100,000;
#                  the check of every copy is not due: it ran with the baseline)
#   audit          resourcesync audit --fast URL D1        (lengths and lastmods; exit 0)
# D1 and D2 are checked equal to the tree (files, bytes, digest) after their syncs.
#
# Environment: BENCH_BIN=PATH (else the release binary is built), CARGO_TARGET_DIR, TMPDIR
# (about N x 4 KiB x 4 of disk: the tree, two copies, the state and documents).
# Exit: 0 measured; 1 a step failed or a copy differs; 2 usage.
set -euo pipefail
usage() { echo "usage: bench/million.sh [N=1000000] [SIZE=512]" >&2; exit 2; }
case "${1:-}" in -h|--help) usage ;; esac
[ $# -le 2 ] || usage
N="${1:-1000000}"
SIZE="${2:-512}"
[[ "$N" =~ ^[1-9][0-9]*$ && "$SIZE" =~ ^[1-9][0-9]*$ ]] || usage
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
die() { echo "error: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || die "GNU time (/usr/bin/time) is needed for peak RSS"
our_binary
HELPER="$ROOT/bench/destination_bench.py"

W="$(mktemp -d "${TMPDIR:-/tmp}/resourcesync-million.XXXXXX")"
SERVE_PID=""
stop_serve() {
    [ -n "$SERVE_PID" ] || return 0
    # SERVE_PID is GNU time's: stop its child (serve), so that time reports serve's peak RSS.
    local child
    child="$(ps --ppid "$SERVE_PID" -o pid= | tr -d ' ' || true)"
    [ -n "$child" ] && kill -TERM "$child" 2>/dev/null || kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
    SERVE_PID=""
}
trap 'stop_serve; rm -rf "$W"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

declare -A WALL RSS
STEPS=()
# step NAME CMD...: wall seconds and peak RSS (KiB) of CMD, through GNU time
step() {
    local name="$1"; shift
    log "$name: $* (load $(load))"
    /usr/bin/time -f '%e %M' -o "$W/time.$name" "$@" >"$W/out.$name" 2>"$W/err.$name" \
        || { tail -5 "$W/err.$name" >&2; die "$name failed"; }
    read -r WALL[$name] RSS[$name] <"$W/time.$name"
    STEPS+=("$name")
    printf '%-14s %9s s %9d MiB\n' "$name" "${WALL[$name]}" "$((RSS[$name] / 1024))"
}

# floor NAME CMD...: as step, best (least wall) of 3 runs: the floors take seconds, and one run
# on a shared machine can be twice as slow as the next.
floor() {
    local name="$1" r w=""
    shift
    for r in 1 2 3; do
        step "$name" "$@"
        if [ -z "$w" ] || python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "${WALL[$name]}" "$w"; then
            w="${WALL[$name]}"
        fi
    done
    WALL[$name]="$w"
}

log "generating $N files of ~$SIZE bytes"
TREE_JSON="$(python3 "$HELPER" tree "$N" "$SIZE" "$W/tree")"
log "$TREE_JSON"
# The new tree written back before anything is timed (else the floors pay for its writeback),
# and the page cache warmed once for every step alike.
sync -f "$W"
find "$W/tree" -type f -print0 | xargs -0 cat >/dev/null

floor floor-tar sh -c 'tar -cf - -C "$1" . | cat >/dev/null' sh "$W/tree"
floor floor-md5sum sh -c 'find "$1" -type f -print0 | xargs -0 -P2 -n1000 md5sum >/dev/null' sh "$W/tree"
floor floor-stat find "$W/tree" -type f -printf '%s %T@\n'

PORT="$(free_port)"
URL="http://127.0.0.1:$PORT/"
SRC=(--state "$W/src/state.sqlite" --out "$W/src/www")
step publish "$BIN" publish "$W/tree" --dumps --base-url "$URL" "${SRC[@]}" -q

# start_serve: serve in the background through GNU time; waits for its "serving" line.
start_serve() {
    local tag="$1" s e line=""
    rm -f "$W/serve.fifo"; mkfifo "$W/serve.fifo"
    s=$(date +%s%N)
    /usr/bin/time -f '%e %M' -o "$W/time.serve-$tag" \
        "$BIN" serve "$W/tree" --dumps --no-watch --listen "127.0.0.1:$PORT" --base-url "$URL" "${SRC[@]}" \
        >"$W/serve.fifo" 2>"$W/err.serve-$tag" &
    SERVE_PID=$!
    read -r -t 3600 line <"$W/serve.fifo" || true
    e=$(date +%s%N)
    case "$line" in serving*) ;; *) tail -5 "$W/err.serve-$tag" >&2; die "serve did not start" ;; esac
    cat "$W/serve.fifo" >/dev/null &
    SERVE_UP="$(python3 -c "print('%.2f' % (($e - $s) / 1e9))")"
}
start_serve 1
WALL[serve]="$SERVE_UP"
log "serve: up in $SERVE_UP s"

check() {
    local got want
    want="$(python3 "$HELPER" summary "$W/tree")"
    got="$(python3 "$HELPER" summary "$1" --skip .resourcesync)"
    [ "$got" = "$want" ] || die "$1 differs from the tree"
}
step sync-list "$BIN" sync --no-dump "$URL" "$W/d1" -q
check "$W/d1"
step sync-dump "$BIN" sync "$URL" "$W/d2" -q --json
check "$W/d2"
# The dump baseline must come from the packages (its --json report's counts), not the list.
python3 - "$W/out.sync-dump" "$N" <<'EOF2' || die "the dump baseline did not come from the Resource Dump"
import json, sys
r = json.load(open(sys.argv[1]))
print("== dump path: %s package(s), %s copies from them (of %s)"
      % (r.get("packages"), r.get("from_packages"), sys.argv[2]), file=sys.stderr)
sys.exit(0 if r.get("packages", 0) >= 1 and r.get("from_packages", 0) == int(sys.argv[2]) else 1)
EOF2

stop_serve
read -r _ RSS[serve] <"$W/time.serve-1"
log "changing 1% of the files"
python3 - "$W/tree" "$N" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(0, n, 100):
    p = os.path.join(root, "d%02d" % (i % 100), "f%07d.txt" % i)
    with open(p, "ab") as f:
        f.write(b"changed %d\n" % i)
PY
step re-publish "$BIN" publish "$W/tree" --dumps --base-url "$URL" "${SRC[@]}" -q
start_serve 2
step incremental "$BIN" sync "$URL" "$W/d1" -q
check "$W/d1"
step unchanged "$BIN" sync "$URL" "$W/d1" -q
step audit "$BIN" audit --fast "$URL" "$W/d1"
stop_serve

python3 - "$N" "$TREE_JSON" \
    "${WALL[floor-tar]}" "${WALL[floor-md5sum]}" "${WALL[floor-stat]}" \
    "${WALL[publish]}" "${RSS[publish]}" "${WALL[serve]}" "${RSS[serve]}" \
    "${WALL[sync-list]}" "${RSS[sync-list]}" "${WALL[sync-dump]}" "${RSS[sync-dump]}" \
    "${WALL[re-publish]}" "${RSS[re-publish]}" "${WALL[incremental]}" "${RSS[incremental]}" \
    "${WALL[audit]}" "${RSS[audit]}" "${RSS[floor-tar]}" "${RSS[floor-md5sum]}" "${RSS[floor-stat]}" \
    "${WALL[unchanged]}" "${RSS[unchanged]}" <<'PY'
import json, sys
a = sys.argv
n, tree = int(a[1]), json.loads(a[2])
tar, md5, stat = float(a[3]), float(a[4]), float(a[5])
rows = [("publish (first)", 6, "md5sum", md5), ("serve (re-scan, up)", 8, "stat", stat),
        ("sync, Resource List", 10, "tar", tar), ("sync, Resource Dump", 12, "tar", tar),
        ("re-publish (1% changed)", 14, "stat", stat, "md5sum", md5), ("incremental sync", 16, None, None),
        ("incremental, unchanged", 23, "stat", stat), ("audit --fast", 18, "stat", stat)]
rows = [r if len(r) == 6 else r + (None, None) for r in rows]
print()
print("N=%d files, %.1f MB; loopback; wall seconds and peak RSS (serve: its first instance, through both baselines)" % (n, tree["bytes"] / 1e6))
print("%-26s %9s %9s   %s" % ("step", "seconds", "RSS MiB", "vs floor"))
for name, i, fname, f, fname2, f2 in rows:
    s, rss = float(a[i]), int(a[i + 1]) / 1024
    # GNU time counts hundredths: a floor under 0.01 s (a small N) has no ratio.
    vs = ", ".join("%.2fx %s" % (s / fl, fn) if fl else "n/a (%s < 0.01 s)" % fn
                   for fn, fl in ((fname, f), (fname2, f2)) if fn)
    print("%-26s %9.2f %9.1f   %s" % (name, s, rss, vs))
print("%-26s %9.2f %9.1f" % ("floor: tar of the tree", tar, int(a[20]) / 1024))
print("%-26s %9.2f %9.1f" % ("floor: md5sum (2 procs)", md5, int(a[21]) / 1024))
print("%-26s %9.2f %9.1f" % ("floor: stat of every file", stat, int(a[22]) / 1024))
PY
