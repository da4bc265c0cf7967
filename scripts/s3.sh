#!/usr/bin/env bash
# Start (or reuse) the S3-compatible server of the tests: a single-node Garage
# (https://garagehq.deuxfleurs.fr, the object store self-hosted users run) on 127.0.0.1, kept
# running between runs (like the PostgreSQL server of scripts/postgres.sh).
#
# Usage: scripts/s3.sh          start or reuse; prints the URL
#        scripts/s3.sh stop     stop the server (its directory is kept)
#   stdout: s3://KEY_ID:SECRET@127.0.0.1:PORT/resourcesync-test?region=garage (one line) on
#           success, nothing else: the access key, its secret, the S3 API's port, the bucket
#           and the region, as `S3Store::open` (crates/store) reads it
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# Garage is built once from crates.io with cargo (it is a Rust crate; no binary package) into
# ${XDG_CACHE_HOME:-~/.cache}/resourcesync/garage-2.5.0 ($GARAGE_BIN overrides the binary):
#   cargo install garage --version 2.5.0 --locked --no-default-features \
#       --features bundled-libs,sqlite --root ${XDG_CACHE_HOME:-~/.cache}/resourcesync/garage-2.5.0
# The first build takes about 13.5 minutes on 2 shared cores (measured: real 13m27s), then the
# binary is reused. With it cached, a first start (layout, key and bucket made) takes about
# 1.3 s, a start after `stop` 0.8 s, a reuse of the running server 0.2 s.
#
# The server: metadata (SQLite) and data in $RESOURCESYNC_S3_DIR (default
# /var/tmp/resourcesync-s3), replication factor 1, no fsync (a test server's data is thrown
# away), the S3 API, RPC and admin API on free ports of 127.0.0.1 picked at start (kept in
# DIR/ports). At the first start the layout is assigned and applied, then an access key
# `resourcesync-test` and a bucket `resourcesync-test` (read, write, owner) are made; the key
# and its secret are kept in DIR/credentials (mode 600). Concurrent runs are serialised by
# flock on DIR/lock. Tests isolate themselves by a random prefix in the bucket. A second
# bucket, `resourcesync-test-full`, holds at most 20 objects (a quota): the tests of a bucket
# that fills up use it, and empty it before and after.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 's3: %s\n' "$*" >&2; }
die() { printf 's3: ERROR: %s\n' "$*" >&2; exit 1; }
cd "$ROOT"

VERSION=2.5.0
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/resourcesync/garage-$VERSION"
BIN="${GARAGE_BIN:-$CACHE/bin/garage}"
DIR="${RESOURCESYNC_S3_DIR:-/var/tmp/resourcesync-s3}"
CONF="$DIR/garage.toml"
PORTS="$DIR/ports"
CREDS="$DIR/credentials"
PIDFILE="$DIR/pid"
BUCKET=resourcesync-test
KEYNAME=resourcesync-test
REGION=garage

mkdir -p "$DIR"
chmod 700 "$DIR"

