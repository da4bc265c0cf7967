#!/bin/sh
# Seeds the fuzz corpus of the `reader` target with the specification examples.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
spec="$here/../crates/model/tests/fixtures/spec"
out="$here/corpus/reader"
mkdir -p "$out"
find "$spec" -name '*.xml' | while read -r f; do
    rel=${f#"$spec"/}
    cp "$f" "$out/$(printf '%s' "$rel" | tr '/' '_')"
done
echo "seeded $(ls "$out" | wc -l) files into $out"
