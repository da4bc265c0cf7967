#!/usr/bin/env bash
# Destination at scale: peak memory on a 1,000,000-entry Resource List Index, and the time of an
# audit of 50,000 resources in sync.
#
# Usage: bench/destination-scale.sh [N_INDEX=1000000] [N_AUDIT=50000]
#
# 1. scripts/python-peers.sh (for Python 3 only: the helpers use the standard library)
# 2. cargo build --release -p resourcesync-cli (retried BENCH_BUILD_TRIES times,
#    BENCH_BUILD_WAIT s apart), or BENCH_BIN=/path/to/resourcesync to measure a given binary
# (a) Resource List Index, N_INDEX entries in parts of 50,000 (20 parts for 1,000,000):
#    bench/destination_bench.py rli writes, statically, a Source Description
#    (/.well-known/resourcesync) -> a Capability List -> the index -> the parts, every URI on
#    127.0.0.1 (entries: loc, lastmod, md5, length; the resources themselves do not exist), served
#    by `destination_bench.py serve` (Python's http.server on 127.0.0.1, kernel-chosen port).
#    Then, 1 run each, peak RSS polled:
#      resourcesync sync URL DEST --dry-run      (DEST empty: every entry "would create"; exit 0)
#      resourcesync audit URL DEST               (DEST empty: N_INDEX missing; exit 1)
#    Goal: peak RSS <= 100 MB (MiB here) for each.
# (b) Audit of N_AUDIT resources in sync: a tree of N_AUDIT files of ~512 bytes is served by
#    `resourcesync serve --no-watch` (release build), synced once with `resourcesync sync`, then
#    `resourcesync audit URL DEST` is timed (warm page cache, best of BENCH_RUNS=3), for two
#    Sources:
#      md5       the default: the Source publishes an md5 per resource (our audit then hashes
#                every copy: crates/destination/src/audit.rs local_item)
#      no digest lengths and lastmods only (our audit then only stats each copy)
#    (our Source always publishes a digest, so the no-digest Source is static: a Resource List of
#    the tree's lengths and mtimes written by destination_bench.py static-source, the files
#    served by Python's http.server). Goal: <= 1 s. Each audit must exit 0 and report N_AUDIT in
#    sync. Against the md5 Source, `resourcesync audit --fast URL DEST` is timed as well (the
#    same way): lengths and lastmods only, the digests recorded when each copy was written
#    standing for its content (issue 17: the audit of 50,000 by lengths and lastmods <= 1 s).
# Peak RSS: a fork+exec harness (destination_bench.py harness, run as python -I -S) polls
# /proc/PID/status VmHWM every 1 ms (the exec'd binary's own high-water mark, monotonic, so only
# growth in the last millisecond before exit can be missed); ru_maxrss from wait4 is printed as an
# upper bound (it counts the harness's fork copy). The load average (uptime) is printed with each
# measurement: the machine is shared.
# With BENCH_PERF=1, every measurement that misses its goal is run once more under
# `perf record -g` and the top symbols (self time) are printed.
# With BENCH_BASE_BIN=PATH (e.g. a copy of main's release binary), each audit of (b) is also
# run with that binary, against the same Source and DEST, the runs of the two binaries
# alternating (base, ours, base, ours, ...) so that both see the same load; the table then has
# a "[base]" row under each and the ratio ours/base of the best times. CPU seconds (user +
# system, from wait4) are printed for every measurement: unlike wall time they barely depend
# on the load.
#
# Environment (all optional):
#   BENCH_RUNS=3              runs of each audit in (b)
#   BENCH_SKIP_INDEX=1 / BENCH_SKIP_AUDIT=1   skip (a) / (b)
#   BENCH_PERF=1              profile what misses its goal (perf record -g)
#   BENCH_BIN=PATH            use this resourcesync binary, do not build
#   BENCH_BASE_BIN=PATH       also time this binary in (b) (alternating runs, see above)
#   BENCH_BUILD_TRIES=4 BENCH_BUILD_WAIT=60
#   TMPDIR                    where the temp dir goes (default /tmp; local disk; (a) needs
#                             ~0.2 GB per 1,000,000 entries)
#   CARGO_TARGET_DIR          honoured when locating the binary
#
# Exit: 0 ok (goals met or not: reported ok / MISS); 1 a command failed or reported wrong counts;
# 2 usage.
set -euo pipefail

