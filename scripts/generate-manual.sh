#!/usr/bin/env bash
# Writes the shell completions and man pages under packaging/ again, from the clap definitions
# (crates/cli/src/manual.rs); crates/cli/tests/it/manual.rs fails until they are current. Also
# the generated tables of docs/configuration.md (crates/cli/src/config_reference.rs).
# Usage: scripts/generate-manual.sh [path/to/resourcesync]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [ -z "$bin" ]; then
    cargo build -q -p resourcesync-cli
    bin="${CARGO_TARGET_DIR:-target}/debug/resourcesync"
fi
rm -rf packaging/man packaging/completions
mkdir -p packaging/completions
# Without the caller's RESOURCESYNC_* variables, which would show as values in the pages.
clean=(env)
for v in $(env | sed -n 's/^\(RESOURCESYNC_[A-Z0-9_]*\)=.*/\1/p'); do clean+=(-u "$v"); done
"${clean[@]}" "$bin" man --out packaging/man
"${clean[@]}" "$bin" completions bash > packaging/completions/resourcesync.bash
"${clean[@]}" "$bin" completions zsh > packaging/completions/_resourcesync
"${clean[@]}" "$bin" completions fish > packaging/completions/resourcesync.fish
RESOURCESYNC_BLESS=1 cargo test -q -p resourcesync-cli --bin resourcesync config_reference >/dev/null
echo "wrote packaging/man, packaging/completions and docs/configuration.md"
