#!/usr/bin/env bash
# Re-publish with dumps against re-publish without, in one run: a Source of N small files is
# published three times (three states: --dumps, as by default keeping its Resource Dump while
# at most 10% changed since; --dumps --dump-rebuild-after 0, a Resource Dump per snapshot
# reusing the unchanged packages; and without dumps), 1% of the files change, each
# re-publishes; then another 1% changes, spread over the whole tree, and each re-publishes again.
# The re-publish without dumps (scan + Change List + Resource List) is the floor: the goal is
# with dumps <= 2x it (issue 36, item 3). The first publishes are printed too: their difference
# is what a whole Resource Dump costs, which every re-publish paid before packages were carried
# over.
#
# Usage: bench/republish-dumps.sh [N=100000] [SIZE=512]
#
# Changes (not timed; the page cache warmed after each):
#   clustered  the files of d00/ (1% of them, as bench/million.sh changes): one URI range
#   spread     every 100th file over all of d00..d99 (1%): every package's range has some
#
# Environment: BENCH_BIN=PATH (else the release binary is built), CARGO_TARGET_DIR, TMPDIR.
# Exit: 0 measured; 1 a step failed; 2 usage.
set -euo pipefail
usage() { echo "usage: bench/republish-dumps.sh [N=100000] [SIZE=512]" >&2; exit 2; }
case "${1:-}" in -h|--help) usage ;; esac
[ $# -le 2 ] || usage
N="${1:-100000}"
SIZE="${2:-512}"
[[ "$N" =~ ^[1-9][0-9]*$ && "$SIZE" =~ ^[1-9][0-9]*$ ]] || usage
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
die() { echo "error: $*" >&2; exit 1; }
our_binary
HELPER="$ROOT/bench/destination_bench.py"
W="$(mktemp -d "${TMPDIR:-/tmp}/resourcesync-republish.XXXXXX")"
trap 'rm -rf "$W"' EXIT
URL="http://127.0.0.1:8080/"

declare -A WALL
# step NAME CMD...: wall seconds of CMD
step() {
    local name="$1" s e
    shift
    log "$name: $* (load $(load))"
    s=$(date +%s%N)
    "$@" >"$W/out.$name" 2>"$W/err.$name" || { tail -5 "$W/err.$name" >&2; die "$name failed"; }
    e=$(date +%s%N)
    WALL[$name]="$(python3 -c "print('%.3f' % (($e - $s) / 1e9))")"
    printf '%-28s %8s s\n' "$name" "${WALL[$name]}" >&2
}
publish() { # publish STATE [--dumps]
    local st="$1"
    shift
    "$BIN" publish "$W/tree" --base-url "$URL" --state "$W/$st/state.sqlite" --out "$W/$st/www" -q "$@"
}
warm() { sync -f "$W"; find "$W/tree" -type f -print0 | xargs -0 cat >/dev/null; }

log "generating $N files of ~$SIZE bytes"
python3 "$HELPER" tree "$N" "$SIZE" "$W/tree" >&2
warm
step first-plain publish plain
step first-dumps publish dumps --dumps
step first-rebuild publish rebuild --dumps --dump-rebuild-after 0

change() { # change clustered|spread
    python3 - "$W/tree" "$N" "$1" <<'PY'
import os, sys
root, n, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for i in range(0, n, 100):
    j = i if how == "clustered" else min(n - 1, i + (i // 100) % 100)
    p = os.path.join(root, "d%02d" % (j % 100), "f%07d.txt" % j)
    with open(p, "ab") as f:
        f.write(b"changed %s %d\n" % (how.encode(), i))
PY
    warm
}
for how in clustered spread; do
    log "changing 1% of the files ($how)"
    change "$how"
    step "re-$how-plain" publish plain
    step "re-$how-dumps" publish dumps --dumps
    step "re-$how-rebuild" publish rebuild --dumps --dump-rebuild-after 0
done
PKGS="$(find "$W/rebuild/www/resourcesync/dumps" -name '*.zip' | wc -l)"

python3 - "$N" "$PKGS" "${WALL[first-plain]}" "${WALL[first-dumps]}" "${WALL[first-rebuild]}" \
    "${WALL[re-clustered-plain]}" "${WALL[re-clustered-dumps]}" "${WALL[re-clustered-rebuild]}" \
    "${WALL[re-spread-plain]}" "${WALL[re-spread-dumps]}" "${WALL[re-spread-rebuild]}" <<'PY'
import sys
a = sys.argv
n, pkgs = int(a[1]), int(a[2])
print()
print("N=%d files; %d package files on disk after both re-publishes (rebuilt); wall seconds" % (n, pkgs))
print("--dumps: the default (the Resource Dump kept while <= 10% changed since it);")
print("rebuilt: --dumps --dump-rebuild-after 0 (a Resource Dump per snapshot, unchanged packages reused)")
print("%-40s %8s %8s %8s %8s %8s" % ("step", "--dumps", "rebuilt", "without", "ratio", "rebuilt"))
for i, how in ((3, "first publish"), (6, "re-publish, 1%, clustered (d00/)"), (9, "re-publish, 1%, spread (every range)")):
    p, d, r = float(a[i]), float(a[i + 1]), float(a[i + 2])
    goal = "" if i == 3 else "  goal <= 2x: %s" % ("ok" if d <= 2 * p else "over")
    print("%-40s %8.2f %8.2f %8.2f %7.2fx %7.2fx%s" % (how, d, r, p, d / p, r / p, goal))
print("%-40s %8.2f" % ("a whole Resource Dump (first: difference)", float(a[4]) - float(a[3])))
PY
