#!/usr/bin/env bash
# Parse throughput: resync 2.0.1 (Python reference) vs our `resourcesync validate`.
#
# Usage: bench/parse-vs-resync.sh [N=50000]
#
# 1. scripts/python-peers.sh (the pinned resync venv; idempotent)
# 2. cargo build --release -p resourcesync-cli  -> target/release/resourcesync
# 3. bench/gen_resourcelist.py N  -> a temp dir on local disk (removed at exit)
# 4. in the same run, warm page cache, wall time:
#      resync   bench/resync_parse.py FILE 3     best of 3 (resync's own client read)
#      ours     resourcesync validate FILE       best of 5 (must exit 0)
#      floor    cat FILE > /dev/null             best of 5
#    and prints impl / seconds / MB/s (MB = 10^6 bytes) / peak RSS, and resync/ours.
# 5. generates a 1,000,000-entry list and reports our peak RSS for `validate`.
#
# Peak RSS needs no extra package: a minimal Python harness (python -I -S)
# fork+execs the command, polls /proc/PID/status VmHWM every 1 ms (the exec'd
# binary's own high-water mark, monotonic, so only growth in the last
# millisecond before exit can be missed) and reads the child's rusage from
# os.wait4(). That ru_maxrss is printed too, as an upper bound only: Linux
# counts the pages the child had before exec, i.e. the fork copy of the
# harness (~4-6 MiB here; with subprocess.run from a Python holding 300 MB a
# `true` reported 316 MB), so `true` is run under the same harness to show
# that floor.
#
# Environment (all optional):
#   BENCH_RSS_N=1000000       entries for the peak-RSS run (0 skips it)
#   BENCH_SKIP_RUST=1         run only the resync half (and exit 0)
#   BENCH_VALIDATE_ARGS="..." extra arguments put after `validate`
#   TMPDIR                    where the temp dir goes (default /tmp)
#   CARGO_TARGET_DIR          honoured when locating the binary
#
# Exit: 0 ok; 1 our half could not run (missing/failed build: the resync half
# still runs and is printed first) or validate did not exit 0 on the N-entry
# list; 2 usage. Exit 1 of validate (findings) is accepted for lists over the
# sitemap limit of 50,000 entries, e.g. the 1,000,000-entry RSS run (such a
# list breaks the 50,000-entry / 50 MB limits but is still read to the end).
set -euo pipefail

usage() { echo "usage: bench/parse-vs-resync.sh [N=50000]" >&2; exit 2; }
case "${1:-}" in -h|--help) usage ;; esac
[ $# -le 1 ] || usage
N="${1:-50000}"
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "error: N must be a positive integer, got '$N'" >&2; usage; }
RSS_N="${BENCH_RSS_N:-1000000}"
[[ "$RSS_N" =~ ^[0-9]+$ ]] || { echo "error: BENCH_RSS_N must be an integer" >&2; exit 2; }
read -r -a VALIDATE_ARGS <<<"${BENCH_VALIDATE_ARGS:-}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '== %s\n' "$*" >&2; }

# --------------------------------------------------------------- peers venv
log "python peers (scripts/python-peers.sh)"
VENV="$(scripts/python-peers.sh)"
PY="$VENV/bin/python"

# ------------------------------------------------------------------ our binary
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/resourcesync"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
OURS_WHY=""
if [ "${BENCH_SKIP_RUST:-0}" = 1 ]; then
    OURS_WHY="skipped (BENCH_SKIP_RUST=1)"
elif [ ! -f "$ROOT/Cargo.toml" ]; then
    OURS_WHY="no Cargo.toml at $ROOT (the Rust workspace is not there yet)"
elif ! command -v cargo >/dev/null 2>&1; then
    OURS_WHY="cargo not found on PATH"
else
    log "cargo build --release -p resourcesync-cli"
    if ! cargo build --release -p resourcesync-cli >&2; then
        OURS_WHY="'cargo build --release -p resourcesync-cli' failed (output above)"
    elif [ ! -x "$BIN" ]; then
        OURS_WHY="build succeeded but $BIN does not exist"
    fi
fi
if [ -n "$OURS_WHY" ]; then
    log "our half will not run: $OURS_WHY"
fi

