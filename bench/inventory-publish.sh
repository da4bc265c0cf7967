#!/usr/bin/env bash
# Publish speed of a Source over PostgreSQL against one over a directory (issue 15 item 3):
# N resources of 1 KiB (default 100,000) loaded as rows of a table (path, body, updated_at,
# md5) and written as files, then each published once into a new state and output directory
# (scan + every document) through the library (crates/source/examples/inventory_publish.rs).
# Kinds: directory; postgres (md5 from its column: bodies not read); postgres-no-md5 (the same
# table through a view without md5: every body read from the server and hashed, as files are).
# Prints per kind: resources, seconds, resources/s; then the ratios to the directory.
# Usage: [PROFILE=release|dev] bench/inventory-publish.sh [N]
#   The server: $RESOURCESYNC_TEST_POSTGRES, or the one scripts/postgres.sh starts.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
N="${1:-100000}"
PROFILE="${PROFILE:-release}"
URL="${RESOURCESYNC_TEST_POSTGRES:-$("$ROOT/scripts/postgres.sh")}"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
log "load $(load); N=$N; profile $PROFILE; server $URL"
flag=(); [ "$PROFILE" = release ] && flag=(--release)
(cd "$ROOT" && cargo build -q "${flag[@]}" -p resourcesync-source --example inventory_publish)
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
DIRNAME=release; [ "$PROFILE" = release ] || DIRNAME=debug
"$TARGET/$DIRNAME/examples/inventory_publish" "$URL" "$N" "$W" | tee "$W/out"
awk '
  { rate[$1] = $4 }
  END {
    if (rate["directory"] > 0) {
      printf "ratio postgres/directory %.2f\n", rate["postgres"] / rate["directory"]
      printf "ratio postgres-no-md5/directory %.2f\n", rate["postgres-no-md5"] / rate["directory"]
    }
  }' "$W/out"
