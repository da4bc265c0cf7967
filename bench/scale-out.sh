#!/usr/bin/env bash
# Scale-out of the aggregator the way it would happen across machines (issue 36, item 6): each
# worker (`resourcesync aggregate`) in a network namespace of its own, behind a link of its own
# (a veth pair, delay and bandwidth cap), one PostgreSQL and one nginx serving every Source in
# the root namespace. SOURCES small Sources of EACH files (spread over the workers by leases)
# and one large Source of BIG files (its fetches shared per resource through the work queue,
# `limits.share_above`), all 512 B files; the baseline of everything, until every Source is
# synced and republished.
#
# Usage: bench/scale-out.sh [SOURCES=50] [EACH=400] [BIG=20000]    (as root)
#
# Runs, each on fresh Sources (new names, so new PostgreSQL schemas) into a new store:
#   alone  one worker, sharing off (the large Source fetched by its coordinator alone)
#   1      one worker, sharing on (the large Source through the work queue)
#   2      two workers, each in its namespace, sharing the state and the queue
# Prints wall seconds, CPU seconds (workers, nginx, PostgreSQL, emulators), the ratio two
# workers / one (the faster of the two one-worker runs; goal <= 0.6), one worker through the
# queue / alone (goal <= 1.0), the floor the links allow (the bytes over one link, over two),
# this machine's CPU-bound ceiling for two workers (the one-worker run's CPU spread over the
# cores / its wall time: on one machine the two "machines" share its cores, which real machines
# would not), and the floor of the large Source's sync for two workers (half one worker's: each
# fetches at most `concurrency` at a time) with the ratio the run would have at it.
#
# The link: `tc qdisc … netem delay RTT/2 rate MBIT` on both ends of each veth (the default,
# BENCH_LINK=netem). Without the kernel's netem the bench stops, saying so, unless
# BENCH_LINK=proxy: then the bandwidth is capped by `tbf` on both ends of each veth and the
# delay added by the kit's wan_proxy (crates/testkit/examples/wan_proxy.rs, self-checked first)
# inside each namespace, in front of nginx and of PostgreSQL (each worker's own pair of
# emulators: no two workers share a link).
#
# Environment: BENCH_RTT_MS=50 BENCH_MBIT=100 BENCH_LINK=netem|proxy BENCH_BIN=PATH
#   BENCH_PROXY=PATH (the wan_proxy program; default: built in release)
#   BENCH_CONCURRENCY=32 (each Source's downloads in flight) TMPDIR
#   BENCH_CASES="alone one two" (a subset prints only each run's line)
#   BENCH_LOGS=DIR: each worker's log kept there (CASE-I.log), with -v (its debug lines)
#   instead of -q
# Exit: 0 measured (goals met or not); 1 setup failed (no root, no namespaces, no netem, …) or
# a run did not finish.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
die() { echo "error: $*" >&2; exit 1; }
SOURCES="${1:-50}"
EACH="${2:-400}"
BIG="${3:-20000}"
RTT="${BENCH_RTT_MS:-50}"
MBIT="${BENCH_MBIT:-100}"
LINK="${BENCH_LINK:-netem}"
CONC="${BENCH_CONCURRENCY:-32}"
VERBOSITY="$([ -n "${BENCH_LOGS:-}" ] && echo -v || echo -q)"
SRV=10.77.255.1   # the root namespace's address for nginx and PostgreSQL (on lo)
TAG="rsq$$"
[ "$(id -u)" = 0 ] || die "run as root: the bench makes network namespaces and qdiscs (ip netns, tc)"
if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    log "installing iproute2"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >&2 || die "iproute2 missing and not installed"
fi
case "$LINK" in netem|proxy) ;; *) die "BENCH_LINK is netem or proxy, not $LINK" ;; esac
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$NGINX" ] || die "nginx missing: apt-get install nginx"
PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[ -x "$PGBIN/initdb" ] || die "PostgreSQL server binaries missing: apt-get install postgresql"
our_binary

