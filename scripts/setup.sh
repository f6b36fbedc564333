#!/usr/bin/env bash
# Installs what Verbatim needs on Debian/Ubuntu: PocketSphinx (offline speech recognition), flite
# (speech for the tests), any extra Debian packages named as arguments (scripts/test.sh adds chromium
# for the web app's end-to-end tests), the npm dependencies (incl. ffmpeg and an embedded Postgres),
# and builds the server and the web app.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  echo "Verbatim needs Node.js 20 or newer (found: $(node --version 2>/dev/null || echo none))." >&2
  exit 1
fi

missing=()
for pkg in pocketsphinx pocketsphinx-en-us flite "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

npm ci --no-audit --no-fund
npm run build
