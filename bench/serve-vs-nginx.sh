#!/usr/bin/env bash
# Static-file throughput: `resourcesync serve` against nginx, same files, same machine, same run.
#
# Usage: bench/serve-vs-nginx.sh
#
# 1. installs nginx (package nginx; on Debian 12 nginx-light is nginx plus an echo module) and
#    wrk when missing (apt-get update once, then apt-get install -y; policy-rc.d keeps the system nginx
#    service from starting)
# 2. cargo build --release -p resourcesync-cli  -> target/release/resourcesync
# 3. makes BENCH_FILES small files of BENCH_SIZE bytes (default 1,000 x 1 KiB, random bytes,
#    10 folders) in a temp dir (removed at exit)
# 4. starts, on loopback only:
#      ours   resourcesync serve WWW --listen 127.0.0.1:0 (state and documents outside WWW)
#      nginx  its own minimal config: daemon off, worker_processes 2, access_log off,
#             sendfile on, keepalive_requests 1000000 (nginx's default of 1,000 would make wrk
#             reconnect, ours has no such limit), root WWW, listen 127.0.0.1:PORT
#    and checks that both serve the same bytes for a sample of files
# 5. for each server, wrk -tT -cC -dD (default -t2 -c64 -d30s) after a 3 s warm-up, twice:
#      one    every request for the same file
#      many   the files round-robin (a wrk Lua script written to the temp dir; each thread
#             starts at another place in the list)
# 6. prints requests/s, MB/s, latency (mean, p50, p99), socket errors, error responses (wrk
#    counts status >= 400), and the ratio ours/nginx per scenario (goal: >= 50%)
# 7. with BENCH_PERF=1, or when a ratio is under 50% (BENCH_PERF=auto, the default), profiles
#    ours during one more "many" run (perf record -g -p PID) and prints the top symbols
#
# Environment (all optional):
#   BENCH_FILES=1000 BENCH_SIZE=1024           the files
#   BENCH_DURATION=30 BENCH_THREADS=2 BENCH_CONNS=64   wrk (seconds, threads, connections)
#   BENCH_PERF=auto|1|0                         profile ours (needs perf; 0 never)
#   BENCH_NO_INSTALL=1                          never run apt-get (fail if a tool is missing)
#   CARGO_TARGET_DIR                            honoured when locating the binary
#   TMPDIR                                      where the temp dir goes
#
# Bounded: every wait has a deadline; the whole run takes about 4 x (BENCH_DURATION + 3) s plus
# the build (and about 20 s more when profiling). Every process started here is stopped at exit (trap), whatever happens.
# Exit: 0 ok (whatever the ratio: this measures, it does not judge), 1 failure (a tool could
# not be installed, a server did not start or served other bytes, wrk failed), 2 usage.
set -euo pipefail

case "${1:-}" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "usage: bench/serve-vs-nginx.sh (settings in the environment: see --help)" >&2; exit 2 ;;
esac