g() { "$BIN" -c "$CONF" "$@"; }
alive() { [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }
port_open() {
    python3 -c 'import socket,sys; s=socket.socket(); s.settimeout(1); sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"
}
s3_port() { sed -n 's/^s3=//p' "$PORTS"; }
url() {
    # shellcheck disable=SC1090
    . "$CREDS"
    printf 's3://%s:%s@127.0.0.1:%s/%s?region=%s\n' "$KEY_ID" "$SECRET" "$(s3_port)" "$BUCKET" "$REGION"
}
healthy() { alive && [ -s "$PORTS" ] && [ -s "$CREDS" ] && port_open "$(s3_port)"; }
# A second bucket with a quota of 20 objects, for the tests of a bucket that fills up
# (crates/aggregate/tests/it/outage.rs): `resourcesync-test-full`, same key. Made when missing,
# also on servers set up before it existed.
full_bucket() {
    local FULL="$BUCKET-full"
    [ -f "$DIR/full-bucket" ] && return 0
    g bucket info "$FULL" >/dev/null 2>&1 || g bucket create "$FULL" >>"$DIR/setup.log" 2>&1 ||
        { tail -n 20 "$DIR/setup.log" >&2; die "garage bucket create $FULL failed"; }
    g bucket allow --read --write --owner "$FULL" --key "$KEYNAME" >>"$DIR/setup.log" 2>&1 ||
        { tail -n 20 "$DIR/setup.log" >&2; die "garage bucket allow $FULL failed"; }
    g bucket set-quotas --max-objects 20 "$FULL" >>"$DIR/setup.log" 2>&1 ||
        { tail -n 20 "$DIR/setup.log" >&2; die "garage bucket set-quotas $FULL failed"; }
    touch "$DIR/full-bucket"
}

if [ "${1:-}" = stop ]; then
    if alive; then
        pid="$(cat "$PIDFILE")"
        kill "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$PIDFILE"
    fi
    exit 0
fi
[ $# -eq 0 ] || die "usage: scripts/s3.sh [stop]"

if healthy && [ -f "$DIR/full-bucket" ]; then
    url
    exit 0
fi

exec 9>"$DIR/lock"
flock 9
if healthy; then  # another run started it while we waited (or a server set up before the
    full_bucket   # second bucket existed)
    url
    exit 0
fi

# ------------------------------------------------------------------ the binary
if [ ! -x "$BIN" ]; then
    command -v cargo >/dev/null 2>&1 || die "cargo is needed to build Garage (or set GARAGE_BIN)"
    log "building Garage $VERSION into $CACHE (once; about 15 minutes on 2 cores)"
    cargo install garage --version "$VERSION" --locked --no-default-features \
        --features bundled-libs,sqlite --root "$CACHE" >&2 || die "cargo install garage failed"
    [ -x "$BIN" ] || die "cargo install garage made no $BIN"
fi

# ---------------------------------------------------------------- the server
if alive; then  # up, but not answering: start it again
    log "restarting a server that does not answer"
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    for _ in $(seq 100); do alive || break; sleep 0.1; done
fi

free_ports() {
    python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss: s.close()'
}
write_conf() {
    local secret
    if [ -s "$DIR/rpc_secret" ]; then
        secret="$(cat "$DIR/rpc_secret")"
    else
        secret="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
        printf '%s\n' "$secret" >"$DIR/rpc_secret"
    fi
    cat >"$CONF" <<EOF
metadata_dir = "$DIR/meta"
data_dir = "$DIR/data"
db_engine = "sqlite"
metadata_fsync = false
data_fsync = false
replication_factor = 1
rpc_bind_addr = "127.0.0.1:$2"
rpc_public_addr = "127.0.0.1:$2"
rpc_secret = "$secret"

[s3_api]
s3_region = "$REGION"
api_bind_addr = "127.0.0.1:$1"
root_domain = ".s3.localhost"

[admin]
api_bind_addr = "127.0.0.1:$3"
EOF
    chmod 600 "$CONF" "$DIR/rpc_secret"
    printf 's3=%s\nrpc=%s\nadmin=%s\n' "$1" "$2" "$3" >"$PORTS"
}

started=
for attempt in 1 2 3 4 5; do
    # shellcheck disable=SC2046
    set -- $(free_ports) || die "python3 is needed to pick free ports"
    write_conf "$1" "$2" "$3"
    log "starting Garage on 127.0.0.1:$1 (S3), :$2 (RPC), :$3 (admin) (attempt $attempt)"
    RUST_LOG="${RUST_LOG:-garage=warn}" setsid "$BIN" -c "$CONF" server \
        >>"$DIR/server.log" 2>&1 </dev/null 9>&- &
    printf '%s\n' "$!" >"$PIDFILE"
    # Ready once the CLI reaches it over RPC (bounded: 30 s).
    for _ in $(seq 300); do
        alive || break
        if g status >/dev/null 2>&1 && port_open "$1"; then started=1; break; fi
        sleep 0.1
    done
    [ -n "$started" ] && break
    # Most likely a port was taken meanwhile: try others.
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    tail -n 5 "$DIR/server.log" >&2 2>/dev/null || true
done
[ -n "$started" ] || die "the server did not start (see $DIR/server.log)"

# ------------------------------------------------- layout, key, bucket (once)
if [ ! -f "$DIR/layout-applied" ]; then
    node="$(g node id -q 2>/dev/null | head -n 1)"
    node="${node%%@*}"
    [ -n "$node" ] || die "no node id from 'garage node id'"
    log "assigning the layout to node ${node:0:16}"
    g layout assign -z dc1 -c 100G "$node" >>"$DIR/setup.log" 2>&1 ||
        { tail -n 20 "$DIR/setup.log" >&2; die "garage layout assign failed"; }
    g layout apply --version 1 >>"$DIR/setup.log" 2>&1 ||
        { tail -n 20 "$DIR/setup.log" >&2; die "garage layout apply failed"; }
    touch "$DIR/layout-applied"
fi
if [ ! -s "$CREDS" ]; then
    log "creating the access key $KEYNAME and the bucket $BUCKET"
    g key info --show-secret "$KEYNAME" >/dev/null 2>&1 || g key create "$KEYNAME" >/dev/null ||
        die "garage key create failed"
    info="$(g key info --show-secret "$KEYNAME")" || die "garage key info failed"
    key_id="$(printf '%s\n' "$info" | sed -n 's/^Key ID:[[:space:]]*//p' | head -n 1)"
    secret="$(printf '%s\n' "$info" | sed -n 's/^Secret key:[[:space:]]*//p' | head -n 1)"
    [ -n "$key_id" ] && [ -n "$secret" ] || die "no key id or secret in 'garage key info' (format changed?)"
    g bucket info "$BUCKET" >/dev/null 2>&1 || g bucket create "$BUCKET" >>"$DIR/setup.log" 2>&1 ||
        { tail -n 20 "$DIR/setup.log" >&2; die "garage bucket create failed"; }
    g bucket allow --read --write --owner "$BUCKET" --key "$KEYNAME" >>"$DIR/setup.log" 2>&1 ||
        { tail -n 20 "$DIR/setup.log" >&2; die "garage bucket allow failed"; }
    umask 077
    printf 'KEY_ID=%s\nSECRET=%s\n' "$key_id" "$secret" >"$CREDS.new"
    mv "$CREDS.new" "$CREDS"
fi
full_bucket
healthy || die "the server does not answer after start (see $DIR/server.log)"
url
