#!/usr/bin/env bash
# Install the Python reference peers (resync 2.0.1, resync-simulator) into
# <repo>/.venv-peers, idempotently.
#
# Usage: scripts/python-peers.sh
#   stdout: the venv path (one line) on success, nothing else
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# A second run with nothing changed is a fast no-op (a stamp file records the
# interpreter and the pins; one short python start checks the installed
# versions). Safe under `set -euo pipefail`, with no TTY (CI), and against
# concurrent runs (flock on the venv directory).
#
# Interpreter, first that works:
#   $PEERS_PYTHON (explicit override)
#   $(pyenv root)/versions/3.10.*/bin/python3 (highest patch)
#   python3.10 on PATH
#   python3 on PATH (warned: the peers are meant to run on 3.10)
#
# Pins: resync and resync-simulator are pinned, and so are their transitive
# dependencies (constraints below), so that every machine gets the same
# reference behaviour. python-dateutil is held at 2.9.0.post0, the long-standing
# 2.x line resync 2.0.1 was written against (resync only declares >=1.5, which
# an unpinned install resolves to the newer 3.0.0 major); tornado is pinned
# because resync-simulator 1.1.0 relies on AnyThreadEventLoopPolicy, deprecated
# in tornado 6.x.
set -euo pipefail

RESYNC_VERSION="2.0.1"
SIMULATOR_VERSION="1.1.0"
# Transitive dependencies (pip constraints: they only pin, never add).
CONSTRAINTS="defusedxml==0.7.1
python-dateutil==2.9.0.post0
six==1.17.0
tornado==6.5.10
PyYAML==6.0.3"
# Bump when the install procedure changes, to force a rebuild everywhere.
RECIPE_VERSION="1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-peers"

log() { printf 'python-peers: %s\n' "$*" >&2; }
die() { printf 'python-peers: ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- interpreter
python_works() {  # $1: candidate; true if it runs and is Python >= 3.8
    [ -n "$1" ] && [ -x "$1" ] || command -v "$1" >/dev/null 2>&1 || return 1
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' >/dev/null 2>&1
}

find_python() {
    if [ -n "${PEERS_PYTHON:-}" ]; then
        printf '%s\n' "$PEERS_PYTHON"; return 0
    fi
    local pyroot="" cand
    if command -v pyenv >/dev/null 2>&1; then
        pyroot="$(pyenv root 2>/dev/null || true)"
    fi
    pyroot="${pyroot:-${PYENV_ROOT:-$HOME/.pyenv}}"
    if [ -d "$pyroot/versions" ]; then
        # highest 3.10.x patch first
        while IFS= read -r cand; do
            if python_works "$cand"; then printf '%s\n' "$cand"; return 0; fi
        done < <(find "$pyroot/versions" -mindepth 3 -maxdepth 3 -path "$pyroot/versions/3.10.*/bin/python3" 2>/dev/null | sort -V -r)
    fi
    for cand in python3.10 python3; do
        if python_works "$cand"; then command -v "$cand"; return 0; fi
    done
    return 1
}

if [ -n "${PEERS_PYTHON:-}" ] && ! python_works "$PEERS_PYTHON"; then
    die "PEERS_PYTHON=$PEERS_PYTHON is not a working Python >= 3.8"
fi
BASE_PY="$(find_python)" || die "no usable Python found (tried \$(pyenv root)/versions/3.10.*, python3.10, python3)"
BASE_VER="$("$BASE_PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')" \
    || die "cannot run $BASE_PY"
case "$BASE_VER" in
    3.10.*) ;;
    *) log "WARNING: using Python $BASE_VER ($BASE_PY); the peers are meant to run on 3.10" ;;
esac

STAMP_WANT="recipe=$RECIPE_VERSION
venv=$VENV
python=$BASE_VER
resync==$RESYNC_VERSION
resync-simulator==$SIMULATOR_VERSION
$CONSTRAINTS"
STAMP="$VENV/.peers-stamp"

