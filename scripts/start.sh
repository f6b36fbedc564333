#!/usr/bin/env bash
# Sets up and runs Verbatim (api + worker) on its embedded defaults: a Postgres under ./.verbatim,
# local blob storage, PocketSphinx and extractive minutes. Set DATABASE_URL to use your own Postgres.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec node dist/cli/main.js start
