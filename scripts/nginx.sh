#!/usr/bin/env bash
# Find (or install) nginx for the test of the README's "Publish a folder behind nginx" example
# (crates/cli/tests/it/nginx_publish.rs: nginx's worker runs as an unprivileged user and must
# be able to read every document and copy we write).
#
# Usage: scripts/nginx.sh
#   stdout: the path of the nginx binary (one line) on success, nothing else
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# First that works: $NGINX (explicit), `nginx` on PATH, /usr/sbin/nginx. Without one, as root,
# Debian's `nginx-light` (or `nginx`) package is installed (apt-get, once; a policy-rc.d keeps
# the package from starting a system nginx); otherwise the script says what to install.
set -euo pipefail

log() { printf 'nginx: %s\n' "$*" >&2; }
die() { printf 'nginx: ERROR: %s\n' "$*" >&2; exit 1; }

find_nginx() {
    if [ -n "${NGINX:-}" ]; then
        [ -x "$NGINX" ] && { printf '%s\n' "$NGINX"; return 0; }
        die "NGINX=$NGINX is not an executable"
    fi
    if command -v nginx >/dev/null 2>&1; then
        command -v nginx
        return 0
    fi
    [ -x /usr/sbin/nginx ] && { printf '%s\n' /usr/sbin/nginx; return 0; }
    return 1
}

if ! BIN="$(find_nginx)"; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing Debian's nginx package"
        export DEBIAN_FRONTEND=noninteractive
        # Serialised: two test runs must not run apt-get at once.
        exec 9>/var/lock/resourcesync-nginx.lock
        flock 9
        if ! BIN="$(find_nginx)"; then
            # No service started by the package's scripts (a container has no init anyway).
            policy=/usr/sbin/policy-rc.d
            if [ ! -e "$policy" ]; then
                printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
                trap 'rm -f "$policy"' EXIT
            fi
            # Waits for another apt-get (another test run's Chromium, say) rather than failing.
            apt=(apt-get -o DPkg::Lock::Timeout=900 -y -qq)
            "${apt[@]}" update >&2 || die "apt-get update failed"
            "${apt[@]}" install --no-install-recommends nginx-light >&2 \
                || "${apt[@]}" install --no-install-recommends nginx >&2 \
                || die "apt-get install nginx failed"
            BIN="$(find_nginx)" || die "nginx installed, but not found"
        fi
    else
        die "no nginx: install Debian's nginx package (apt-get install nginx-light) or set NGINX"
    fi
fi
"$BIN" -v >&2 || die "$BIN -v failed"
printf '%s\n' "$BIN"