W="$(mktemp -d "${TMPDIR:-/tmp}/rs-scale-out.XXXXXX")"
chmod 755 "$W"
PIDS=()
NSS=()
cleanup() {
    local p i
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -f "$W/pg/data/postmaster.pid" ] && runuser -u resourcesync-test -- "$PGBIN/pg_ctl" -D "$W/pg/data" -m immediate stop >/dev/null 2>&1 || true
    for i in "${NSS[@]}"; do
        ip netns del "$TAG-$i" 2>/dev/null || true
        ip link del "${TAG}h$i" 2>/dev/null || true
    done
    ip addr del "$SRV/32" dev lo 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ------------------------------------------------------------------ the links
ip addr add "$SRV/32" dev lo || die "could not add $SRV to lo"
# link I: namespace TAG-I, veth TAGhI (root, 10.77.I.1) <-> TAGnI (namespace, 10.77.I.2)
link() {
    local i="$1" ns="$TAG-$1" h="${TAG}h$1" n="${TAG}n$1"
    NSS+=("$i")
    ip netns add "$ns" || die "could not make a network namespace (ip netns add)"
    ip link add "$h" type veth peer name "$n" || die "could not make a veth pair"
    ip link set "$n" netns "$ns"
    ip addr add "10.77.$i.1/30" dev "$h"
    ip link set "$h" up
    ip netns exec "$ns" ip addr add "10.77.$i.2/30" dev "$n"
    ip netns exec "$ns" ip link set "$n" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip route add default via "10.77.$i.1"
    if [ "$LINK" = netem ]; then
        # Half the round trip each way, and the cap, on both ends.
        tc qdisc add dev "$h" root netem delay "$((RTT / 2))ms" rate "${MBIT}mbit" limit 100000 2>/dev/null \
            && ip netns exec "$ns" tc qdisc add dev "$n" root netem delay "$((RTT / 2))ms" rate "${MBIT}mbit" limit 100000 \
            || die "no netem here (tc qdisc … netem: the kernel's sch_netem is missing); BENCH_LINK=proxy emulates the delay with the kit's wan_proxy and caps the bandwidth with tbf"
    else
        tc qdisc add dev "$h" root tbf rate "${MBIT}mbit" burst 256kb latency 100ms \
            && ip netns exec "$ns" tc qdisc add dev "$n" root tbf rate "${MBIT}mbit" burst 256kb latency 100ms \
            || die "could not cap the bandwidth (tc qdisc … tbf)"
    fi
}
link 1
link 2
ip netns exec "$TAG-1" ip route get "$SRV" >/dev/null 2>&1 || die "the namespaces have no route to $SRV"

