#!/usr/bin/env bash
# Exercises what packaging/ and docs/operations.md tell an operator to do (CI runs it after the
# tests, reusing their build where it can):
#   1. `cargo install --path crates/cli` into a scratch root; the installed binary runs `demo`;
#   2. the systemd unit passes `systemd-analyze verify` (skipped, said so, without systemd);
#   3. the container image builds and its binary runs `demo` (skipped, said so, without a
#      running container engine).
# Usage: packaging/check.sh   (PROFILE=dist to install as a release is built; default: dev,
# quick)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
profile_flag=(--debug)
if [ "${PROFILE:-dev}" != dev ]; then profile_flag=(--profile "$PROFILE"); fi

echo "== cargo install --path crates/cli (${PROFILE:-dev})"
start=$SECONDS
cargo install --quiet --locked --offline --path crates/cli --root "$root" \
    --target-dir "${CARGO_TARGET_DIR:-target}" "${profile_flag[@]}"
echo "installed in $((SECONDS - start)) s"
bin="$root/bin/resourcesync"
"$bin" --version
"$bin" demo -q
echo "installed binary: demo ok"

echo "== systemd unit"
if command -v systemd-analyze >/dev/null 2>&1; then
    # The unit as installed, its ExecStart pointed at the binary just installed.
    unit_dir="$root/units"
    mkdir -p "$unit_dir"
    sed "s#/usr/local/bin/resourcesync#$bin#" packaging/resourcesync-serve.service \
        > "$unit_dir/resourcesync-serve.service"
    out=$(systemd-analyze verify --man=no "$unit_dir/resourcesync-serve.service" 2>&1 || true)
    # Messages about other units of this machine are not the unit's.
    own=$(printf '%s\n' "$out" | grep -F 'resourcesync-serve.service' || true)
    if [ -n "$own" ]; then
        printf '%s\n' "$own"
        echo "systemd-analyze verify: the unit has problems" >&2
        exit 1
    fi
    echo "systemd-analyze verify: ok"
    # The exposure score of the hardening (0 best, 10 worst; fails above 2.0, given as 20);
    # older systemd has no --offline.
    if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
        systemd-analyze security --offline=yes --threshold=20 --no-pager \
            "$unit_dir/resourcesync-serve.service" | tail -1
    fi
    # The sample configuration parses, as the unit's ExecStart would read it.
    "$bin" serve --config packaging/serve.toml --print-config >/dev/null
    echo "packaging/serve.toml: ok"
else
    echo "SKIPPED: systemd-analyze not found; the unit was not verified"
fi

echo "== container image"
engine=""
for e in docker podman; do
    if command -v "$e" >/dev/null 2>&1 && "$e" info >/dev/null 2>&1; then engine=$e; break; fi
done
if [ -z "$engine" ]; then
    echo "SKIPPED: no running container engine (docker or podman); packaging/Dockerfile not built"
else
    "$engine" build -f packaging/Dockerfile -t resourcesync:check .
    "$engine" run --rm resourcesync:check demo -q
    echo "container image: demo ok"
fi