NFILES="${BENCH_FILES:-1000}"
SIZE="${BENCH_SIZE:-1024}"
DURATION="${BENCH_DURATION:-30}"
THREADS="${BENCH_THREADS:-2}"
CONNS="${BENCH_CONNS:-64}"
PERF_MODE="${BENCH_PERF:-auto}"
for v in NFILES SIZE DURATION THREADS CONNS; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "error: $v must be a positive integer, got '${!v}'" >&2; exit 2; }
done
case "$PERF_MODE" in auto|0|1) ;; *) echo "error: BENCH_PERF must be auto, 0 or 1" >&2; exit 2 ;; esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------------ cleanup
WORK=""
OURS_PID=""
NGINX_PID=""
PERF_PID=""
POLICY_RC_CREATED=""
stop() {  # $1: pid; TERM, then KILL after 5 s
    local pid="$1" i
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    stop "$PERF_PID"
    stop "$OURS_PID"
    stop "$NGINX_PID"
    [ -n "$POLICY_RC_CREATED" ] && rm -f /usr/sbin/policy-rc.d
    [ -n "$WORK" ] && rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ tools
NGINX="$(command -v nginx || true)"
[ -n "$NGINX" ] || { [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx; } || true
if [ -z "$NGINX" ] || ! command -v wrk >/dev/null 2>&1; then
    [ "${BENCH_NO_INSTALL:-0}" = 1 ] && die "nginx or wrk missing and BENCH_NO_INSTALL=1"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "nginx or wrk missing, and not root (no sudo) to install them"
        SUDO="sudo"
    fi
    # Installing nginx must not start a system nginx on port 80.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod 755 /usr/sbin/policy-rc.d
        POLICY_RC_CREATED=1
    fi
    # Package nginx: on Debian 12, nginx-light is only nginx plus an echo module.
    pkgs=(nginx wrk)
    log "apt-get update; apt-get install -y ${pkgs[*]}"
    $SUDO apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2 \
        || die "apt-get install ${pkgs[*]} failed"
    if [ -n "$POLICY_RC_CREATED" ]; then $SUDO rm -f /usr/sbin/policy-rc.d; POLICY_RC_CREATED=""; fi
    NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
fi
[ -x "$NGINX" ] || die "nginx not found after install"
command -v wrk >/dev/null 2>&1 || die "wrk not found after install"
command -v curl >/dev/null 2>&1 || die "curl is needed to check the servers"
PY="$(command -v python3 || true)"
[ -n "$PY" ] || die "python3 is needed to pick a free port"

# ------------------------------------------------------------------ build
log "cargo build --release -p resourcesync-cli"
cargo build --release -p resourcesync-cli >&2 || die "cargo build failed"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/resourcesync"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
[ -x "$BIN" ] || die "$BIN not built"

# ------------------------------------------------------------------ files
WORK="$(mktemp -d "${TMPDIR:-/tmp}/serve-vs-nginx.XXXXXX")"
chmod 755 "$WORK"  # nginx's workers may run as another user
WWW="$WORK/www"
DIRS=10
PER_DIR=$(( (NFILES + DIRS - 1) / DIRS ))
log "making $NFILES files of $SIZE bytes in $WWW"
made=0
for d in $(seq 0 $((DIRS - 1))); do
    n=$(( NFILES - made < PER_DIR ? NFILES - made : PER_DIR ))
    [ "$n" -gt 0 ] || break
    mkdir -p "$WWW/d$d"
    head -c $(( n * SIZE )) /dev/urandom | (cd "$WWW/d$d" && split -b "$SIZE" -d -a 4 --additional-suffix=.bin - f)
    made=$(( made + n ))
done
chmod -R a+rX "$WWW"
(cd "$WWW" && find . -type f | sed 's|^\.||' | sort) >"$WORK/paths.txt"
[ "$(wc -l <"$WORK/paths.txt")" -eq "$NFILES" ] || die "made $(wc -l <"$WORK/paths.txt") files, wanted $NFILES"
ONE="$(head -n 1 "$WORK/paths.txt")"

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() {  # $1 url, $2 what, $3 its log: until 200, 30 s at most
    local i code=""
    for i in $(seq 300); do
        code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" || true)"
        [ "$code" = 200 ] && return 0
        sleep 0.1
    done
    [ -f "${3:-}" ] && tail -n 20 "$3" >&2
    die "$2 did not answer 200 at $1 within 30 s (last status: ${code:-none})"
}

# ------------------------------------------------------------------ ours
log "starting ours: $BIN serve"
# State and documents in a folder beside WWW: not inside it (nginx would serve them too), and
# not in an ancestor of it (a state database in WWW or above it makes every resource 404).
mkdir -p "$WORK/ours"
RUST_LOG=warn "$BIN" serve "$WWW" --listen 127.0.0.1:0 \
    --state "$WORK/ours/state.sqlite" --out "$WORK/ours/out" \
    >"$WORK/ours.out" 2>"$WORK/ours.err" &
OURS_PID=$!
OURS_URL=""
for i in $(seq 600); do
    OURS_URL="$(sed -n 's|^serving .* at \(http://[^/]*\)/.well-known/resourcesync$|\1|p' "$WORK/ours.out")"
    [ -n "$OURS_URL" ] && break
    kill -0 "$OURS_PID" 2>/dev/null || { cat "$WORK/ours.err" >&2; die "resourcesync serve exited"; }
    sleep 0.1
done
[ -n "$OURS_URL" ] || { cat "$WORK/ours.err" >&2; die "no 'serving' line from resourcesync serve within 60 s"; }
wait_http "$OURS_URL$ONE" "resourcesync serve" "$WORK/ours.err"

# ------------------------------------------------------------------ nginx
NGINX_PORT="$(free_port)"
mkdir -p "$WORK/nginx/tmp"
NGINX_USER=""
[ "$(id -u)" = 0 ] && NGINX_USER="user root root;"
cat >"$WORK/nginx/nginx.conf" <<EOF
$NGINX_USER
worker_processes 2;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 65;
    types { application/octet-stream bin; text/plain txt; }
    default_type application/octet-stream;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $WWW;
    }
}
EOF
log "starting nginx on 127.0.0.1:$NGINX_PORT ($("$NGINX" -v 2>&1))"
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" \
    >"$WORK/nginx/stdout" 2>&1 &