usage() { echo "usage: bench/destination-scale.sh [N_INDEX=1000000] [N_AUDIT=50000]" >&2; exit 2; }
case "${1:-}" in -h|--help) usage ;; esac
[ $# -le 2 ] || usage
N_INDEX="${1:-1000000}"
N_AUDIT="${2:-50000}"
for v in N_INDEX N_AUDIT; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "error: $v must be a positive integer" >&2; usage; }
done
RUNS="${BENCH_RUNS:-3}"
BUILD_TRIES="${BENCH_BUILD_TRIES:-4}"
BUILD_WAIT="${BENCH_BUILD_WAIT:-60}"
for v in RUNS BUILD_TRIES BUILD_WAIT; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "error: BENCH_$v must be a non-negative integer" >&2; exit 2; }
done
[ "$RUNS" -ge 1 ] || RUNS=1
PART=50000
PARTS=$(( (N_INDEX + PART - 1) / PART ))

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"

log "python (scripts/python-peers.sh)"
VENV="$(scripts/python-peers.sh)"
PY="$VENV/bin/python"
HELPER="$ROOT/bench/destination_bench.py"

our_binary
BASE_BIN="${BENCH_BASE_BIN:-}"
if [ -n "$BASE_BIN" ]; then
    [ -x "$BASE_BIN" ] || { echo "error: BENCH_BASE_BIN=$BASE_BIN is not executable" >&2; exit 1; }
    log "base binary (b): $BASE_BIN"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/resourcesync-scale.XXXXXX")"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
harness() { "$PY" -I -S "$HELPER" harness "$@"; }
FAILED=()
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"

# Starts CMD... with stdout to a fifo; waits (up to 600 s) for its first line; sets STARTED_LINE
# and STARTED_PID; keeps draining its stdout.
start_server() {
    local name="$1"; shift
    local fifo="$WORK/$name.fifo"
    mkfifo "$fifo"
    "$@" >"$fifo" 2>"$WORK/$name.err" &
    STARTED_PID=$!
    PIDS+=("$STARTED_PID")
    STARTED_LINE=""
    read -r -t 600 STARTED_LINE <"$fifo" || true
    cat "$fifo" >/dev/null &
    PIDS+=("$!")
    if [ -z "$STARTED_LINE" ]; then
        echo "error: $name did not start:" >&2; tail -20 "$WORK/$name.err" >&2; exit 1
    fi
}

# record NAME GOAL_KIND GOAL JSON : appends one result line (with the load)
record() {
    "$PY" -c 'import json,sys; j=json.loads(sys.argv[4]); j.update(name=sys.argv[1], goal_kind=sys.argv[2], goal=float(sys.argv[3]), load=sys.argv[5]); print(json.dumps(j))' \
        "$1" "$2" "$3" "$4" "$(load)" >>"$RESULTS"
    log "$1: $("$PY" -c 'import json,sys; j=json.loads(sys.argv[1]); print("best %.3f s of %d (%s), CPU %s s, VmHWM %.1f MiB, ru_maxrss %.1f MiB" % (j["seconds_best"], j["runs"], ", ".join("%.3f" % t for t in j["seconds_all"]), ", ".join("%.3f" % t for t in j.get("cpu_all", [])), j["vmhwm_kib"] / 1024, j["maxrss_kib"] / 1024))' "$4")"
}