# ------------------------------------------------------------------- workdir
WORK="$(mktemp -d "${TMPDIR:-/tmp}/resourcesync-bench.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# Timing / RSS harness: fork+exec, wall time around fork..wait4, child's own
# rusage from wait4. Kept tiny (python -I -S, builtin modules only) so the
# fork copy that ru_maxrss includes stays small.
# args: REPEAT POLL(0|1) OK_EXIT_CODES(e.g. 0 or 0,1) ERRFILE CMD...
#   -> one JSON line on stdout; exit 1 if the command exited otherwise
HARNESS='
import os, sys, time
repeat = int(sys.argv[1]); poll = sys.argv[2] == "1"
ok_codes = [int(c) for c in sys.argv[3].split(",")]; errfile = sys.argv[4]; cmd = sys.argv[5:]
times = []; maxrss = 0; hwm = 0; rc = 0
def vmhwm(pid):
    try:
        with open("/proc/%d/status" % pid, "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
for _ in range(repeat):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open("/dev/null", os.O_WRONLY); os.dup2(fd, 1)
            fd = os.open(errfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644); os.dup2(fd, 2)
            os.execvp(cmd[0], cmd)
        except BaseException as e:
            os.write(2, ("cannot run %s: %s\n" % (cmd[0], e)).encode())
        os._exit(127)
    if poll:
        while True:
            p, status, ru = os.wait4(pid, os.WNOHANG)
            if p:
                break
            h = vmhwm(pid)
            if h > hwm:
                hwm = h
            time.sleep(0.001)
    else:
        p, status, ru = os.wait4(pid, 0)
    t1 = time.perf_counter()
    rc = os.waitstatus_to_exitcode(status)  # negative: killed by a signal
    if rc not in ok_codes:
        sys.stderr.write("command failed with exit code %d: %s\n" % (rc, " ".join(cmd)))
        with open(errfile, "rb") as f:
            tail = f.read()[-4000:]
        sys.stderr.write(tail.decode("utf-8", "replace") + "\n")
        print("{\"rc\": %d}" % rc)
        sys.exit(1)
    times.append(t1 - t0)
    if ru.ru_maxrss > maxrss:
        maxrss = ru.ru_maxrss
times.sort()
m = len(times)
median = times[m // 2] if m % 2 else (times[m // 2 - 1] + times[m // 2]) / 2
import json  # only now: keeps the harness small while it forks
with open(errfile, "rb") as f:
    err_head = f.read(2000).decode("utf-8", "replace")
print(json.dumps({"rc": rc, "runs": m, "seconds_best": round(times[0], 6),
                  "seconds_median": round(median, 6), "maxrss_kib": maxrss,
                  "vmhwm_kib": hwm, "stderr_head": err_head}))
'
harness() { "$PY" -I -S -c "$HARNESS" "$@"; }

# ------------------------------------------------------------------ generate
FILE="$WORK/resourcelist-$N.xml"
log "generating $N entries -> $FILE"
"$PY" bench/gen_resourcelist.py "$N" "$FILE"
BYTES="$(stat -c %s "$FILE")"
cat "$FILE" >/dev/null  # warm the page cache for everyone

# -------------------------------------------------------------------- timing
log "resync 2.0.1: bench/resync_parse.py (best of 3)"
RESYNC_JSON="$("$PY" bench/resync_parse.py "$FILE" 3)"
log "$RESYNC_JSON"

OURS_JSON='null'
OURS_FAILED=""
OK_CODES=0
if [ "$N" -gt 50000 ]; then
    # over the sitemap limit of 50,000 entries: exit 1 (findings) is expected
    OK_CODES=0,1
    log "note: N > 50000 is over the sitemap limit; validate exiting 1 (findings) is accepted"
fi
if [ -z "$OURS_WHY" ]; then
    log "ours: $BIN validate ${VALIDATE_ARGS[*]:+${VALIDATE_ARGS[*]} }FILE (best of 5, then 1 polled run for RSS)"
    if OURS_JSON="$(harness 5 0 "$OK_CODES" "$WORK/validate.err" "$BIN" validate "${VALIDATE_ARGS[@]}" "$FILE")" &&
       OURS_RSS_JSON="$(harness 1 1 "$OK_CODES" "$WORK/validate.err" "$BIN" validate "${VALIDATE_ARGS[@]}" "$FILE")"; then
        log "$OURS_JSON"
        log "$OURS_RSS_JSON"
        # RSS column: the polled run's VmHWM (see header); its ru_maxrss if too short to sample
        OURS_JSON="$("$PY" -c 'import json,sys; t=json.loads(sys.argv[1]); r=json.loads(sys.argv[2]); t["rss_kib"]=r["vmhwm_kib"] or r["maxrss_kib"]; print(json.dumps(t))' "$OURS_JSON" "$OURS_RSS_JSON")"
    else
        OURS_FAILED="'resourcesync validate' did not exit 0 on the generated $N-entry list (see above)"
        OURS_JSON='null'
    fi
fi

log "floor: cat FILE > /dev/null (best of 5)"
CAT_JSON="$(harness 5 0 0 "$WORK/cat.err" cat "$FILE")"
log "$CAT_JSON"

# -------------------------------------------------------------------- table
"$PY" - "$N" "$BYTES" "$RESYNC_JSON" "$OURS_JSON" "$CAT_JSON" "${OURS_WHY:-$OURS_FAILED}" <<'EOF'
import json, sys
n, nbytes = int(sys.argv[1]), int(sys.argv[2])
resync, ours, cat = (json.loads(a) for a in sys.argv[3:6])
why = sys.argv[6]
if resync["entries"] != n:
    sys.exit("error: resync parsed %d entries, expected %d" % (resync["entries"], n))
print()
print("Resource List parse, N=%d entries, %.2f MB (%d bytes), warm page cache, wall time"
      % (n, nbytes / 1e6, nbytes))
rows = [("resync %s (%s, best of %d)" % (resync["impl"].split("-", 1)[1], resync["mode"], resync["runs"]),
         resync["seconds_best"], resync.get("maxrss_kib"))]
if ours:
    rows.append(("resourcesync validate (best of %d)" % ours["runs"], ours["seconds_best"],
                 ours["rss_kib"]))
else:
    rows.append(("resourcesync validate", None, None))
rows.append(("cat > /dev/null (floor, best of %d)" % cat["runs"], cat["seconds_best"], None))
print("%-40s %12s %12s %14s" % ("impl", "seconds", "MB/s", "peak RSS MiB"))
for name, s, rss in rows:
    if s is None:
        print("%-40s %12s %12s %14s   <- %s" % (name, "n/a", "n/a", "n/a", why))
        continue
    print("%-40s %12.4f %12.1f %14s" % (name, s, nbytes / 1e6 / s,
                                       "%.1f" % (rss / 1024) if rss else "-"))
if ours:
    print("%-40s %12.1fx" % ("ratio resync/ours (seconds)", resync["seconds_best"] / ours["seconds_best"]))
    print("%-40s %12.2fx" % ("ratio ours/cat (seconds)", ours["seconds_best"] / cat["seconds_best"]))
else:
    print("%-40s %12s" % ("ratio resync/ours (seconds)", "n/a"))
print("(peak RSS: resync = its Python process's ru_maxrss over all runs; ours = VmHWM polled every 1 ms in one extra run)")
EOF

if [ -n "$OURS_WHY" ]; then
    if [ "${BENCH_SKIP_RUST:-0}" = 1 ]; then
        exit 0
    fi
    echo >&2
    echo "error: our half did not run: $OURS_WHY" >&2
    exit 1
fi
if [ -n "$OURS_FAILED" ]; then
    echo "error: $OURS_FAILED" >&2
    exit 1
fi

# ---------------------------------------------------------------- peak RSS
if [ "$RSS_N" -gt 0 ]; then
    rm -f "$FILE"
    BIG="$WORK/resourcelist-$RSS_N.xml"
    log "generating $RSS_N entries -> $BIG"
    "$PY" bench/gen_resourcelist.py "$RSS_N" "$BIG"
    BIG_BYTES="$(stat -c %s "$BIG")"
    cat "$BIG" >/dev/null
    log "peak RSS: $BIN validate ${VALIDATE_ARGS[*]:+${VALIDATE_ARGS[*]} }BIG (1 run, polled)"
    FLOOR_JSON="$(harness 1 1 0 "$WORK/true.err" true)"
    # Exit 1 is accepted here: our CLI exits 1 when it finds rule violations,
    # and one 1,000,000-entry sitemap is over the 50,000-entry / 50 MB limits
    # (it is still read to the end). 2 (error) or a signal fails the bench.
    RSS_RC=0
    RSS_JSON="$(harness 1 1 0,1 "$WORK/validate-big.err" "$BIN" validate "${VALIDATE_ARGS[@]}" "$BIG")" || RSS_RC=$?
    "$PY" - "$RSS_N" "$BIG_BYTES" "$RSS_JSON" "$FLOOR_JSON" <<'EOF'
import json, sys
n, nbytes = int(sys.argv[1]), int(sys.argv[2])
r, floor = json.loads(sys.argv[3]), json.loads(sys.argv[4])
print()
print("Peak RSS of `resourcesync validate`, N=%d entries, %.1f MB (%d bytes)" % (n, nbytes / 1e6, nbytes))
if "runs" not in r:
    print("  validate failed (exit %d) on this file: no RSS reported" % r["rc"])
    sys.exit(0)
if r["rc"] != 0:
    head = [l for l in r["stderr_head"].splitlines() if l.strip()][:3]
    print("  validate exited %d (findings; accepted for this measurement):" % r["rc"])
    for l in head:
        print("    | " + l[:150])
print("  wall time                            %10.3f s   (%.1f MB/s)" % (r["seconds_best"], nbytes / 1e6 / r["seconds_best"]))
if r["vmhwm_kib"]:
    print("  peak RSS (VmHWM, polled every 1 ms)  %10.1f MiB" % (r["vmhwm_kib"] / 1024))
else:
    print("  peak RSS (VmHWM)                            n/a  (exited before the first 1 ms sample)")
print("  ru_maxrss (wait4, upper bound)       %10.1f MiB  (counts the harness's fork copy: `true` under it = %.1f MiB)"
      % (r["maxrss_kib"] / 1024, floor["maxrss_kib"] / 1024))
EOF
    if [ "$RSS_RC" -ne 0 ]; then
        echo "error: 'resourcesync validate' failed on the $RSS_N-entry list (see above)" >&2
        exit 1
    fi
fi