if [ "$LINK" = proxy ]; then
    PROXY="${BENCH_PROXY:-}"
    if [ -z "$PROXY" ]; then
        log "cargo build --release -p resourcesync-testkit --example wan_proxy"
        cargo build -q --release -p resourcesync-testkit --example wan_proxy >&2 || die "wan_proxy build failed"
        PROXY="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/wan_proxy"
        case "$PROXY" in /*) ;; *) PROXY="$ROOT/$PROXY" ;; esac
    fi
    [ -x "$PROXY" ] || die "no wan_proxy at $PROXY"
    "$PROXY" --self-check "$RTT" >&2 || die "the delay emulator is off its configuration: figures would be wrong"
fi

# ------------------------------------------------------------------ PostgreSQL, nginx
PORT="$(free_port)"
PGPORT="$(free_port)"
id resourcesync-test >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin resourcesync-test
mkdir -p "$W/pg" && chown resourcesync-test "$W/pg"
runuser -u resourcesync-test -- "$PGBIN/initdb" -D "$W/pg/data" -A trust -U rs >/dev/null || die "initdb failed"
# As the tests' server (scripts/postgres.sh): durability off, a throwaway cluster.
cat >>"$W/pg/data/postgresql.conf" <<PG
listen_addresses = '127.0.0.1,$SRV'
port = $PGPORT
unix_socket_directories = '$W/pg'
max_connections = 400
fsync = off
synchronous_commit = off
full_page_writes = off
PG
echo "host all all 10.77.0.0/16 trust" >>"$W/pg/data/pg_hba.conf"
runuser -u resourcesync-test -- "$PGBIN/pg_ctl" -D "$W/pg/data" -l "$W/pg/log" -w start >/dev/null || die "PostgreSQL did not start ($W/pg/log)"
PGPID="$(head -1 "$W/pg/data/postmaster.pid")"

log "generating $SOURCES × $EACH and 1 × $BIG files of 512 B"
python3 - "$W" "$SOURCES" "$EACH" "$BIG" <<'PY'
import os, sys
w, n, each, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def fill(d, count, tag):
    for i in range(count):
        sub = os.path.join(d, "d%03d" % (i // 1000))
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, "f%06d.txt" % i), "wb") as f:
            f.write((("%s %d " % (tag, i)) * 64).encode()[:512])
for s in range(n):
    fill(os.path.join(w, "www", "many", "s%03d" % s), each, "s%d" % s)
fill(os.path.join(w, "www", "big"), big, "big")
PY
mkdir -p "$W/nginx/tmp"
cat >"$W/nginx/nginx.conf" <<NG
user root root;
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
    server { listen $SRV:$PORT; root $W/www; }
}
NG
"$NGINX" -p "$W/nginx" -c "$W/nginx/nginx.conf" -e "$W/nginx/error.log" >/dev/null 2>&1 &
PIDS+=($!)
NGINX_PID=$!

# What the workers reach: the root namespace's address through netem, or the namespace's own
# loopback where its emulators listen (the same ports in every namespace).
HOST="$SRV"
[ "$LINK" = proxy ] && HOST=127.0.0.1
EMU=()
if [ "$LINK" = proxy ]; then
    for i in 1 2; do
        for p in "$PORT" "$PGPORT"; do
            ip netns exec "$TAG-$i" "$PROXY" --listen "127.0.0.1:$p" "$SRV:$p" "$RTT" >"$W/proxy-$i-$p.out" 2>&1 &
            PIDS+=($!)
            EMU+=($!)
        done
    done
    for f in "$W"/proxy-*.out; do
        for _ in $(seq 200); do grep -q listening "$f" && break; sleep 0.05; done
        grep -q listening "$f" || die "wan_proxy did not start ($f)"
    done
fi
BASE="http://$HOST:$PORT"
PGURL="postgres://rs@$HOST:$PGPORT/postgres"

log "publishing"
for s in $(seq 0 $((SOURCES - 1))); do
    d="$(printf 's%03d' "$s")"
    "$BIN" publish "$W/www/many/$d" --base-url "$BASE/many/$d/" -q >/dev/null
done
"$BIN" publish "$W/www/big" --base-url "$BASE/big/" -q >/dev/null

# config CASE ABOVE: every Source, named for the case (fresh schemas), share_above ABOVE
config() {
    local c="$1" above="$2" s d
    {
        printf '[limits]\nconcurrency = 8\nper_host = 8\nshare_above = %s\n\n' "$above"
        for s in $(seq 0 $((SOURCES - 1))); do
            d="$(printf 's%03d' "$s")"
            printf '[[source]]\nname = "%s%s"\nurl = "%s/many/%s/.well-known/resourcesync"\nschedule = "1h"\ndelete = true\nconcurrency = %s\n\n' \
                "$c" "$d" "$BASE" "$d" "$CONC"
        done
        printf '[[source]]\nname = "%sbig"\nurl = "%s/big/.well-known/resourcesync"\nschedule = "1h"\ndelete = true\nconcurrency = %s\n' \
            "$c" "$BASE" "$CONC"
    } >"$W/$c.toml"
}

declare -A T CPU
# run CASE WORKERS ABOVE: the baseline of every Source by WORKERS workers, one per namespace
run() {
    local c="$1" k="$2" above="$3" i apis="" s e c0 c1 pids=()
    config "$c" "$above"
    c0="$(python3 "$ROOT/bench/cpu_tree.py" "$NGINX_PID" "$PGPID" ${EMU[@]+"${EMU[@]}"})"
    s=$(date +%s%N)
    for i in $(seq 1 "$k"); do
        ip netns exec "$TAG-$i" "$BIN" aggregate --config "$W/$c.toml" --store "$W/copies-$c" \
            --state "$PGURL" --worker "w$i" --serve "10.77.$i.2:9000" "$VERBOSITY" >/dev/null 2>"$W/$c-$i.err" &
        PIDS+=($!)
        pids+=($!)
        apis="${apis:+$apis,}http://10.77.$i.2:9000/api/sources"
    done
    BIG_TIMES="$W/$c.big" python3 - "$apis" "$c" "$SOURCES" "$EACH" "$BIG" <<'PY' || { tail -5 "$W/$c"-*.err >&2; die "run $c did not finish"; }
import json, os, sys, time, urllib.request
urls, c, n, each, big = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
want = {"%ss%03d" % (c, s): each for s in range(n)}
want[c + "big"] = big
start, last, series = time.time(), {}, {}
while time.time() - start < 3600:
    done = set()
    for u in urls:
        try:
            with urllib.request.urlopen(u, timeout=10) as r:
                last[u] = json.load(r)
        except OSError:
            continue
        series.setdefault(u, []).extend(
            (time.time() - start, s.get("shared_copies", 0)) for s in last[u] if s["name"] == c + "big")
        done |= {s["name"] for s in last[u] if s["name"] in want
                 and s["resources"] == want[s["name"]] and s["syncs"] >= 1
                 and s["phase"] == "following" and s.get("republishes", 0) >= 1}
    if len(done) == len(want):
        # Where the time went: when the large Source's sync started and ended (seconds from
        # the run's start, as each worker's page says), and the fetches each worker did for it
        # through the queue.
        import datetime
        def secs(t):
            return datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() - start
        for u in urls:
            mine = [s for s in last.get(u, []) if s["name"] != c + "big" and s["name"] in want
                    and any(e["kind"] == "sync" for e in s.get("recent", []))]
            if mine:
                # Each small Source's first sync (start to end) and its republish after it.
                durs, lags = [], []
                for s in mine:
                    ev = sorted((secs(e["at"]), e["kind"]) for e in s["recent"])
                    end = next((t for t, k in ev if k == "sync"), None)
                    pub = next((t for t, k in ev if k == "republish" and end is not None and t >= end), None)
                    if end is not None and s.get("last_sync"):
                        durs.append(end - secs(s["last_sync"]))
                    if pub is not None:
                        lags.append(pub - end)
                durs.sort(); lags.sort()
                q = lambda v, f: v[min(len(v) - 1, int(len(v) * f))] if v else float("nan")
                print("   %s: %d small Sources synced here, the first from %.1f s, the last to %.1f s;"
                      " a sync took %.1f s (median), %.1f s (max), its republish %.1f s after it (median)"
                      % (u.split("/")[2], len(mine), min(secs(s["last_sync"]) for s in mine),
                         max(secs(e["at"]) for s in mine for e in s["recent"] if e["kind"] == "sync"),
                         q(durs, 0.5), q(durs, 1.0), q(lags, 0.5)),
                      file=sys.stderr)
            for s in last.get(u, []):
                if s["name"] != c + "big":
                    continue
                ends = [secs(e["at"]) for e in s.get("recent", []) if e["kind"] == "sync"]
                if ends and s.get("last_sync"):
                    # For the summary: when the large Source's sync started and ended.
                    with open(os.environ["BIG_TIMES"], "w") as f:
                        f.write("%.1f %.1f\n" % (secs(s["last_sync"]), max(ends)))
                # Its fetches through the queue per second: over the time it had any to do (from
                # its first to its last), and over its busiest 2 s.
                ser = series.get(u, [])
                moving = [t for (t, n), (_, m) in zip(ser, ser[1:]) if m > n]
                busy = (max(moving) - min(moving)) if len(moving) > 1 else 0
                peak = max((n2 - n1) / (t2 - t1) for (t1, n1) in ser for (t2, n2) in ser
                           if 1.9 <= t2 - t1 <= 2.3) if len(ser) > 12 else 0
                print("   %s: large Source %s, sync from %s s to %s s, %d fetched for it through the queue"
                      " (%.0f/s over %.1f s, %.0f/s at best)"
                      % (u.split("/")[2], "synced here" if ends else "helped",
                         "%.1f" % secs(s["last_sync"]) if ends and s.get("last_sync") else "-",
                         "%.1f" % max(ends) if ends else "-", s.get("shared_copies", 0),
                         s.get("shared_copies", 0) / busy if busy else 0, busy, peak), file=sys.stderr)
        sys.exit(0)
    time.sleep(0.2)
print(json.dumps(last)[:2000], file=sys.stderr)
sys.exit(1)
PY
    e=$(date +%s%N)
    c1="$(python3 "$ROOT/bench/cpu_tree.py" "$NGINX_PID" "$PGPID" ${EMU[@]+"${EMU[@]}"} "${pids[@]}")"
    T[$c]="$(python3 -c "print('%.2f' % (($e - $s) / 1e9))")"
    CPU[$c]="$(python3 -c "print('%.2f' % ($c1 - $c0))")"
    log "$c: $k worker(s), share_above $above: ${T[$c]} s, ${CPU[$c]} CPU s (load $(load))"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ -n "${BENCH_LOGS:-}" ]; then
        mkdir -p "$BENCH_LOGS"
        for i in $(seq 1 "$k"); do cp "$W/$c-$i.err" "$BENCH_LOGS/$c-$i.log"; done
    fi
}

# BENCH_CASES: which runs (all three by default; the ratios need all three).
CASES=" ${BENCH_CASES:-alone one two} "
[[ "$CASES" == *" alone "* ]] && run alone 1 $((BIG + 1))
[[ "$CASES" == *" one "* ]] && run one 1 500
[[ "$CASES" == *" two "* ]] && run two 2 500
[ "$CASES" = " alone one two " ] || exit 0

BYTES=$(( (SOURCES * EACH + BIG) * 512 ))
printf '\n%s Sources × %s + 1 × %s files of 512 B; each worker behind its own link (%s ms, %s Mbit/s, %s)\n' \
    "$SOURCES" "$EACH" "$BIG" "$RTT" "$MBIT" "$LINK"
printf '%-44s %10s %10s\n' "case" "wall s" "CPU s"
printf '%-44s %10s %10s\n' "1 worker, sharing off (fetching alone)" "${T[alone]}" "${CPU[alone]}"
printf '%-44s %10s %10s\n' "1 worker, through the queue" "${T[one]}" "${CPU[one]}"
printf '%-44s %10s %10s\n' "2 workers, each in its namespace" "${T[two]}" "${CPU[two]}"
python3 - "${T[alone]}" "${T[one]}" "${T[two]}" "${CPU[one]}" "$(nproc)" "$BYTES" "$MBIT" \
    "$(cat "$W/alone.big")" "$(cat "$W/two.big")" <<'PY'
import sys
alone, one, two, cpu1, cores, nbytes, mbit = map(float, sys.argv[1:8])
(s1, e1), (s2, e2) = (map(float, a.split()) for a in sys.argv[8:10])
best = min(alone, one)
link = nbytes * 8 / (mbit * 1e6)
print("floor (the bytes over the links): 1 worker %.2f s, 2 workers %.2f s" % (link, link / 2))
print("ratio 2 workers / 1 worker (the faster of its two runs): %.2f (goal <= 0.6); "
      "1 through the queue / alone: %.2f (goal <= 1.0)" % (two / best, one / alone))
print("CPU-bound ceiling of this machine for 2 workers (%d cores): %.2f" % (cores, max(cpu1 / cores / one, 0.5)))
# The large Source is the run: each worker fetches it at most at its `concurrency` in flight,
# so two workers take at least half one worker's sync of it. The 2-worker run with its large
# Source's sync at that floor, everything else as measured:
half = (e1 - s1) / 2
print("large Source's sync: 1 worker alone %.1f s (from %.1f s), 2 workers %.1f s (from %.1f s); "
      "floor for 2: %.1f s" % (e1 - s1, s1, e2 - s2, s2, half))
print("ratio floor: the 2-worker run with its large Source at that floor / 1 worker: %.2f"
      % ((two - (e2 - s2) + half) / best))
PY