# merge_runs FILE : one harness JSON from the JSON lines of single runs in FILE (nothing when
# FILE is empty).
merge_runs() {
    "$PY" - "$1" <<'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
if runs:
    t = [x for j in runs for x in j["seconds_all"]]
    c = [x for j in runs for x in j.get("cpu_all", [])]
    print(json.dumps(dict(runs[0], runs=len(t), seconds_all=t, cpu_all=c, seconds_best=min(t),
                          seconds_median=sorted(t)[len(t) // 2],
                          maxrss_kib=max(j["maxrss_kib"] for j in runs),
                          vmhwm_kib=max(j["vmhwm_kib"] for j in runs))))
EOF
}

# audit_runs TAG URL DEST [ARG...] : RUNS audits of DEST (exit 0 expected; ARGs after `audit`),
# each run of ours preceded by one of the base binary when there is one; prints the merged
# harness JSON of ours and writes the base's to $WORK/base-TAG.json (empty without a base).
# Fails as the harness does.
audit_runs() {
    local tag="$1" url="$2" dest="$3" r j
    shift 3
    : >"$WORK/runs-$tag.jsonl"
    : >"$WORK/runs-base-$tag.jsonl"
    for ((r = 1; r <= RUNS; r++)); do
        if [ -n "$BASE_BIN" ]; then
            j="$(harness 1 1 0 "$WORK/audit-base-$tag.err" -- "$BASE_BIN" audit "$@" "$url" "$dest")" || { echo "base: $j"; return 1; }
            echo "$j" >>"$WORK/runs-base-$tag.jsonl"
        fi
        j="$(harness 1 1 0 "$WORK/audit-$tag.err" -- "$BIN" audit "$@" "$url" "$dest")" || { echo "$j"; return 1; }
        echo "$j" >>"$WORK/runs-$tag.jsonl"
    done
    merge_runs "$WORK/runs-base-$tag.jsonl" >"$WORK/base-$tag.json"
    merge_runs "$WORK/runs-$tag.jsonl"
}

# perf_top NAME CMD... : one run under perf record -g, top symbols by self time and by children
perf_top() {
    local name="$1"; shift
    if ! command -v perf >/dev/null 2>&1; then log "perf not installed: no profile of $name"; return 0; fi
    log "perf record -g: $name"
    perf record -g -o "$WORK/perf-$name.data" -- "$@" >/dev/null 2>"$WORK/perf-$name.err" || true
    echo
    echo "perf: top symbols (self time), $name (load $(load))"
    { perf report -i "$WORK/perf-$name.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null \
        | grep '%' | grep -v '^#' | sed 's/  */ /g; s/ - - *$//' | cut -c1-150 | head -25; } || true
    echo "perf: top inclusive (children), $name"
    { perf report -i "$WORK/perf-$name.data" --children --sort symbol --stdio -g none 2>/dev/null \
        | grep '%' | grep -v '^#' | sed 's/  */ /g; s/ - - *$//' | cut -c1-150 | head -40; } || true
}

# ------------------------------------------------------------ (a) the index
if [ "${BENCH_SKIP_INDEX:-0}" != 1 ]; then
    WWW="$WORK/www"
    mkdir -p "$WWW"
    start_server static "$PY" "$HELPER" serve "$WWW"
    URL="$STARTED_LINE"
    URL_INDEX="$URL"
    case "$URL" in http://127.0.0.1:*/) ;; *) echo "error: static server said '$URL'" >&2; exit 1 ;; esac
    log "static server: $URL; generating a Resource List Index of $N_INDEX entries in $PARTS parts"
    RLI_JSON="$("$PY" "$HELPER" rli "$N_INDEX" "$PARTS" "$URL" "$WWW")"
    log "$RLI_JSON"
    cat "$WWW"/resourcelist-*.xml >/dev/null  # warm the page cache

    DEST="$WORK/dest-index"
    mkdir -p "$DEST"
    log "sync --dry-run (1 run, RSS polled); load $(load)"
    if J="$(harness 1 1 0 "$WORK/dryrun.err" -- "$BIN" sync "$URL" "$DEST" --dry-run)"; then
        record "sync --dry-run, $N_INDEX-entry index" rss_mib 100 "$J"
        "$PY" - "$J" "$N_INDEX" <<'EOF' || FAILED+=("sync --dry-run did not plan $N_INDEX creates")
import json, re, sys
j, n = json.loads(sys.argv[1]), int(sys.argv[2])
m = re.search(r"(\d+) created, (\d+) updated", j["stdout_head"])
if not m or int(m.group(1)) != n:
    sys.exit("sync --dry-run: expected %d created, got: %s" % (n, j["stdout_head"][:400]))
EOF
    else
        FAILED+=("sync --dry-run failed: $J")
    fi
    [ -z "$(ls -A "$DEST")" ] || FAILED+=("sync --dry-run wrote under DEST: $(ls -A "$DEST" | head -3)")
    log "audit (DEST empty: exit 1 expected; 1 run, RSS polled); load $(load)"
    if J="$(harness 1 1 1 "$WORK/audit-index.err" -- "$BIN" audit "$URL" "$DEST")"; then
        record "audit, $N_INDEX-entry index, DEST empty" rss_mib 100 "$J"
        "$PY" - "$J" "$N_INDEX" <<'EOF' || FAILED+=("audit did not report $N_INDEX missing")
import json, re, sys
j, n = json.loads(sys.argv[1]), int(sys.argv[2])
m = re.search(r"(\d+) resources at the Source, (\d+) in sync, (\d+) missing", j["stdout_head"])
if not m or int(m.group(1)) != n or int(m.group(3)) != n:
    sys.exit("audit: expected %d resources, %d missing, got: %s" % (n, n, j["stdout_head"][:400]))
EOF
    else
        FAILED+=("audit of the index did not exit 1: $J")
    fi
fi

# ------------------------------------------------------ (b) audit, in sync
if [ "${BENCH_SKIP_AUDIT:-0}" != 1 ]; then
    TREE="$WORK/tree"
    log "generating $N_AUDIT files of ~512 bytes"
    TREE_JSON="$("$PY" "$HELPER" tree "$N_AUDIT" 512 "$TREE")"
    log "$TREE_JSON"
    for variant in md5 nohash; do
        if [ "$variant" = md5 ]; then
            log "Source (md5): resourcesync serve --no-watch, first scan and publish of $N_AUDIT files"
            start_server "serve-$variant" "$BIN" serve "$TREE" --listen 127.0.0.1:0 --no-watch \
                --state "$WORK/src-$variant/state.sqlite" --out "$WORK/src-$variant/www"
            SERVE_PID="$STARTED_PID"
            URL="${STARTED_LINE##* at }"
            URL="${URL%%.well-known/*}"
            WHAT="Source publishes md5 (ours)"
        else
            # Our Source always publishes a digest (--hash takes one algorithm or more), so the
            # Source without digests is a static one: a Resource List of lengths and lastmods.
            log "Source (no digest): static Resource List of lengths and lastmods, Python http.server"
            mkdir -p "$WORK/www-$variant"
            start_server "static-$variant" "$PY" "$HELPER" serve "$WORK/www-$variant"
            SERVE_PID="$STARTED_PID"
            URL="$STARTED_LINE"
            log "$("$PY" "$HELPER" static-source "$TREE" "$URL" "$WORK/www-$variant")"
            WHAT="Source publishes no digest (static)"
        fi
        case "$URL" in http://127.0.0.1:*/) ;; *) FAILED+=("$variant: the Source did not start: '$STARTED_LINE'"); continue ;; esac
        DEST="$WORK/dest-$variant"
        log "sync once ($variant): $URL -> DEST; load $(load)"
        if ! J="$(harness 1 0 0 "$WORK/sync-$variant.err" -- "$BIN" sync "$URL" "$DEST")"; then
            FAILED+=("sync ($variant) failed: $J")
            kill "$SERVE_PID" 2>/dev/null || true
            continue
        fi
        log "$("$PY" -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["stdout_head"].strip().replace("\n"," | "), "(%.2f s)" % j["seconds_best"])' "$J")"
        log "audit ($variant): best of $RUNS${BASE_BIN:+, alternating with the base binary}, RSS polled; load $(load)"
        if J="$(audit_runs "$variant" "$URL" "$DEST")"; then
            record "audit, $N_AUDIT in sync, $WHAT" seconds 1 "$J"
            if [ -s "$WORK/base-$variant.json" ]; then
                record "audit, $N_AUDIT in sync, $WHAT [base]" seconds 1 "$(cat "$WORK/base-$variant.json")"
            fi
            "$PY" - "$J" "$N_AUDIT" <<'EOF' || FAILED+=("audit ($variant) did not report $N_AUDIT in sync")
import json, re, sys
j, n = json.loads(sys.argv[1]), int(sys.argv[2])
m = re.search(r"in sync: (\d+) resources at the Source, (\d+) in sync", j["stdout_head"])
if not m or int(m.group(1)) != n or int(m.group(2)) != n:
    sys.exit("audit: expected in sync, %d resources, got: %s" % (n, j["stdout_head"][:400]))
EOF
            if [ "${BENCH_PERF:-0}" = 1 ] && "$PY" -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["seconds_best"] > 1 else 1)' "$J"; then
                perf_top "audit-$variant" "$BIN" audit "$URL" "$DEST"
            fi
        else
            FAILED+=("audit ($variant) did not exit 0: $J")
        fi
        if [ "$variant" = md5 ]; then
            log "audit --fast ($variant): best of $RUNS${BASE_BIN:+, alternating with the base binary}, RSS polled; load $(load)"
            if J="$(audit_runs "$variant-fast" "$URL" "$DEST" --fast)"; then
                record "audit --fast, $N_AUDIT in sync, lengths and lastmods" seconds 1 "$J"
                if [ -s "$WORK/base-$variant-fast.json" ]; then
                    record "audit --fast, $N_AUDIT in sync, lengths and lastmods [base]" seconds 1 "$(cat "$WORK/base-$variant-fast.json")"
                fi
                "$PY" - "$J" "$N_AUDIT" <<'EOF' || FAILED+=("audit --fast ($variant) did not report $N_AUDIT in sync")
import json, re, sys
j, n = json.loads(sys.argv[1]), int(sys.argv[2])
m = re.search(r"in sync: (\d+) resources at the Source, (\d+) in sync", j["stdout_head"])
if not m or int(m.group(1)) != n or int(m.group(2)) != n:
    sys.exit("audit --fast: expected in sync, %d resources, got: %s" % (n, j["stdout_head"][:400]))
EOF
                if [ "${BENCH_PERF:-0}" = 1 ] && "$PY" -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["seconds_best"] > 1 else 1)' "$J"; then
                    perf_top "audit-$variant-fast" "$BIN" audit --fast "$URL" "$DEST"
                fi
            else
                FAILED+=("audit --fast ($variant) did not exit 0: $J")
            fi
        fi
        kill "$SERVE_PID" 2>/dev/null || true
    done