NGINX_PID=$!
NGINX_URL="http://127.0.0.1:$NGINX_PORT"
wait_http "$NGINX_URL$ONE" "nginx" "$WORK/nginx/error.log"

# Same bytes from both, for a sample of the files.
for p in $(awk 'NR % 97 == 1' "$WORK/paths.txt"); do
    for u in "$OURS_URL" "$NGINX_URL"; do
        curl -sf --max-time 5 -o "$WORK/got" "$u$p" || die "GET $u$p failed"
        cmp -s "$WORK/got" "$WWW$p" || die "$u$p: not the file's bytes"
    done
done

# ------------------------------------------------------------------ wrk
# Lua. done.lua: only the summary, as one line (wrk keeps its fast path: one prepared request).
# rotate.lua: the same, plus a round-robin over the paths listed in $BENCH_PATHS.
cat >"$WORK/done.lua" <<'EOF'
function done(s, lat, req)
    io.write(string.format(
        "RESULT requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d status=%d timeout=%d lat_mean_us=%.1f lat_p50_us=%d lat_p99_us=%d lat_max_us=%d\n",
        s.requests, s.duration, s.bytes, s.errors.connect, s.errors.read, s.errors.write,
        s.errors.status, s.errors.timeout, lat.mean, lat:percentile(50), lat:percentile(99), lat.max))
end
EOF
cat - "$WORK/done.lua" >"$WORK/rotate.lua" <<'EOF'
local paths = {}
local n, i = 0, 0
local counter = 0
function setup(thread)
    counter = counter + 1
    thread:set("offset", counter)
end
function init(args)
    for line in io.lines(os.getenv("BENCH_PATHS")) do
        n = n + 1
        paths[n] = line
    end
    -- threads start at different places in the list
    i = ((offset or 1) - 1) * math.floor(n / 2 + 0.5) % n
end
function request()
    i = i % n + 1
    return wrk.format("GET", paths[i])
end
EOF

declare -A RESULT
run_wrk() {  # $1 name, $2 base URL, $3 scenario (one|many), $4 seconds
    local name="$1" url="$2" scen="$3" secs="$4" script="$WORK/done.lua" target="$2$ONE" out
    [ "$scen" = many ] && { script="$WORK/rotate.lua"; target="$2/"; }
    out="$(BENCH_PATHS="$WORK/paths.txt" timeout $(( secs + 30 )) \
        wrk -t"$THREADS" -c"$CONNS" -d"${secs}s" --timeout 5s -s "$script" "$target" 2>&1)" \
        || { printf '%s\n' "$out" >&2; die "wrk failed against $name ($scen)"; }
    printf '%s\n' "$out" | grep '^RESULT ' | sed 's/^RESULT //' || die "no RESULT line from wrk: $out"
}

log "wrk -t$THREADS -c$CONNS -d${DURATION}s per run (3 s warm-up each); $NFILES files of $SIZE bytes"
for scen in one many; do
    for name in ours nginx; do
        url="$OURS_URL"; [ "$name" = nginx ] && url="$NGINX_URL"
        run_wrk "$name" "$url" "$scen" 3 >/dev/null
        log "$name / $scen: ${DURATION}s"
        RESULT["$name/$scen"]="$(run_wrk "$name" "$url" "$scen" "$DURATION")"
        log "  ${RESULT["$name/$scen"]}"
    done
done
kill -0 "$OURS_PID" 2>/dev/null || die "resourcesync serve died during the run"
kill -0 "$NGINX_PID" 2>/dev/null || die "nginx died during the run"

