#!/usr/bin/env bash
# Find (or install) a headless Chromium for the browser tests (the aggregator's page).
#
# Usage: scripts/chromium.sh
#   stdout: the path of the chromium binary (one line) on success, nothing else
#   stderr: progress and errors
#   exit:   0 ok; non-zero with a message on failure
#
# First that works: $CHROMIUM (explicit), `chromium` or `chromium-browser` on PATH. Without
# one, as root, Debian's `chromium` package is installed (apt-get; about a minute, once);
# otherwise the script says what to install.
set -euo pipefail

log() { printf 'chromium: %s\n' "$*" >&2; }
die() { printf 'chromium: ERROR: %s\n' "$*" >&2; exit 1; }

find_chromium() {
    if [ -n "${CHROMIUM:-}" ]; then
        [ -x "$CHROMIUM" ] && { printf '%s\n' "$CHROMIUM"; return 0; }
        die "CHROMIUM=$CHROMIUM is not an executable"
    fi
    local c
    for c in chromium chromium-browser; do
        if command -v "$c" >/dev/null 2>&1; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

if ! BIN="$(find_chromium)"; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing Debian's chromium package"
        export DEBIAN_FRONTEND=noninteractive
        # Serialised: two test runs must not run apt-get at once.
        exec 9>/var/lock/resourcesync-chromium.lock
        flock 9
        if ! BIN="$(find_chromium)"; then
            apt-get update -qq >&2 || die "apt-get update failed"
            apt-get install -y -qq --no-install-recommends chromium >&2 \
                || die "apt-get install chromium failed"
            BIN="$(find_chromium)" || die "chromium installed, but not found on PATH"
        fi
    else
        die "no chromium: install Debian's chromium package (apt-get install chromium) or set CHROMIUM"
    fi
fi
"$BIN" --version >&2 || die "$BIN --version failed"
printf '%s\n' "$BIN"