fi

# -------------------------------------------------------------------- table
echo
"$PY" - "$RESULTS" "${RLI_JSON:-null}" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rli = json.loads(sys.argv[2])
if rli:
    print("(a) index: %d entries in %d parts, %.1f MB of XML, served by Python http.server on 127.0.0.1"
          % (rli["entries"], rli["parts"], rli["bytes"] / 1e6))
print("%-62s %5s %9s %8s %10s %10s %8s  %s" % ("measurement", "runs", "seconds", "CPU s",
                                               "VmHWM MiB", "maxRSS MiB", "goal",
                                               "load 1/5/15 after"))
best = {r["name"]: r["seconds_best"] for r in rows}
for r in rows:
    hwm = r["vmhwm_kib"] / 1024 if r["vmhwm_kib"] else None
    if r["goal_kind"] == "rss_mib":
        ok = hwm is not None and hwm <= r["goal"]
        goal = "<=%dMiB %s" % (r["goal"], "ok" if ok else "MISS")
    else:
        ok = r["seconds_best"] <= r["goal"]
        goal = "<=%gs %s" % (r["goal"], "ok" if ok else "MISS")
    cpu = r.get("cpu_all") or []
    # The CPU time of the fastest run (what the best time cost).
    cpu_best = (cpu[r["seconds_all"].index(r["seconds_best"])]
                if len(cpu) == len(r["seconds_all"]) else None)
    print("%-62s %5d %9.3f %8s %10s %10.1f %8s  %s" % (r["name"], r["runs"], r["seconds_best"],
          "%.3f" % cpu_best if cpu_best is not None else "n/a",
          "%.1f" % hwm if hwm else "n/a", r["maxrss_kib"] / 1024, goal, r["load"]))
    if r["runs"] > 1:
        print("%-62s       all runs: %s" % ("", ", ".join("%.3f" % t for t in r["seconds_all"])))
        if cpu:
            print("%-62s       CPU s:    %s" % ("", ", ".join("%.3f" % t for t in cpu)))
    base = best.get(r["name"] + " [base]")
    if base:
        print("%-62s       ours/base (best times): %.2f" % ("", r["seconds_best"] / base))
print("(VmHWM: polled every 1 ms; maxRSS: wait4 ru_maxrss, an upper bound including the harness's fork copy)")
EOF

# Profiles of the index runs that missed the memory goal (after the table: they take a while).
if [ "${BENCH_PERF:-0}" = 1 ] && [ "${BENCH_SKIP_INDEX:-0}" != 1 ]; then
    while read -r line; do
        name="$("$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["name"] if r["goal_kind"]=="rss_mib" and (r["vmhwm_kib"] or 0)/1024 > r["goal"] else "")' "$line")"
        case "$name" in
            "sync --dry-run"*) perf_top sync-dry-run "$BIN" sync "$URL_INDEX" "$WORK/dest-index" --dry-run ;;
            "audit, "*"index"*) perf_top audit-index "$BIN" audit "$URL_INDEX" "$WORK/dest-index" ;;
        esac
    done <"$RESULTS"
fi

if [ "${#FAILED[@]}" -gt 0 ]; then
    printf 'error: %s\n' "${FAILED[@]}" >&2
    exit 1
fi
