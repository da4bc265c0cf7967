#!/bin/sh
# Seeds the fuzz corpora: the specification examples for `reader`, and the small hand-made
# inputs of seeds/<target>/ (the first byte of each selects the target's mode) for the others.
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
for d in "$here"/seeds/*/; do
    t=$(basename "$d")
    mkdir -p "$here/corpus/$t"
    cp "$d"* "$here/corpus/$t/"
    echo "seeded $(ls "$d" | wc -l) files into corpus/$t"
done
