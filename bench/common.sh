# Shared by the bench scripts (sourced, not run): logging, the load average, and our release
# binary (BENCH_BIN, or built here, retried BUILD_TRIES times BUILD_WAIT seconds apart: a
# loaded machine sometimes fails a link for lack of memory).
# Needs ROOT (the repository) set by the caller.

log() { printf '== %s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# Sets BIN to our binary, or exits 1 saying why.
our_binary() {
    if [ -n "${BENCH_BIN:-}" ]; then
        BIN="$BENCH_BIN"
        [ -x "$BIN" ] || { echo "error: BENCH_BIN=$BIN is not executable" >&2; exit 1; }
    else
        BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/resourcesync"
        case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
        local built=0 try
        for ((try = 1; try <= ${BUILD_TRIES:-1}; try++)); do
            log "cargo build --release -p resourcesync-cli (try $try/${BUILD_TRIES:-1})"
            if cargo build --release -p resourcesync-cli >&2; then built=1; break; fi
            [ "$try" -lt "${BUILD_TRIES:-1}" ] && sleep "${BUILD_WAIT:-60}"
        done
        [ "$built" = 1 ] && [ -x "$BIN" ] || { echo "error: could not build $BIN (output above)" >&2; exit 1; }
    fi
    log "binary: $BIN"
}
