#!/usr/bin/env bash
# The S3 store against the file system (issue 16: a baseline of 10,000 × 512 B into the S3
# server within 2× of the same into a directory): starts or reuses Garage (scripts/s3.sh), then
# runs the store crate's example s3_bench, which puts N bodies of SIZE bytes through
# `Store::publish` in batches into S3Store (a fresh prefix per round) and FsStore (a fresh
# directory per round), alternating, and prints each round and the ratio of the medians.
# A debug build (as the tests): the work is requests and files, the same hashing on both sides.
# Usage: bench/s3-store.sh [N] [SIZE] [BATCH] [ROUNDS] [spread]   (defaults 10000 512 256 3;
#        keys in path order, `spread`: each batch over every directory)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
URL="$(scripts/s3.sh)"
W="$(mktemp -d "${TMPDIR:-/var/tmp}/s3-bench.XXXXXX")"
trap 'rm -rf "$W"' EXIT
cargo run -q -p resourcesync-store --example s3_bench -- "$URL" "$W" "$@"
