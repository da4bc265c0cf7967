#!/usr/bin/env bash
# Peak memory of `resourcesync publish` against the number of resources (issue 15 item 1,
# issue 23 item 3): for each N (default 10000 100000 300000), a tree of N files of about 512 B,
# then, each under /usr/bin/time -v (peak RSS = "Maximum resident set size"):
#   first     publish with a fresh state (every file hashed, the baseline recorded),
#   quiet     publish again, nothing changed (every file listed and merged, none read),
#   created   N/100 new files added (listed, hashed, recorded as created), publish,
#   deleted   those files removed again (recorded as deleted), publish.
# Prints one line per N and kind (seconds, peak RSS in MB), then per kind the ratio of the
# peak at the largest N to that at 100,000 (or the second size given): flat memory keeps it
# near 1.0 (the goal: at most 1.2).
# Usage: [BENCH_BIN=…] [BENCH_TREES=DIR] bench/source-memory.sh [N...]
#   BENCH_TREES keeps the generated trees (DIR/tree-N) for later runs; they are left as found.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
our_binary
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time (GNU time) is needed" >&2; exit 1; }
SIZES=("$@")
[ "${#SIZES[@]}" -gt 0 ] || SIZES=(10000 100000 300000)
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
TREES="${BENCH_TREES:-$W}"
mkdir -p "$TREES"
log "load $(load); sizes ${SIZES[*]}; trees under $TREES"

# Runs one publish; prints "SECONDS MB".
measure() {
    local tree="$1" out="$2"
    /usr/bin/time -v -o "$W/time" "$BIN" publish "$tree" --base-url http://example.org/ \
        --out "$out/docs" --state "$out/state.sqlite" --hash md5 >/dev/null 2>"$W/err" \
        || { echo "error: publish failed: $(tail -5 "$W/err")" >&2; exit 1; }
    python3 - "$W/time" <<'PY'
import sys
t = {}
for line in open(sys.argv[1]):
    k, _, v = line.strip().rpartition(": ")
    t[k] = v
h, m, s = (["0"] * 3 + t["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":"))[-3:]
secs = int(h) * 3600 + int(m) * 60 + float(s)
print(f"{secs:.2f} {int(t['Maximum resident set size (kbytes)']) / 1024:.1f}")
PY
}

for n in "${SIZES[@]}"; do
    tree="$TREES/tree-$n"
    if [ ! -d "$tree" ]; then
        log "generating $n files"
        python3 "$ROOT/bench/destination_bench.py" tree "$n" 512 "$tree" >/dev/null
    fi
    out="$W/out-$n"
    rm -rf "$out" "$tree/zz-new"; mkdir -p "$out"
    echo "$n first $(measure "$tree" "$out")"
    echo "$n quiet $(measure "$tree" "$out")"
    mkdir -p "$tree/zz-new"
    for ((i = 0; i < n / 100; i++)); do printf 'new %d\n' "$i" >"$tree/zz-new/n$i.txt"; done
    echo "$n created $(measure "$tree" "$out")"
    rm -rf "$tree/zz-new"
    echo "$n deleted $(measure "$tree" "$out")"
    rm -rf "$out"
done | tee "$W/results"

python3 - "$W/results" "${SIZES[@]}" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
sizes = [int(s) for s in sys.argv[2:]]
peak = {(int(n), k): float(mb) for n, k, _, mb in rows}
print("peak RSS (MB) by N:")
kinds = ["first", "quiet", "created", "deleted"]
print("N".rjust(9) + "".join(k.rjust(10) for k in kinds))
for n in sizes:
    print(str(n).rjust(9) + "".join(f"{peak[(n, k)]:10.1f}" for k in kinds))
if len(sizes) >= 2:
    ref = 100000 if 100000 in sizes and sizes[-1] != 100000 else sizes[-2]
    top = sizes[-1]
    print(f"ratio peak({top}) / peak({ref}): " + ", ".join(
        f"{k} {peak[(top, k)] / peak[(ref, k)]:.2f}" for k in kinds))
PY
