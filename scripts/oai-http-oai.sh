#!/usr/bin/env bash
# Start (or reuse) the second OAI-PMH data provider of the tests: Perl's HTTP::OAI (Debian
# `libhttp-oai-perl`, CPAN HTTP-OAI, a library independent of the `oaipmh`/pyoai lineage of
# scripts/oai-provider.sh) over records in memory (scripts/oai_http_oai.pl), on 127.0.0.1 with a
# free port, kept running between runs (like scripts/oai-provider.sh).
#
# Usage: scripts/oai-http-oai.sh          start or reuse; prints the provider's root URL
#        scripts/oai-http-oai.sh stop     stop it
#   stdout: http://127.0.0.1:PORT/ (one line) on success, nothing else. The repository NAME
#           answers OAI-PMH at ROOT/NAME/oai and takes changes at ROOT/NAME/admin (see
#           scripts/oai_http_oai.pl); `fixture` holds 300 records (every 10th deleted, every
#           other deleted one with its metadata), 50 a page, day granularity.
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# The packages are Debian's, pinned: libhttp-oai-perl (HTTP::OAI $HTTP_OAI_VERSION) and
# libhttp-daemon-perl, installed with apt-get when missing (as root; otherwise the script says
# what to install). The port and pid live in ${XDG_CACHE_HOME:-~/.cache}/resourcesync-oai-http-oai
# (override: $RESOURCESYNC_OAI2_DIR). Concurrent runs are serialised by flock.
set -euo pipefail

HTTP_OAI_VERSION="4.12"
HTTP_OAI_DEB="4.12-1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${RESOURCESYNC_OAI2_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/resourcesync-oai-http-oai}"
PORT_FILE="$DIR/port"
PID_FILE="$DIR/pid"
log() { printf 'oai-http-oai: %s\n' "$*" >&2; }
die() { printf 'oai-http-oai: ERROR: %s\n' "$*" >&2; exit 1; }
mkdir -p "$DIR"

url() { printf 'http://127.0.0.1:%s/\n' "$1"; }
healthy() {
    [ -s "$PORT_FILE" ] && [ -s "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null &&
        curl -fsS --max-time 5 "$(url "$(cat "$PORT_FILE")")fixture/oai?verb=Identify" 2>/dev/null |
        grep -q '<granularity>'
}

if [ "${1:-}" = stop ]; then
    if [ -s "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
        kill "$(cat "$PID_FILE")"
    fi
    rm -f "$PID_FILE" "$PORT_FILE"
    exit 0
fi
[ $# -eq 0 ] || die "usage: scripts/oai-http-oai.sh [stop]"
command -v curl >/dev/null 2>&1 || die "curl is needed (apt-get install curl)"

if healthy; then
    url "$(cat "$PORT_FILE")"
    exit 0
fi

exec 9>"$DIR/lock"
flock 9
if healthy; then  # another run started it while we waited
    url "$(cat "$PORT_FILE")"
    exit 0
fi

# ---------------------------------------------------------------- the packages
have() {
    perl -MHTTP::Daemon -MHTTP::OAI -e \
        "exit(\$HTTP::OAI::VERSION eq '$HTTP_OAI_VERSION' ? 0 : 1)" >/dev/null 2>&1
}
if ! have; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing Debian's libhttp-oai-perl $HTTP_OAI_DEB and libhttp-daemon-perl"
        export DEBIAN_FRONTEND=noninteractive
        exec 8>/var/lock/resourcesync-apt.lock
        flock 8
        # Waits for another apt-get (another test run's nginx, say) rather than failing.
        apt=(apt-get -o DPkg::Lock::Timeout=900 -y -qq)
        "${apt[@]}" update >&2 || die "apt-get update failed"
        "${apt[@]}" install --no-install-recommends "libhttp-oai-perl=$HTTP_OAI_DEB" \
            libhttp-daemon-perl >&2 ||
            die "apt-get install libhttp-oai-perl=$HTTP_OAI_DEB libhttp-daemon-perl failed"
        exec 8>&-
    else
        die "HTTP::OAI $HTTP_OAI_VERSION is needed: apt-get install libhttp-oai-perl=$HTTP_OAI_DEB libhttp-daemon-perl (as root)"
    fi
    have || die "HTTP::OAI is not version $HTTP_OAI_VERSION after the install: $(perl -MHTTP::OAI -e 'print $HTTP::OAI::VERSION' 2>&1)"
fi

# ---------------------------------------------------------------- the server
if [ -s "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
    log "stopping a provider that does not answer"
    kill "$(cat "$PID_FILE")" 2>/dev/null || true
fi
rm -f "$PORT_FILE"
log "starting on 127.0.0.1 (a free port)"
setsid perl "$ROOT/scripts/oai_http_oai.pl" --port-file "$PORT_FILE" \
    </dev/null >"$DIR/server.log" 2>&1 9>&- &
echo $! >"$PID_FILE"
for _ in $(seq 1 100); do
    if healthy; then
        url "$(cat "$PORT_FILE")"
        exit 0
    fi
    kill -0 "$(cat "$PID_FILE")" 2>/dev/null || break
    sleep 0.1
done
tail -n 20 "$DIR/server.log" >&2 || true
die "the provider did not start (see $DIR/server.log)"