# ------------------------------------------------------------------ table
TABLE_RC=0
"$PY" - "$NFILES" "$SIZE" "$THREADS" "$CONNS" "$DURATION" "$(nproc)" \
    "${RESULT[ours/one]}" "${RESULT[nginx/one]}" "${RESULT[ours/many]}" "${RESULT[nginx/many]}" \
    >"$WORK/table.txt" <<'EOF' || TABLE_RC=$?
import sys
nfiles, size, threads, conns, duration, cpus = sys.argv[1:7]
def parse(s):
    return {k: float(v) for k, v in (kv.split("=") for kv in s.split())}
r = dict(zip(["ours/one", "nginx/one", "ours/many", "nginx/many"], map(parse, sys.argv[7:11])))
print()
print("Static files over loopback: %s files of %s bytes; wrk -t%s -c%s -d%ss; %s CPUs shared by wrk and the server"
      % (nfiles, size, threads, conns, duration, cpus))
hdr = "%-7s %-6s %12s %10s %10s %10s %10s %12s %10s" % (
    "server", "files", "requests/s", "MB/s", "lat mean", "lat p50", "lat p99", "sock errors", "non-2xx")
print(hdr)
print("-" * len(hdr))
ms = lambda us: "%.2f ms" % (us / 1000)
for key in ["ours/one", "nginx/one", "ours/many", "nginx/many"]:
    x = r[key]
    secs = x["duration_us"] / 1e6
    name, scen = key.split("/")
    print("%-7s %-6s %12.0f %10.1f %10s %10s %10s %12d %10d" % (
        name, scen, x["requests"] / secs, x["bytes"] / secs / 1e6, ms(x["lat_mean_us"]),
        ms(x["lat_p50_us"]), ms(x["lat_p99_us"]),
        x["connect"] + x["read"] + x["write"] + x["timeout"], x["status"]))
low = 0
for scen in ["one", "many"]:
    o, n = r["ours/" + scen], r["nginx/" + scen]
    ratio = (o["requests"] / o["duration_us"]) / (n["requests"] / n["duration_us"])
    low |= ratio < 0.5
    print("ratio ours/nginx (requests/s), %-4s %6.0f%%   %s" % (
        scen, 100 * ratio, "ok (goal >= 50%)" if ratio >= 0.5 else "BELOW the goal of 50%"))
print("(non-2xx: wrk counts responses with status >= 400; socket errors: connect+read+write+timeout)")
sys.exit(3 if low else 0)
EOF
[ "$TABLE_RC" = 0 ] || [ "$TABLE_RC" = 3 ] || die "could not make the table"
cat "$WORK/table.txt"

# ------------------------------------------------------------------ profile
if [ "$PERF_MODE" = 1 ] || { [ "$PERF_MODE" = auto ] && [ "$TABLE_RC" = 3 ]; }; then
    if ! command -v perf >/dev/null 2>&1; then
        log "perf not found: no profile (apt-get install linux-perf)"
    else
        secs=$(( DURATION < 15 ? DURATION : 15 ))
        log "profiling ours: perf record -g -p $OURS_PID for ${secs}s during a 'many' run"
        perf_top() {  # perf report options... N: the first N lines of the table, trimmed
            local n="${*: -1}"
            perf report -i "$WORK/perf.data" --stdio "${@:1:$#-1}" -g none 2>/dev/null \
                | grep -E '^ +[0-9.]+%' | sed -E 's/[[:space:]-]+$//' | head -n "$n" || true
        }
        perf record -q -g -p "$OURS_PID" -o "$WORK/perf.data" -- sleep "$secs" >/dev/null 2>"$WORK/perf.err" &
        PERF_PID=$!
        run_wrk ours "$OURS_URL" many "$secs" >/dev/null
        wait "$PERF_PID" || { cat "$WORK/perf.err" >&2; log "perf record failed"; }
        if [ -s "$WORK/perf.data" ]; then
            echo
            echo "Top symbols of resourcesync serve (perf report --no-children, self time):"
            perf_top --no-children --sort symbol 25
            echo
            echo "Top of ours and of the crates it uses, time including callees (--children):"
            perf_top --children --sort symbol 200 \
                | grep -E 'resourcesync|tokio|hyper|axum|tower|rusqlite|sqlite3' | head -n 25 || true
            echo
            echo "By DSO (self time):"
            perf_top --no-children --sort dso 8
        fi
    fi
fi
