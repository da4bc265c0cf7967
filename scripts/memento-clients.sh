#!/usr/bin/env bash
# Install two Memento (RFC 7089) clients we did not write into <repo>/.memento-clients,
# idempotently, for the tests of crates/aggregate/tests/it/memento.rs:
#   - the Python package memento_client (the Memento protocol authors' group's client), pinned
#     with its dependencies, in .memento-clients/venv;
#   - the npm package memento-client (a Wayback Machine TimeMap client), pinned, installed with
#     the machine's npm into .memento-clients/node (its node_modules).
#
# Usage: scripts/memento-clients.sh
#   stdout: the folder's path (one line) on success, nothing else
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# A second run with nothing changed is a fast no-op (a stamp records the pins). Interpreter:
# $MEMENTO_PYTHON, else python3; node and npm from PATH. Safe against concurrent runs (flock).
set -euo pipefail

PY_CLIENT_VERSION="0.6.1"
# Transitive dependencies, pinned so that every machine gets the same client.
CONSTRAINTS="requests==2.34.2
urllib3==2.8.0
idna==3.20
certifi==2026.10.19.post1
charset-normalizer==3.5.3"
NPM_CLIENT_VERSION="2.0.4"
RECIPE_VERSION="1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.memento-clients"
log() { printf 'memento-clients: %s\n' "$*" >&2; }
die() { printf 'memento-clients: ERROR: %s\n' "$*" >&2; exit 1; }

PYTHON="${MEMENTO_PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON (set MEMENTO_PYTHON)"
command -v node >/dev/null 2>&1 || die "no node on PATH (Debian: apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || die "no npm on PATH (Debian: apt-get install npm)"
PYVER="$("$PYTHON" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
STAMP_WANT="recipe=$RECIPE_VERSION
python=$PYVER
memento_client==$PY_CLIENT_VERSION
$CONSTRAINTS
memento-client@$NPM_CLIENT_VERSION"
STAMP="$DIR/.stamp"

ok() {
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_WANT" ] && [ -x "$DIR/venv/bin/python" ] &&
        "$DIR/venv/bin/python" -c 'from memento_client import MementoClient' 2>/dev/null &&
        (cd "$DIR/node" && node -e 'require("memento-client")') 2>/dev/null
}
if ok; then printf '%s\n' "$DIR"; exit 0; fi

mkdir -p "$DIR"
if command -v flock >/dev/null 2>&1; then
    exec 9<"$DIR"
    flock 9
    if ok; then printf '%s\n' "$DIR"; exit 0; fi
fi
rm -f "$STAMP"

log "creating $DIR/venv with Python $PYVER"
"$PYTHON" -m venv --clear "$DIR/venv" >&2 ||
    die "'$PYTHON -m venv' failed (Debian: apt-get install python3-venv, or set MEMENTO_PYTHON)"
printf '%s\n' "$CONSTRAINTS" >"$DIR/constraints.txt"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
log "installing memento_client==$PY_CLIENT_VERSION"
"$DIR/venv/bin/python" -m pip install --quiet --progress-bar off --no-input \
    --constraint "$DIR/constraints.txt" "memento_client==$PY_CLIENT_VERSION" >&2 ||
    die "pip install failed (is the Python package index reachable? see pip's output above)"

log "installing memento-client@$NPM_CLIENT_VERSION with npm $(npm --version)"
rm -rf "$DIR/node"
mkdir -p "$DIR/node"
printf '{"name":"memento-clients","private":true}\n' >"$DIR/node/package.json"
(cd "$DIR/node" && npm install --no-audit --no-fund --save-exact --loglevel=error \
    "memento-client@$NPM_CLIENT_VERSION" >&2) ||
    die "npm install failed (is the npm registry reachable? see npm's output above)"

"$DIR/venv/bin/python" -c 'from memento_client import MementoClient' ||
    die "importing memento_client failed (see above)"
(cd "$DIR/node" && node -e 'require("memento-client")') || die "requiring memento-client failed"
printf '%s\n' "$STAMP_WANT" >"$STAMP"
log "ok: memento_client $PY_CLIENT_VERSION, memento-client $NPM_CLIENT_VERSION"
printf '%s\n' "$DIR"
