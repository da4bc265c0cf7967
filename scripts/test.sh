#!/usr/bin/env bash
# The test command (README, CI): installs what the tests need (the pinned Python reference
# peers, in .venv-peers/; the WebSub peer flask-websub, in .venv-websub/; a PostgreSQL server on
# 127.0.0.1, started or reused by scripts/postgres.sh, for the store's PgState; headless Chromium, found
# or installed by scripts/chromium.sh, for the aggregator's page; an OAI-PMH data provider, started or
# reused by scripts/oai-provider.sh, and a second one on another library (Perl HTTP::OAI), started or
# reused by scripts/oai-http-oai.sh, for the source's OAI-PMH inventory; a Garage S3 server on 127.0.0.1,
# built once and started or reused by scripts/s3.sh, for the store's S3Store; nginx, found or installed
# by scripts/nginx.sh, for the README's "Publish a folder behind nginx" example; two Memento clients,
# installed by scripts/memento-clients.sh, for the aggregator's TimeMaps and TimeGates), then runs every test
# of the workspace. Each crate links one integration test binary, `it` (tests/it/main.rs): the
# tests of one file `tests/it/NAME.rs` run with `cargo test -p CRATE --test it NAME::`.
# `--no-fail-fast`: a failing test binary does not hide the failures of those after it.
set -euo pipefail
cd "$(dirname "$0")/.."
RESOURCESYNC_PEERS_VENV="$(scripts/python-peers.sh)"
export RESOURCESYNC_PEERS_VENV
RESOURCESYNC_WEBSUB_VENV="$(scripts/websub-peers.sh)"
export RESOURCESYNC_WEBSUB_VENV
RESOURCESYNC_TEST_POSTGRES="$(scripts/postgres.sh)"
export RESOURCESYNC_TEST_POSTGRES
RESOURCESYNC_TEST_CHROMIUM="$(scripts/chromium.sh)"
export RESOURCESYNC_TEST_CHROMIUM
RESOURCESYNC_TEST_OAI="$(scripts/oai-provider.sh)"
export RESOURCESYNC_TEST_OAI
RESOURCESYNC_TEST_OAI2="$(scripts/oai-http-oai.sh)"
export RESOURCESYNC_TEST_OAI2
RESOURCESYNC_TEST_S3="$(scripts/s3.sh)"
export RESOURCESYNC_TEST_S3
RESOURCESYNC_TEST_NGINX="$(scripts/nginx.sh)"
export RESOURCESYNC_TEST_NGINX
RESOURCESYNC_TEST_MEMENTO_CLIENTS="$(scripts/memento-clients.sh)"
export RESOURCESYNC_TEST_MEMENTO_CLIENTS
exec cargo test --workspace --no-fail-fast "$@"
