#!/usr/bin/env bash
# Mirroring a site: ours (`resourcesync sync --delete`) against what users run instead, rclone
# (HTTP backend: default settings, and tuned with --transfers 32 --checkers 32) and
# `wget --mirror`, from one nginx serving the same tree and our published documents, on
# loopback and through the kit's WAN delay proxy (default 50 ms round trips): a baseline into
# an empty directory, then an incremental after 1% of the files changed (half updated, a
# quarter added, a quarter deleted). Every result is checked: the copy equals the tree (wget
# never deletes: its check leaves deletions out, and says so). Ours also syncs a second copy
# of the tree published with Resource Dumps (`publish --dumps`, same nginx, its own proxy of
# the same delay): the `ours dump` column, whose baseline must come from the dump packages
# (the `--json` report's `packages` and `from_packages` say so, else the bench fails).
#
# Usage: bench/mirror-vs-peers.sh [N] [RTT_MS]      (default 5000 files, 50 ms)
#
# 1. installs nginx and rclone when missing (Debian packages; policy-rc.d keeps a system nginx
#    from starting), builds our release binary and the kit's wan_proxy example
# 2. a tree of N files of 200-4,000 random bytes in 100 folders (python3, seeded)
# 3. per network (loopback: the proxy with no delay; wan: RTT_MS): nginx (autoindex on: rclone
#    and wget read its listings) on 127.0.0.1, the proxy in front, the tree published by ours
#    at the proxy's URL (state outside the tree); a copy of the tree published with dumps on a
#    second nginx server (same process) behind a second proxy
# 4. times each tool's baseline and incremental, and prints the table and the ratios ours/peer
#    (ours / the faster rclone setting: goals of issue 24 are <= 0.5 baseline, <= 0.25
#    incremental, <= 0.1 baseline from a Source with a Resource Dump, through 50 ms round trips),
#    and the floor of an incremental's local work (1% of N small files written + one syncfs),
#    and of a durable baseline (the tree copied by `tar -c | tar -x` into a new directory, then
#    `sync -f`)
#
# Environment: BENCH_WGET=auto|1|0 (auto: wget on loopback always, through the delay only when
# N <= 1000: it makes one request per file per round trip, 5,000 files take minutes),
# BENCH_NO_INSTALL=1 (never apt-get), BENCH_BIN (our binary), BENCH_NETS="loopback wan" (the
# networks measured: `BENCH_NETS=loopback bench/mirror-vs-peers.sh 100000` leaves out the
# delay, where rclone's default setting would take an hour at 100,000 files).
# Exit: 0 measured (whatever the ratios), 1 failure (a tool missing, a server down, a copy
# that differs from the tree).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
N="${1:-5000}"
RTT="${2:-50}"
die() { echo "error: $*" >&2; exit 1; }

