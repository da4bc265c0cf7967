#!/usr/bin/env bash
# The aggregator at scale (issue 16): SOURCES Sources of EACH files (512 B) against one Source
# of SOURCES×EACH files, the same total work, through `resourcesync aggregate` over one nginx on
# loopback: the baseline, then 10% of the files changed and the aggregator started again (each
# Source is synced when its follower starts; the schedule, 1h, keeps Sources that are done from
# polling while others work); wall time and the aggregator's peak RSS. Goal: many/one within
# 1.5×, peak RSS ≤ 200 MB.
#
# Usage: bench/aggregate.sh [SOURCES=50] [EACH=2000]
#   BENCH_BIN: our binary (default: built in release)
#   BENCH_POSTGRES: a PostgreSQL URL (scripts/postgres.sh): also the baseline of the SOURCES
#     Sources by one aggregate process and by two sharing that state (goal: two in <= 0.65x,
#     beside the CPU-bound ceiling of the one-process run, computed as below),
#     and of ONE Source of BENCH_SHARE_ONE files (default 100000; 0: not run) by one process
#     and by two sharing its fetches (issue 16), with the CPU-bound ceiling of this machine:
#     the CPU seconds (user + system) of every process of the one-worker run (the worker,
#     nginx, PostgreSQL) over the cores, divided by its wall time: the best ratio two workers
#     can reach here
#   BENCH_ONLY=share: only that last case (with BENCH_POSTGRES)
# Prints a table and the ratios measured in this run, with the aggregator's CPU seconds (user +
# system, from /proc) per phase: on a shared machine they vary far less than wall time.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
SOURCES="${1:-50}"
EACH="${2:-2000}"
TOTAL=$((SOURCES * EACH))
die() { echo "error: $*" >&2; exit 1; }
NGINX="$(command -v nginx || true)"
[ -n "$NGINX" ] || { [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx; } || true
if [ -z "$NGINX" ]; then
    [ "$(id -u)" = 0 ] || die "nginx missing: apt-get install nginx"
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx >&2
    NGINX=/usr/sbin/nginx
fi
our_binary
W="$(mktemp -d "${TMPDIR:-/tmp}/rs-aggregate.XXXXXX")"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

PG="${BENCH_POSTGRES:-}"
SHARE_ONE="${BENCH_SHARE_ONE:-100000}"
ONLY="${BENCH_ONLY:-}"
[ "$ONLY" != share ] || [ -n "$PG" ] || die "BENCH_ONLY=share needs BENCH_POSTGRES"
[ "$ONLY" != share ] || { SOURCES=0; TOTAL=0; }
[ -n "$PG" ] || SHARE_ONE=0
log "generating $SOURCES × $EACH, 1 × $TOTAL and 1 × $SHARE_ONE files of 512 B"
python3 - "$W" "$SOURCES" "$EACH" "$SHARE_ONE" <<'PY'
import os, sys
w, n, each, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def fill(d, count, tag):
    os.makedirs(d, exist_ok=True)
    for i in range(count):
        sub = os.path.join(d, "d%03d" % (i // 1000))
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, "f%06d.txt" % i), "wb") as f:
            f.write((("%s %d " % (tag, i)) * 64).encode()[:512])
for s in range(n):
    fill(os.path.join(w, "www", "many", "s%03d" % s), each, "s%d" % s)
fill(os.path.join(w, "www", "one"), n * each, "one")
if big:
    fill(os.path.join(w, "www", "big"), big, "big")
PY

PORT="$(free_port)"
mkdir -p "$W/nginx/tmp"
user=""; [ "$(id -u)" = 0 ] && user="user root root;"
cat >"$W/nginx/nginx.conf" <<NG
$user
worker_processes 2;
daemon off;
pid $W/nginx/nginx.pid;
error_log $W/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off; sendfile on; tcp_nodelay on; keepalive_requests 1000000;
    default_type application/octet-stream; types { application/xml xml; }
    client_body_temp_path $W/nginx/tmp/body; proxy_temp_path $W/nginx/tmp/proxy;
    fastcgi_temp_path $W/nginx/tmp/fastcgi; uwsgi_temp_path $W/nginx/tmp/uwsgi; scgi_temp_path $W/nginx/tmp/scgi;
    server { listen 127.0.0.1:$PORT; root $W/www; }
}
NG
"$NGINX" -p "$W/nginx" -c "$W/nginx/nginx.conf" -e "$W/nginx/error.log" >/dev/null 2>&1 &
PIDS+=($!)
BASE="http://127.0.0.1:$PORT"

