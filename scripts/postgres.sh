#!/usr/bin/env bash
# Start (or reuse) the PostgreSQL server of the tests: a throwaway cluster on 127.0.0.1, trust
# authentication for loopback only, kept running between runs (like the Python peers' venv).
#
# Usage: scripts/postgres.sh          start or reuse; prints the URL
#        scripts/postgres.sh stop     stop the server (its directory is kept)
#   stdout: postgres://USER@127.0.0.1:PORT/postgres (one line) on success, nothing else
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# The server binaries (initdb, pg_ctl, pg_isready), first found: $PG_BINDIR, the directory of
# `pg_ctl` on PATH, the newest /usr/lib/postgresql/*/bin. Without them, as root, Debian's
# `postgresql` package is installed (apt-get); otherwise the script says what to install.
#
# PostgreSQL refuses to run as root: as root the cluster belongs to the system user
# `resourcesync-test` (created with useradd when missing) and lives in
# /var/tmp/resourcesync-postgres; otherwise it belongs to the caller and lives in
# ${XDG_CACHE_HOME:-~/.cache}/resourcesync-postgres. $RESOURCESYNC_POSTGRES_DIR overrides the
# directory. The port is a free one picked at start (PostgreSQL cannot bind port 0), retried on a
# conflict, and kept in DIR/port. Durability is off (fsync, synchronous_commit): a test
# server's data is thrown away. Concurrent runs are serialised by flock on DIR/lock.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'postgres: %s\n' "$*" >&2; }
die() { printf 'postgres: ERROR: %s\n' "$*" >&2; exit 1; }
cd "$ROOT"

# ------------------------------------------------------------------ binaries
has_bins() { [ -n "$1" ] && [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/pg_isready" ]; }
find_bindir() {
    local d
    if [ -n "${PG_BINDIR:-}" ]; then
        has_bins "$PG_BINDIR" && { printf '%s\n' "$PG_BINDIR"; return 0; }
        die "PG_BINDIR=$PG_BINDIR has no initdb, pg_ctl and pg_isready"
    fi
    if command -v pg_ctl >/dev/null 2>&1; then
        d="$(dirname "$(readlink -f "$(command -v pg_ctl)")")"
        has_bins "$d" && { printf '%s\n' "$d"; return 0; }
    fi
    while IFS= read -r d; do
        has_bins "$d" && { printf '%s\n' "$d"; return 0; }
    done < <(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r)
    return 1
}
if ! BINDIR="$(find_bindir)"; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing Debian's postgresql package"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 || die "apt-get update failed"
        apt-get install -y -qq postgresql >&2 || die "apt-get install postgresql failed"
        BINDIR="$(find_bindir)" || die "postgresql installed, but no initdb/pg_ctl found"
    else
        die "no PostgreSQL server binaries (initdb, pg_ctl): install Debian's postgresql package (apt-get install postgresql) or set PG_BINDIR"
    fi
fi

# ---------------------------------------------------------- user, directory
if [ "$(id -u)" = 0 ]; then
    PGUSER_NAME="resourcesync-test"
    if ! id -u "$PGUSER_NAME" >/dev/null 2>&1; then
        log "creating the system user $PGUSER_NAME"
        useradd --system --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$PGUSER_NAME" >&2 || die "useradd $PGUSER_NAME failed"
    fi
    DIR="${RESOURCESYNC_POSTGRES_DIR:-/var/tmp/resourcesync-postgres}"
    as_user() { (cd "$DIR" && runuser -u "$PGUSER_NAME" -- "$@"); }
else
    PGUSER_NAME="$(id -un)"
    DIR="${RESOURCESYNC_POSTGRES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/resourcesync-postgres}"
    as_user() { (cd "$DIR" && "$@"); }
fi
DATA="$DIR/data"
PORT_FILE="$DIR/port"
mkdir -p "$DIR"
if [ "$(id -u)" = 0 ]; then
    chown -R "$PGUSER_NAME" "$DIR"
fi
chmod 700 "$DIR"

url() { printf 'postgres://%s@127.0.0.1:%s/postgres\n' "$PGUSER_NAME" "$1"; }
running() { as_user "$BINDIR/pg_ctl" status -D "$DATA" >/dev/null 2>&1; }
healthy() {
    [ -s "$PORT_FILE" ] && running &&
        "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$(cat "$PORT_FILE")" -U "$PGUSER_NAME" -d postgres
}

if [ "${1:-}" = stop ]; then
    if [ -f "$DATA/PG_VERSION" ] && running; then
        as_user "$BINDIR/pg_ctl" stop -D "$DATA" -m fast -w >&2
    fi
    exit 0
fi
[ $# -eq 0 ] || die "usage: scripts/postgres.sh [stop]"

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

# ---------------------------------------------------------------- the cluster
if [ ! -f "$DATA/PG_VERSION" ]; then
    rm -rf "$DATA"
    log "initdb in $DATA (as $PGUSER_NAME, $("$BINDIR/postgres" --version 2>/dev/null || echo "$BINDIR"))"
    # Trust authentication: the server listens on 127.0.0.1 and its own socket directory only.
    as_user "$BINDIR/initdb" -D "$DATA" -U "$PGUSER_NAME" --auth=trust -E UTF8 --locale=C \
        >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
fi
if running; then  # up, but not answering on the port recorded: start it again
    log "restarting a server that does not answer"
    as_user "$BINDIR/pg_ctl" stop -D "$DATA" -m fast -w >&2 || true
fi

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
for attempt in 1 2 3 4 5; do
    PORT="$(free_port)" || die "python3 is needed to pick a free port"
    log "starting on 127.0.0.1:$PORT (attempt $attempt)"
    if as_user "$BINDIR/pg_ctl" start -D "$DATA" -w -t 60 -l "$DIR/server.log" \
        -o "-p $PORT -c listen_addresses=127.0.0.1 -k $DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        >&2 9>&-; then
        printf '%s\n' "$PORT" >"$PORT_FILE"
        if healthy; then
            url "$PORT"
            exit 0
        fi
        as_user "$BINDIR/pg_ctl" stop -D "$DATA" -m fast -w >&2 || true
    fi
    # Most likely the port was taken meanwhile: try another.
    tail -n 5 "$DIR/server.log" >&2 2>/dev/null || true
done
die "the server did not start (see $DIR/server.log)"