# ------------------------------------------------------------------ tools
NGINX="$(command -v nginx || true)"
[ -n "$NGINX" ] || { [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx; } || true
if [ -z "$NGINX" ] || ! command -v rclone >/dev/null 2>&1; then
    [ "${BENCH_NO_INSTALL:-0}" = 1 ] && die "nginx or rclone missing and BENCH_NO_INSTALL=1"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    created=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod 755 /usr/sbin/policy-rc.d
        created=1
    fi
    log "apt-get install -y nginx rclone"
    $SUDO apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nginx rclone >&2 \
        || die "apt-get install nginx rclone failed"
    [ -n "$created" ] && $SUDO rm -f /usr/sbin/policy-rc.d
    NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
fi
[ -x "$NGINX" ] || die "nginx not found"
command -v rclone >/dev/null || die "rclone not found"
command -v wget >/dev/null || die "wget not found"
command -v curl >/dev/null || die "curl not found"
our_binary
log "cargo build --release -p resourcesync-testkit --example wan_proxy"
cargo build -q --release -p resourcesync-testkit --example wan_proxy >&2 || die "wan_proxy build failed"
PROXY="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/wan_proxy"
case "$PROXY" in /*) ;; *) PROXY="$ROOT/$PROXY" ;; esac

W="$(mktemp -d "${TMPDIR:-/tmp}/mirror-vs-peers.XXXXXX")"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ------------------------------------------------------------------ the tree
python3 - "$W/seed" "$N" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(7)
for i in range(n):
    d = os.path.join(root, "d%03d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d.bin" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.randint(200, 4000)))
EOF
change_tree() {  # $1 tree: 1% changed: half updated, a quarter added, a quarter deleted
    python3 - "$1" "$N" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(11)
k = max(4, n // 100)
files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs
               if not dp.startswith(os.path.join(root, "resourcesync"))
               and ".well-known" not in dp and f.endswith(".bin"))
picked = rnd.sample(files, k // 2 + k // 4)
for p in picked[: k // 2]:
    with open(p, "wb") as f:
        f.write(rnd.randbytes(rnd.randint(200, 4000)))
for p in picked[k // 2 :]:
    os.remove(p)
for i in range(k // 4):
    with open(os.path.join(root, "d%03d" % (i % 100), "new%06d.bin" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.randint(200, 4000)))
EOF
}
same_tree() {  # $1 tree, $2 copy, $3 "nodelete": extra files in the copy are allowed
    local out
    out="$(diff -r -q -x resourcesync -x .well-known -x .resourcesync -x robots.txt "$1" "$2" || true)"
    [ "${3:-}" = nodelete ] && out="$(printf '%s\n' "$out" | grep -v "^Only in $2" || true)"
    [ -z "$out" ] || { printf '%s\n' "$out" | head -5 >&2; return 1; }
}

secs() {  # runs "$@" quietly, prints wall seconds
    local s e
    s=$(date +%s%N)
    "$@" >"$W/last.out" 2>&1 || { tail -5 "$W/last.out" >&2; die "failed: $*"; }
    e=$(date +%s%N)
    python3 -c "print('%.2f' % (($e - $s) / 1e9))"
}

floor_tree() {  # $1 tree, $2 new dir: tar -c | tar -x into it, then sync -f (wall seconds);
    # the CPU seconds of tar -x (user + system) go to $W/tarx.cpu
    mkdir -p "$2"
    local s e
    s="$(date +%s%N)"
    tar -C "$1" -cf - . | python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.2f" % (r.ru_utime + r.ru_stime))' tar -C "$2" -xf - >"$W/tarx.cpu"
    sync -f "$2"
    e="$(date +%s%N)"
    python3 -c "print('%.2f' % (($e - $s) / 1e9))"
}

floor_write() {  # $1 dir: 1% of N files (200-4,000 B, in as many folders) written, then one syncfs
    python3 - "$1" "$N" <<'EOF'
import ctypes, os, random, sys, time
root, n = sys.argv[1], max(4, int(sys.argv[2]) // 100)
libc = ctypes.CDLL("libc.so.6", use_errno=True)
rnd = random.Random(13)
bodies = [rnd.randbytes(rnd.randint(200, 4000)) for _ in range(n)]
t = time.perf_counter()
for i, b in enumerate(bodies):
    d = os.path.join(root, "d%03d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d.bin" % i), "wb") as f:
        f.write(b)
fd = os.open(root, os.O_RDONLY)
if libc.syncfs(fd) != 0:
    sys.exit("syncfs failed")
os.close(fd)
print("%.2f" % (time.perf_counter() - t))
EOF
}

from_dump() {  # $1 a sync's --json report: all of its copies came from dump packages
    python3 - "$1" "$N" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
r = json.loads(text[text.index("{"):])
ok = r.get("packages", 0) >= 1 and r.get("from_packages", 0) == int(sys.argv[2])
print("== dump path: %s package(s), %s copies from them (of %s), mode %s"
      % (r.get("packages"), r.get("from_packages"), sys.argv[2], r.get("mode")), file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}

cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f\n", ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }
servers_cpu() {  # $1 net: CPU seconds (user + system) nginx's workers and the proxies used so far
    local p
    for p in $(pgrep -P "${NGINX_PID[$1]}") ${PROXY_PID[$1]}; do cpu_s "$p"; done | awk '{s += $1} END {printf "%.2f", s}'
}

declare -A T NGINX_PID PROXY_PID
run_net() {  # $1 name, $2 rtt ms
    local net="$1" rtt="$2" tree="$W/tree-$1" dtree="$W/dtree-$1" port dport url durl
    cp -a "$W/seed" "$tree"
    cp -a "$W/seed" "$dtree"
    port="$(free_port)"
    dport="$(free_port)"
    mkdir -p "$W/nginx-$net/tmp"
    local user=""
    [ "$(id -u)" = 0 ] && user="user root root;"
    cat >"$W/nginx-$net/nginx.conf" <<EOF
$user
worker_processes 2;
daemon off;
pid $W/nginx-$net/nginx.pid;
error_log $W/nginx-$net/error.log warn;
events { worker_connections 4096; }
http {
    access_log $W/nginx-$net/access.log;
    sendfile on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    types { application/xml xml; }
    client_body_temp_path $W/nginx-$net/tmp/body;
    proxy_temp_path $W/nginx-$net/tmp/proxy;
    fastcgi_temp_path $W/nginx-$net/tmp/fastcgi;
    uwsgi_temp_path $W/nginx-$net/tmp/uwsgi;
    scgi_temp_path $W/nginx-$net/tmp/scgi;
    server { listen 127.0.0.1:$port; root $tree; autoindex on; }
    server { listen 127.0.0.1:$dport; root $dtree; }
}
EOF
    "$NGINX" -p "$W/nginx-$net" -c "$W/nginx-$net/nginx.conf" -e "$W/nginx-$net/error.log" >/dev/null 2>&1 &
    PIDS+=($!)
    NGINX_PID[$net]=$!
    "$PROXY" "127.0.0.1:$port" "$rtt" >"$W/proxy-$net.out" 2>&1 &
    PIDS+=($!)
    PROXY_PID[$net]=$!
    "$PROXY" "127.0.0.1:$dport" "$rtt" >"$W/proxy-$net-dump.out" 2>&1 &
    PIDS+=($!)
    PROXY_PID[$net]+=" $!"
    for _ in $(seq 100); do
        grep -q listening "$W/proxy-$net.out" && grep -q listening "$W/proxy-$net-dump.out" && break
        sleep 0.05
    done
    url="$(sed -n 's/^listening //p' "$W/proxy-$net.out")"
    durl="$(sed -n 's/^listening //p' "$W/proxy-$net-dump.out")"
    [ -n "$url" ] && [ -n "$durl" ] || die "wan_proxy did not start"
    for _ in $(seq 100); do curl -sf -o /dev/null "$url" && break; sleep 0.05; done
    "$BIN" publish "$tree" --base-url "$url" --state "$W/state-$net.sqlite" -q >/dev/null
    "$BIN" publish "$dtree" --dumps --base-url "$durl" --state "$W/state-$net-dump.sqlite" -q >/dev/null
    log "$net: $N files at $url (round trip ${rtt} ms; load $(load))"
    local rc_ex=(--exclude "/resourcesync/**" --exclude "/.well-known/**" --exclude "/robots.txt")
    local wget_on=0
    case "${BENCH_WGET:-auto}" in 1) wget_on=1 ;; 0) wget_on=0 ;; *) [ "$rtt" = 0 ] || [ "$N" -le 1000 ] && wget_on=1 ;; esac
    local tools=(ours ours-dump rclone rclone-tuned)
    [ "$wget_on" = 1 ] && tools+=(wget)
    for phase in baseline incremental; do
        if [ "$phase" = baseline ]; then
            # The floor of a durable baseline: the tree copied by tar into a new directory,
            # then made durable (sync -f: one syncfs), what any copy that survives a crash
            # costs at least, network left out.
            # Its tree is left until the bench ends (cleanup): on a file system without a
            # journal (ext4 `^has_journal`, as here) a new inode is not given out within 5-10 s
            # of its deletion, and every creation scans past the freed ones (the kernel's
            # `recently_deleted`), so the tool that ran right after a mass delete paid for it.
            T[$net/bfloor]="$(floor_tree "$W/seed" "$W/bfloor-$net")"
            T[$net/tarx]="$(cat "$W/tarx.cpu")"
            printf '%-9s %-12s %-13s %8s s\n' "$net" floor "tar|tar+sync" "${T[$net/bfloor]}"
        fi
        if [ "$phase" = incremental ]; then
            # The floor of ours' local work: as many small files as change, made durable.
            T[$net/floor]="$(floor_write "$W/floor-$net")"
            printf '%-9s %-12s %-13s %8s s\n' "$net" floor "write+syncfs" "${T[$net/floor]}"
            change_tree "$tree"
            "$BIN" publish "$tree" --base-url "$url" --state "$W/state-$net.sqlite" -q >/dev/null
            change_tree "$dtree"
            "$BIN" publish "$dtree" --dumps --base-url "$durl" --state "$W/state-$net-dump.sqlite" -q >/dev/null
        fi
        for t in "${tools[@]}"; do
            local d="$W/copy-$net-$t" cpu0
            cpu0="$(servers_cpu "$net")"
            case "$t" in
                ours) T[$net/$phase/$t]="$(secs "$BIN" sync "$url" "$d" --delete -q)" ;;
                ours-dump)
                    T[$net/$phase/$t]="$(secs "$BIN" sync "$durl" "$d" --delete -q --json)"
                    if [ "$phase" = baseline ]; then
                        from_dump "$W/last.out" || die "$net: the dumps baseline did not come from the Resource Dump"
                    fi
                    ;;
                rclone) T[$net/$phase/$t]="$(secs rclone sync --http-url "$url" :http: "$d" "${rc_ex[@]}")" ;;
                rclone-tuned) T[$net/$phase/$t]="$(secs rclone sync --http-url "$url" :http: "$d" "${rc_ex[@]}" --transfers 32 --checkers 32)" ;;
                wget) T[$net/$phase/$t]="$(secs wget -m -np -nH -q -e robots=off -X /resourcesync,/.well-known -P "$d" "$url")" ;;
            esac
            local nodelete=""
            [ "$t" = wget ] && nodelete=nodelete
            local src="$tree"
            [ "$t" = ours-dump ] && src="$dtree"
            same_tree "$src" "$d" $nodelete || die "$net $phase $t: the copy differs from the tree"
            T[$net/$phase/$t/servers]="$(python3 -c "print('%.2f' % ($(servers_cpu "$net") - $cpu0))")"
            printf '%-9s %-12s %-13s %8s s  (nginx and proxy: %s CPU s)\n' "$net" "$phase" "$t" \
                "${T[$net/$phase/$t]}" "${T[$net/$phase/$t/servers]}"
        done
    done
    # Ours once more, nothing changed: its time and its requests (nginx's access log).
    local before after
    before="$(wc -l <"$W/nginx-$net/access.log")"
    T[$net/unchanged/ours]="$(secs "$BIN" sync "$url" "$W/copy-$net-ours" --delete -q)"
    after="$(wc -l <"$W/nginx-$net/access.log")"
    REQS[$net]=$((after - before))
    printf '%-9s %-12s %-13s %8s s  %s requests\n' "$net" unchanged ours "${T[$net/unchanged/ours]}" "${REQS[$net]}"
    NETS+=("$net")
    TOOLS_OF[$net]="${tools[*]}"
}

NETS=()
declare -A TOOLS_OF REQS
for net in ${BENCH_NETS:-loopback wan}; do
    case "$net" in
        loopback) run_net loopback 0 ;;
        wan) run_net wan "$RTT" ;;
        *) die "BENCH_NETS: loopback and/or wan, not $net" ;;
    esac
done

echo
printf '%-9s %-12s %8s %9s %8s %8s %8s   %-20s %s\n' network phase ours "ours dump" rclone tuned wget \
    "ours / faster rclone" "dump / faster rclone"
for net in "${NETS[@]}"; do
    for phase in baseline incremental; do
        o="${T[$net/$phase/ours]}"; r="${T[$net/$phase/rclone]}"; t="${T[$net/$phase/rclone-tuned]}"
        od="${T[$net/$phase/ours-dump]}"
        g="${T[$net/$phase/wget]:--}"
        ratio="$(python3 -c "print('%.2f' % ($o / min($r, $t)))")"
        dratio="$(python3 -c "print('%.2f' % ($od / min($r, $t)))")"
        printf '%-9s %-12s %8s %9s %8s %8s %8s   %-20s %s\n' "$net" "$phase" "$o" "$od" "$r" "$t" "$g" "$ratio" "$dratio"
    done
done
for net in "${NETS[@]}"; do
    printf '%-9s %-12s %8s   %s requests\n' "$net" unchanged "${T[$net/unchanged/ours]}" "${REQS[$net]}"
done
for net in "${NETS[@]}"; do
    printf '%-9s %-12s %8s   ours baseline / it: %s, faster rclone / it: %s\n' "$net" "durable floor" \
        "${T[$net/bfloor]}" \
        "$(python3 -c "print('%.2f' % (${T[$net/baseline/ours]} / max(${T[$net/bfloor]}, 0.01)))")" \
        "$(python3 -c "print('%.2f' % (min(${T[$net/baseline/rclone]}, ${T[$net/baseline/rclone-tuned]}) / max(${T[$net/bfloor]}, 0.01)))")"
    # What no durable copy through these servers can beat on this machine: the durable copy's
    # wall time, or the CPU it and the servers need over the cores, whichever is longer (the
    # client's own HTTP work left out). Ours through the list only: the dump is other requests.
    cores="$(nproc)"
    cfloor="$(python3 -c "print('%.2f' % ((${T[$net/tarx]} + ${T[$net/baseline/ours/servers]}) / $cores))")"
    reach="$(python3 -c "print('%.2f' % max(${T[$net/bfloor]}, $cfloor))")"
    printf '%-9s %-12s %8s   (tar -x %s CPU s + nginx and proxy in ours'"'"' baseline %s CPU s) / %s cores; ours baseline / it: %s\n' \
        "$net" "CPU floor" "$cfloor" "${T[$net/tarx]}" "${T[$net/baseline/ours/servers]}" "$cores" \
        "$(python3 -c "print('%.2f' % (${T[$net/baseline/ours]} / max($cfloor, 0.01)))")"
    printf '%-9s %-12s %8s   the longer floor / faster rclone: %s (the best ratio a durable baseline could show here)\n' \
        "$net" "reachable" "$reach" \
        "$(python3 -c "print('%.2f' % ($reach / min(${T[$net/baseline/rclone]}, ${T[$net/baseline/rclone-tuned]})))")"
    printf '%-9s %-12s %8s   ours incremental / it: %s\n' "$net" floor "${T[$net/floor]}" \
        "$(python3 -c "print('%.1f' % (${T[$net/incremental/ours]} / max(${T[$net/floor]}, 0.01)))")"
done
echo "(seconds; $N files; wan = ${RTT} ms round trips through the kit's proxy; wget never deletes;"
echo " unchanged: ours once more with nothing changed, its requests as nginx logged them;"
echo " ours dump: ours from the same tree published with dumps, its baseline from the packages;"
echo " floor: 1% of N small files written and made durable with one syncfs, just before the incremental;"
echo " durable floor: the tree copied by tar into a new directory and made durable (sync -f): a copy"
echo " that survives a crash costs at least that; rclone writes without making anything durable,"
echo " ours verifies each body against the list (length, digest) and makes the copy and its"
echo " state durable before recording it: what a kill -9 or a power cut then cannot corrupt;"
echo " CPU floor: tar -x's CPU and what nginx and the proxy spent serving ours' baseline, over the"
echo " cores they share: the work any durable copy of these files through these servers needs)"
