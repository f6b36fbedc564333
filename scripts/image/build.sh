#!/usr/bin/env bash
# P1: builds the image (default tag localhost/verbatim:latest) with Debian's podman. This sandbox
# cannot start an OCI runtime, so RUN steps run under chroot isolation; elsewhere the same
# Containerfile builds with `podman build` or `docker build`. The base is made by base.sh.
# Extra CA certificates for the build's npm (a TLS-inspecting proxy): NODE_EXTRA_CA_CERTS or
# VERBATIM_BUILD_CA, passed as a build secret, never kept in the image.
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-localhost/verbatim:latest}
# VERBATIM_IMAGE_REFRESH=1: the base made again and no layer reused, for Debian's security updates.
refresh=()
if [ "${VERBATIM_IMAGE_REFRESH:-0}" = 1 ]; then
  podman rmi -f localhost/debian:trixie-slim >/dev/null 2>&1 || true
  rm -f "${VERBATIM_IMAGE_CACHE:-/var/cache/verbatim-image}/trixie-minbase.tar"
  refresh=(--no-cache --pull=never)
fi
bash scripts/image/base.sh
ca=${VERBATIM_BUILD_CA:-${NODE_EXTRA_CA_CERTS:-}}
secret=()
if [ -n "$ca" ] && [ -s "$ca" ]; then secret=(--secret "id=extra-ca,src=$ca"); fi
podman build --isolation chroot --format docker --layers "${refresh[@]}" "${secret[@]}" -f Containerfile -t "$tag" .
