#!/usr/bin/env bash
# Publish speed of a Source over an S3-compatible bucket against one over a directory (issue 15
# item 4): N objects of 1 KiB (default 10,000) put under a fresh prefix of the Garage bucket of
# scripts/s3.sh and written as files, then each published once into a new state (scan + every
# document) through the library (crates/source/examples/s3_inventory_publish.rs). Kinds:
# directory; s3 (md5 from the ETags: no object read); s3-etag-ignore (every object read and
# hashed, as files are); s3-to-s3 (as s3, the documents put into the bucket).
# Prints per kind: resources, seconds, resources/s; then the ratios to the directory.
# Usage: [PROFILE=release|dev] bench/s3-inventory-publish.sh [N]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/bench/common.sh"
N="${1:-10000}"
PROFILE="${PROFILE:-release}"
URL="${RESOURCESYNC_TEST_S3:-$("$ROOT/scripts/s3.sh")}"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
log "load $(load); N=$N; profile $PROFILE"
flag=(); [ "$PROFILE" = release ] && flag=(--release)
(cd "$ROOT" && cargo build -q "${flag[@]}" -p resourcesync-source --example s3_inventory_publish)
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
DIRNAME=release; [ "$PROFILE" = release ] || DIRNAME=debug
"$TARGET/$DIRNAME/examples/s3_inventory_publish" "$URL" "$N" "$W" | tee "$W/out"
awk '
  { rate[$1] = $4 }
  END {
    if (rate["directory"] > 0) {
      for (k in rate) if (k != "directory") printf "ratio %s/directory %.2f\n", k, rate[k] / rate["directory"]
    }
  }' "$W/out"
