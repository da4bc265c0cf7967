#!/usr/bin/env bash
# The test command (README, CI): installs what the tests need (the pinned Python reference
# peers, in .venv-peers/; the WebSub peer flask-websub, in .venv-websub/), then runs every test
# of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
RESOURCESYNC_PEERS_VENV="$(scripts/python-peers.sh)"
export RESOURCESYNC_PEERS_VENV
RESOURCESYNC_WEBSUB_VENV="$(scripts/websub-peers.sh)"
export RESOURCESYNC_WEBSUB_VENV
exec cargo test --workspace "$@"
