#!/usr/bin/env bash
# Installs what Verbatim needs on Debian/Ubuntu: ffmpeg (audio decoding; security updates come
# with the OS), PocketSphinx (offline speech recognition), flite
# (speech for the tests), any extra Debian packages named as arguments (scripts/test.sh adds chromium
# for the web app's end-to-end tests), the npm dependencies (incl. an embedded Postgres),
# and builds the server and the web app.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Vite 8 (the web app's build) needs Node.js ^20.19 or >= 22.12; 21.x and 22.0-22.11 do not work.
node_version=$(node -p 'process.versions.node' 2>/dev/null || echo none)
if ! node -e '
  const [maj, min] = process.versions.node.split(".").map(Number);
  process.exit((maj === 20 && min >= 19) || (maj === 22 && min >= 12) || maj > 22 ? 0 : 1);
' 2>/dev/null; then
  echo "Verbatim needs Node.js 20.19 or newer in the 20 line, or 22.12 or newer (found: $node_version)." >&2
  echo "Vite 8, which builds the web app, refuses older versions. Install a current Node.js LTS." >&2
  exit 1
fi

missing=()
for pkg in ffmpeg pocketsphinx pocketsphinx-en-us flite "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

npm ci --no-audit --no-fund
npm run build
