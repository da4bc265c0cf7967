#!/usr/bin/env bash
# Start (or reuse) the OAI-PMH data provider of the tests: the `oaipmh` library's server (PyPI
# `oaipmh`, the maintained fork of pyoai) over records in memory (scripts/oai_provider.py), on
# 127.0.0.1 with a free port, kept running between runs (like scripts/postgres.sh).
#
# Usage: scripts/oai-provider.sh          start or reuse; prints the provider's root URL
#        scripts/oai-provider.sh stop     stop it
#   stdout: http://127.0.0.1:PORT/ (one line) on success, nothing else. The repository NAME
#           answers OAI-PMH at ROOT/NAME/oai and takes changes at ROOT/NAME/admin (see
#           scripts/oai_provider.py); `fixture` holds 300 records (every 10th deleted), 50 a page.
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# The venv lives in ${XDG_CACHE_HOME:-~/.cache}/resourcesync-oai-provider (override:
# $RESOURCESYNC_OAI_DIR), made once with pinned versions; a stamp records the interpreter and
# the pins. Interpreter, first that works: $OAI_PYTHON, python3.11, python3.12, python3.13,
# python3 (oaipmh 4 needs Python >= 3.11). Concurrent runs are serialised by flock.
set -euo pipefail

OAIPMH_VERSION="4.0.0"
LXML_VERSION="6.1.3"
RECIPE_VERSION="1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${RESOURCESYNC_OAI_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/resourcesync-oai-provider}"
VENV="$DIR/venv"
PORT_FILE="$DIR/port"
PID_FILE="$DIR/pid"
log() { printf 'oai-provider: %s\n' "$*" >&2; }
die() { printf 'oai-provider: ERROR: %s\n' "$*" >&2; exit 1; }
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
[ $# -eq 0 ] || die "usage: scripts/oai-provider.sh [stop]"
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

# ---------------------------------------------------------------- the venv
python_ok() {
    command -v "$1" >/dev/null 2>&1 &&
        "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1
}
PY=""
for cand in ${OAI_PYTHON:-} python3.11 python3.12 python3.13 python3; do
    if python_ok "$cand"; then PY="$(command -v "$cand")"; break; fi
done
[ -n "$PY" ] || die "no Python >= 3.11 found (oaipmh $OAIPMH_VERSION needs it); set OAI_PYTHON"
STAMP="recipe=$RECIPE_VERSION python=$("$PY" -c 'import sys; print(sys.version.split()[0])') oaipmh=$OAIPMH_VERSION lxml=$LXML_VERSION"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.stamp" 2>/dev/null)" != "$STAMP" ]; then
    log "making the venv in $VENV ($STAMP)"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV" >&2 || die "python -m venv failed"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        "oaipmh==$OAIPMH_VERSION" "lxml==$LXML_VERSION" >&2 || die "pip install oaipmh failed"
    printf '%s\n' "$STAMP" >"$VENV/.stamp"
fi

# ---------------------------------------------------------------- the server
if [ -s "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
    log "stopping a provider that does not answer"
    kill "$(cat "$PID_FILE")" 2>/dev/null || true
fi
rm -f "$PORT_FILE"
log "starting on 127.0.0.1 (a free port)"
setsid "$VENV/bin/python" "$ROOT/scripts/oai_provider.py" --port-file "$PORT_FILE" \
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