# Checks the installed distributions against the pins (one python start).
VERSIONS_CHECK='
import sys
from importlib.metadata import version, PackageNotFoundError
want = dict(a.split("==", 1) for a in sys.argv[1:])
bad = []
for name, v in want.items():
    try:
        got = version(name)
    except PackageNotFoundError:
        got = None
    if got != v:
        bad.append("%s: want %s, have %s" % (name, v, got))
if bad:
    print("; ".join(bad), file=sys.stderr)
    sys.exit(1)
'
pin_args() {
    printf '%s\n' "resync==$RESYNC_VERSION" "resync-simulator==$SIMULATOR_VERSION" $CONSTRAINTS
}

venv_ok() {  # fast path: stamp matches and installed versions match the pins
    [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/resync-sync" ] || return 1
    [ "$(cat "$STAMP")" = "$STAMP_WANT" ] || return 1
    local args
    mapfile -t args < <(pin_args)
    "$VENV/bin/python" -c "$VERSIONS_CHECK" "${args[@]}" 2>/dev/null
}

if venv_ok; then
    printf '%s\n' "$VENV"
    exit 0
fi

# ------------------------------------------------------------------- install
mkdir -p "$VENV"
if command -v flock >/dev/null 2>&1; then
    # Lock the directory itself (venv --clear empties it but keeps the inode).
    exec 9<"$VENV"
    flock 9
    if venv_ok; then  # another run finished it while we waited
        printf '%s\n' "$VENV"
        exit 0
    fi
fi

log "creating $VENV with Python $BASE_VER ($BASE_PY)"
rm -f "$STAMP"
if ! "$BASE_PY" -m venv --clear "$VENV" >&2; then
    die "'$BASE_PY -m venv' failed; for a Debian system python install the venv module (apt-get install python3-venv), or set PEERS_PYTHON to another interpreter"
fi
PY="$VENV/bin/python"
[ -x "$PY" ] || die "venv created without $PY"

CONSTRAINTS_FILE="$VENV/peers-constraints.txt"
printf '%s\n' "$CONSTRAINTS" >"$CONSTRAINTS_FILE"

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
log "installing resync==$RESYNC_VERSION resync-simulator==$SIMULATOR_VERSION"
if ! "$PY" -m pip install --quiet --progress-bar off --no-input \
        --constraint "$CONSTRAINTS_FILE" \
        "resync==$RESYNC_VERSION" "resync-simulator==$SIMULATOR_VERSION" >&2; then
    die "pip install failed (is PyPI reachable? see the pip output above)"
fi

# ------------------------------------------------------------------- verify
mapfile -t PINS < <(pin_args)
"$PY" -c "$VERSIONS_CHECK" "${PINS[@]}" || die "installed versions do not match the pins (see above)"
"$PY" - <<'EOF' >&2 || die "importing resync / simulator failed (see the traceback above)"
import resync, resync.client, resync.resource_list, resync.sitemap
import simulator, simulator.source, simulator.http
assert resync.__version__ == "2.0.1", resync.__version__
from resync.resource_list import ResourceList
rl = ResourceList()
rl.parse(str_data='<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
         'xmlns:rs="http://www.openarchives.org/rs/terms/">'
         '<rs:md capability="resourcelist"/><url><loc>http://example.com/a</loc>'
         '<lastmod>2024-01-01T00:00:00Z</lastmod><rs:md length="3"/></url></urlset>')
assert len(rl) == 1 and rl.resources["http://example.com/a"].length == 3
EOF
"$VENV/bin/resync-sync" --help >/dev/null 2>&1 || die "'$VENV/bin/resync-sync --help' failed"
"$VENV/bin/resync-simulator" --help >/dev/null 2>&1 || die "'$VENV/bin/resync-simulator --help' failed"

printf '%s\n' "$STAMP_WANT" >"$STAMP"
log "ok: resync $RESYNC_VERSION, resync-simulator $SIMULATOR_VERSION, Python $BASE_VER"
printf '%s\n' "$VENV"