publish_all() {
    for s in $(seq 0 $((SOURCES - 1))); do
        d="$(printf 's%03d' "$s")"
        "$BIN" publish "$W/www/many/$d" --base-url "$BASE/many/$d/" -q >/dev/null
    done
    "$BIN" publish "$W/www/one" --base-url "$BASE/one/" -q >/dev/null
}
[ "$ONLY" = share ] || {
log "publishing (load $(load))"
publish_all
}
[ "$SHARE_ONE" = 0 ] || "$BIN" publish "$W/www/big" --base-url "$BASE/big/" -q >/dev/null
{
    echo '[limits]'; echo 'concurrency = 8'; echo 'per_host = 8'; echo
    for s in $(seq 0 $((SOURCES - 1))); do
        d="$(printf 's%03d' "$s")"
        printf '[[source]]\nname = "%s"\nurl = "%s/many/%s/.well-known/resourcesync"\nschedule = "1h"\ndelete = true\n\n' "$d" "$BASE" "$d"
    done
} >"$W/many.toml"
printf '[[source]]\nname = "one"\nurl = "%s/one/.well-known/resourcesync"\nschedule = "1h"\ndelete = true\n' "$BASE" >"$W/one.toml"

change_all() {  # 10% of every Source's files, then published again
    python3 - "$W/www" "$SOURCES" "$EACH" "$1" <<'PY'
import os, sys
w, n, each, round_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def change(d, count):
    for i in range(0, count, 10):
        p = os.path.join(d, "d%03d" % (i // 1000), "f%06d.txt" % i)
        with open(p, "wb") as f:
            f.write(("changed %s %d " % (round_, i) * 64).encode()[:512])
for s in range(n):
    change(os.path.join(w, "many", "s%03d" % s), each)
change(os.path.join(w, "one"), n * each)
PY
    publish_all
}

declare -A T RSS ACPU
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }  # user + system s
measure() {  # $1 case, $2 sources, $3 each: baseline, change, incremental; peak RSS
    local c="$1" n="$2" each="$3" port pid api s e
    port="$(free_port)"
    s=$(date +%s%N)
    "$BIN" aggregate --config "$W/$c.toml" --store "$W/copies-$c" --serve "127.0.0.1:$port" -q >/dev/null 2>"$W/$c.err" &
    pid=$!
    PIDS+=("$pid")
    api="http://127.0.0.1:$port/api/sources"
    python3 "$ROOT/bench/aggregate_wait.py" "$api" "$n" "$each" 1 >/dev/null
    e=$(date +%s%N)
    T[$c/baseline]="$(python3 -c "print('%.2f' % (($e - $s) / 1e9))")"
    ACPU[$c/baseline]="$(cpu_of "$pid")"
    log "$c: baseline ${T[$c/baseline]} s, ${ACPU[$c/baseline]} CPU s (load $(load))"
    local rss1
    rss1="$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    change_all "$c"
    # Started again (a Source is synced at once when its follower starts; the schedule, 1h,
    # keeps Sources that are done from polling while others still work): the clock runs
    # until every changed file is in the copies.
    s=$(date +%s%N)
    "$BIN" aggregate --config "$W/$c.toml" --store "$W/copies-$c" --serve "127.0.0.1:$port" -q >/dev/null 2>>"$W/$c.err" &
    pid=$!
    PIDS+=("$pid")
    python3 - "$api" "$W/www/$([ "$c" = many ] && echo many || echo one)" "$W/copies-$c" "$c" "$SOURCES" "$EACH" <<'PY'
import os, sys, time
api, src, copies, case, n, each = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
# Every changed file (every 10th) has its new bytes in the copy.
def pairs():
    if case == "many":
        for s in range(n):
            for i in range(0, each, 10):
                rel = os.path.join("d%03d" % (i // 1000), "f%06d.txt" % i)
                yield os.path.join(src, "s%03d" % s, rel), os.path.join(copies, "s%03d" % s, rel)
    else:
        for i in range(0, n * each, 10):
            rel = os.path.join("d%03d" % (i // 1000), "f%06d.txt" % i)
            yield os.path.join(src, rel), os.path.join(copies, "one", rel)
todo = list(pairs())
start = time.time()
while todo and time.time() - start < 3600:
    rest = []
    for a, b in todo:
        try:
            same = open(a, "rb").read() == open(b, "rb").read()
        except OSError:
            same = False
        if not same:
            rest.append((a, b))
            if len(rest) > 50:
                rest.extend(todo[len(rest):])
                break
    todo = rest
    if todo:
        time.sleep(0.2)
sys.exit(1 if todo else 0)
PY
    # And their republish (what a downstream Destination sees), as for the baseline.
    python3 "$ROOT/bench/aggregate_wait.py" "$api" "$n" "$each" 1 >/dev/null
    e=$(date +%s%N)
    T[$c/incremental]="$(python3 -c "print('%.2f' % (($e - $s) / 1e9))")"
    ACPU[$c/incremental]="$(cpu_of "$pid")"
    RSS[$c]="$(awk -v a="$rss1" '/VmHWM/ {b=$2; printf "%.1f", (a > b ? a : b)/1024}' "/proc/$pid/status")"
    log "$c: incremental ${T[$c/incremental]} s, ${ACPU[$c/incremental]} CPU s, peak RSS ${RSS[$c]} MB"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
# PostgreSQL's server: the process listening on its port (its backends are its children).
pg_pid() {
    ss -Hltnp "sport = :$(python3 -c 'import sys,urllib.parse as u; print(u.urlparse(sys.argv[1]).port or 5432)' "$PG")" \
        | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2
}
workers() {  # $1 how many aggregate processes share a PostgreSQL state: baseline of many
    # (with one, also the CPU seconds of every process of the run, as for share_one)
    local k="$1" i port apis="" s e c0 c1 pgpid pids=()
    pgpid="$(pg_pid)"
    c0="$(python3 "$ROOT/bench/cpu_tree.py" "${PIDS[0]}" ${pgpid:+"$pgpid"})"
    s=$(date +%s%N)
    for i in $(seq 1 "$k"); do
        port="$(free_port)"
        "$BIN" aggregate --config "$W/many.toml" --store "$W/copies-pg$k" --state "$PG" \
            --worker "w$i" --serve "127.0.0.1:$port" -q >/dev/null 2>"$W/pg$k-$i.err" &
        PIDS+=($!)
        pids+=($!)
        apis="${apis:+$apis,}http://127.0.0.1:$port/api/sources"
    done
    python3 "$ROOT/bench/aggregate_wait.py" "$apis" "$SOURCES" "$EACH" 1 >/dev/null
    e=$(date +%s%N)
    c1="$(python3 "$ROOT/bench/cpu_tree.py" "${PIDS[0]}" ${pgpid:+"$pgpid"} "${pids[@]}")"
    T[pg/$k]="$(python3 -c "print('%.2f' % (($e - $s) / 1e9))")"
    CPU[pg/$k]="$(python3 -c "print('%.2f' % ($c1 - $c0))")"
    log "$k worker(s) sharing PostgreSQL: baseline ${T[pg/$k]} s, ${CPU[pg/$k]} CPU s (load $(load))"
    for i in $(seq 1 "$k"); do kill "${PIDS[-$i]}" 2>/dev/null || true; done
}

# ONE Source of SHARE_ONE files synced by $1 workers sharing its fetches (issue 16); with one
# worker, also the CPU seconds of every process of the run (CPU[1]).
declare -A CPU
share_one() {  # $1 workers; $2 `alone`: the one worker fetching everything itself, as before
    local k="$1" i port apis="" s e c0 c1 name pids=() pgpid above=500
    name="big$(date +%s%N)"
    [ "${2:-}" != alone ] || above=$((SHARE_ONE + 1))
    printf '[limits]\nconcurrency = 8\nper_host = 8\nshare_above = %s\n\n[[source]]\nname = "%s"\nurl = "%s/big/.well-known/resourcesync"\nschedule = "1h"\ndelete = true\n' \
        "$above" "$name" "$BASE" >"$W/big$k.toml"
    pgpid="$(pg_pid)"
    c0="$(python3 "$ROOT/bench/cpu_tree.py" "${PIDS[0]}" ${pgpid:+"$pgpid"})"
    s=$(date +%s%N)
    for i in $(seq 1 "$k"); do
        port="$(free_port)"
        "$BIN" aggregate --config "$W/big$k.toml" --store "$W/copies-big$k" --state "$PG" \
            --worker "w$i" --serve "127.0.0.1:$port" -q >/dev/null 2>"$W/big$k-$i.err" &
        pids+=($!)
        PIDS+=($!)
        apis="${apis:+$apis,}http://127.0.0.1:$port/api/sources"
    done
    python3 "$ROOT/bench/aggregate_wait.py" "$apis" 1 "$SHARE_ONE" 1 >/dev/null
    e=$(date +%s%N)
    c1="$(python3 "$ROOT/bench/cpu_tree.py" "${PIDS[0]}" ${pgpid:+"$pgpid"} "${pids[@]}")"
    k="$k${2:-}"
    T[big/$k]="$(python3 -c "print('%.2f' % (($e - $s) / 1e9))")"
    CPU[$k]="$(python3 -c "print('%.2f' % ($c1 - $c0))")"
    log "1 Source × $SHARE_ONE, $k worker(s): ${T[big/$k]} s, ${CPU[$k]} CPU s (load $(load))"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}

if [ "$ONLY" != share ]; then
measure many "$SOURCES" "$EACH"
measure one 1 "$TOTAL"
fi
if [ "$SHARE_ONE" != 0 ]; then
    share_one 1 alone
    share_one 1
    share_one 2
fi
if [ -n "$PG" ] && [ "$ONLY" != share ]; then
    # Fresh Source names (and so schemas) for these runs: the same Sources, renamed.
    sed -i "s/name = \"s\([0-9]*\)\"/name = \"b$(date +%s)s\\1\"/" "$W/many.toml"
    workers 1
    sed -i "s/name = \"b[0-9]*s/name = \"c$(date +%s)s/" "$W/many.toml"
    workers 2
fi
if [ "$ONLY" != share ]; then
printf '\n%-34s %12s %12s %10s\n' "case" "baseline s" "10% changed s" "peak MB"
printf '%-34s %12s %12s %10s\n' "$SOURCES Sources × $EACH" "${T[many/baseline]}" "${T[many/incremental]}" "${RSS[many]}"
printf '%-34s %12s %12s %10s\n' "1 Source × $TOTAL" "${T[one/baseline]}" "${T[one/incremental]}" "${RSS[one]}"
python3 - "${T[many/baseline]}" "${T[one/baseline]}" "${T[many/incremental]}" "${T[one/incremental]}" <<'PY'
import sys
mb, ob, mi, oi = map(float, sys.argv[1:])
print("ratio many/one: baseline %.2f, incremental %.2f (goal <= 1.5)" % (mb / ob, mi / oi))
PY
printf '%-34s %12s %12s\n' "aggregator CPU s" "baseline" "10% changed"
printf '%-34s %12s %12s\n' "$SOURCES Sources × $EACH" "${ACPU[many/baseline]}" "${ACPU[many/incremental]}"
printf '%-34s %12s %12s\n' "1 Source × $TOTAL" "${ACPU[one/baseline]}" "${ACPU[one/incremental]}"
fi
if [ -n "$PG" ] && [ "$ONLY" != share ]; then
    printf '%-34s %12s\n' "1 worker, PostgreSQL state" "${T[pg/1]}"
    printf '%-34s %12s\n' "2 workers, PostgreSQL state" "${T[pg/2]}"
    # The best two workers can do here: the one-worker run's CPU (worker, nginx, PostgreSQL)
    # spread over every core.
    python3 -c "import sys; w2, w1, cpu1, cores = map(float, sys.argv[1:]); print('ratio 2 workers / 1: %.2f (goal <= 0.65); CPU-bound ceiling of this machine (%d cores): %.2f' % (w2 / w1, cores, max(cpu1 / cores / w1, 0.5)))" "${T[pg/2]}" "${T[pg/1]}" "${CPU[pg/1]}" "$(nproc)"
fi
if [ "$SHARE_ONE" != 0 ]; then
    printf '\n%-34s %12s %12s\n' "1 Source × $SHARE_ONE, PostgreSQL" "baseline s" "CPU s"
    printf '%-34s %12s %12s\n' "1 worker, fetching alone" "${T[big/1alone]}" "${CPU[1alone]}"
    printf '%-34s %12s %12s\n' "1 worker, through the queue" "${T[big/1]}" "${CPU[1]}"
    printf '%-34s %12s %12s\n' "2 workers sharing its fetches" "${T[big/2]}" "${CPU[2]}"
    python3 - "${T[big/1]}" "${T[big/2]}" "${CPU[1]}" "$(nproc)" "${T[big/1alone]}" <<'PY'
import sys
w1, w2, cpu1, cores, alone = map(float, sys.argv[1:])
# The best two workers can do here: the one-worker run's CPU spread over every core.
ceiling = max(cpu1 / cores / w1, 0.5)
print("ratio 2 workers / 1: %.2f (/ 1 fetching alone: %.2f); CPU-bound ceiling of this "
      "machine (%d cores): %.2f" % (w2 / w1, w2 / alone, cores, ceiling))
print("ratio 1 worker through the queue / fetching alone: %.2f (goal <= 1.0)" % (w1 / alone))
PY
fi
