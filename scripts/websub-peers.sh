#!/usr/bin/env bash
# Install the third-party WebSub peer (flask-websub, a hub, publisher and subscriber on Flask)
# into <repo>/.venv-websub, idempotently, for the interop tests of crates/cli/tests/it/interop_websub.rs.
#
# Usage: scripts/websub-peers.sh
#   stdout: the venv path (one line) on success, nothing else
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# A venv of its own (not .venv-peers): flask-websub's dependencies (Flask, requests, ...) must
# not move the pins of the resync reference peers. Interpreter: $WEBSUB_PYTHON, else python3.
# Safe against concurrent runs (flock on the venv directory).
set -euo pipefail

FLASK_WEBSUB_VERSION="0.4.1"
# Transitive dependencies, pinned so that every machine gets the same peer.
CONSTRAINTS="Flask==3.1.3
Werkzeug==3.1.3
Jinja2==3.1.6
MarkupSafe==3.0.4
itsdangerous==2.2.0
click==8.5.1
blinker==1.9.0
requests==2.32.3
urllib3==2.8.0
idna==3.20
certifi==2026.10.18
charset-normalizer==3.5.2"
RECIPE_VERSION="1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-websub"
log() { printf 'websub-peers: %s\n' "$*" >&2; }
die() { printf 'websub-peers: ERROR: %s\n' "$*" >&2; exit 1; }

PYTHON="${WEBSUB_PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON (set WEBSUB_PYTHON)"
PYVER="$("$PYTHON" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
STAMP_WANT="recipe=$RECIPE_VERSION
python=$PYVER
flask-websub==$FLASK_WEBSUB_VERSION
$CONSTRAINTS"
STAMP="$VENV/.websub-stamp"

venv_ok() {
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_WANT" ] && [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" -c 'import flask_websub.hub, flask_websub.subscriber' 2>/dev/null
}
if venv_ok; then printf '%s\n' "$VENV"; exit 0; fi

mkdir -p "$VENV"
if command -v flock >/dev/null 2>&1; then
    exec 9<"$VENV"
    flock 9
    if venv_ok; then printf '%s\n' "$VENV"; exit 0; fi
fi
log "creating $VENV with Python $PYVER"
rm -f "$STAMP"
"$PYTHON" -m venv --clear "$VENV" >&2 || die "'$PYTHON -m venv' failed (apt-get install python3-venv?)"
printf '%s\n' "$CONSTRAINTS" >"$VENV/constraints.txt"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
log "installing flask-websub==$FLASK_WEBSUB_VERSION"
"$VENV/bin/python" -m pip install --quiet --progress-bar off --no-input \
    --constraint "$VENV/constraints.txt" "flask-websub==$FLASK_WEBSUB_VERSION" >&2 \
    || die "pip install failed (see above)"
"$VENV/bin/python" -c 'import flask_websub.hub, flask_websub.subscriber' >&2 \
    || die "importing flask_websub failed (see above)"
printf '%s\n' "$STAMP_WANT" >"$STAMP"
log "ok: flask-websub $FLASK_WEBSUB_VERSION, Python $PYVER"
printf '%s\n' "$VENV"
