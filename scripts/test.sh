#!/usr/bin/env bash
# Sets up and runs the checks and the whole test suite against the Postgres on 127.0.0.1:5432
# (user postgres, trust auth), starting or installing it if it is not there.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian's Chromium runs the web app's end-to-end tests (test/web-*.test.ts) through playwright-core;
# psql acts as another OS user against the embedded Postgres (test/embedded-security.test.ts);
# unzip reads a DOCX export back (test/speaker-exports.test.ts); podman and debootstrap build and
# mount the container image (test/image.test.ts, docs/deploy.md).
extra=(chromium postgresql-client unzip podman debootstrap)
command -v pg_ctlcluster >/dev/null 2>&1 || extra+=(postgresql)
bash scripts/setup.sh "${extra[@]}"

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  # The tests connect as postgres over TCP without a password, as CI's server allows.
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    as_root sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
  fi
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432

# Three test files run at once, each with its api and worker processes (a worker holds about 14
# connections when idle): at peak that is more than Postgres's default of 100 connections, and a
# process refused one ("too many clients") fails its test. A local Debian cluster is raised to 300.
need=300
have=$(psql -h 127.0.0.1 -U postgres -Atc 'show max_connections')
if [ "$have" -lt "$need" ]; then
  cluster=$(pg_lsclusters -h 2>/dev/null | awk '$3 == 5432 { print $1 }' | head -n 1)
  if [ -n "$cluster" ]; then
    psql -h 127.0.0.1 -U postgres -qc "alter system set max_connections = $need"
    as_root pg_ctlcluster --skip-systemctl-redirect "$cluster" main restart
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
    echo "postgres: max_connections $have -> $(psql -h 127.0.0.1 -U postgres -Atc 'show max_connections')"
  else
    echo "postgres: max_connections is $have (fewer than $need): tests may be refused connections" >&2
  fi
fi

npm run check
npm test
# The whole system under faults (docs/simulation.md): two fixed seeds, a minute of faults each, with
# CI's minimums (1,000 faults, 50 kills or stops, 3 Postgres restarts) and every invariant at 0.
npm run sim -- --seeds 1401,1402 --minutes 1 --ci
# V12: two planted defects, each must be caught by the invariant it names (half a minute each).
npm run sim -- --plant refuse-late-chunks
npm run sim -- --plant leak-quota-bytes

