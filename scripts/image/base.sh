#!/usr/bin/env bash
# P1: the image's base, `localhost/debian:trixie-slim`, made here with debootstrap (minbase) from
# this machine's own Debian sources, then imported into podman. Nothing is pulled from a registry.
# Kept once made: podman's store holds the image, and a tarball of the root is cached under
# VERBATIM_IMAGE_CACHE (default /var/cache/verbatim-image) so another checkout does not fetch again.
set -euo pipefail

name=localhost/debian:trixie-slim
cache=${VERBATIM_IMAGE_CACHE:-/var/cache/verbatim-image}
if podman image exists "$name"; then
  echo "base: $name is here"
  exit 0
fi
mkdir -p "$cache"
tarball=$cache/trixie-minbase.tar
if [ ! -s "$tarball" ]; then
  # The machine's own Debian mirror: the first URI of its sources (deb822 or the one-line form).
  mirror=$(
    { grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{ print $2 }'
      grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{ print $2 }'
    } | grep -v -- '-security' | grep '/debian/\?$' | head -n 1
  ) || true
  if [ -z "$mirror" ]; then
    echo "base: no Debian mirror in /etc/apt/sources*: cannot make the base image" >&2
    exit 1
  fi
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  echo "base: debootstrap trixie (minbase) from this machine's Debian sources"
  debootstrap --variant=minbase --components=main trixie "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  # Security updates from the same sources as this machine's (its security mirror, if it has one).
  security=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{ print $2 }' |
    grep -- '-security' | head -n 1) || true
  {
    printf 'Types: deb\nURIs: %s\nSuites: trixie trixie-updates\nComponents: main\n' "$mirror"
    printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    if [ -n "$security" ]; then
      printf '\nTypes: deb\nURIs: %s\nSuites: trixie-security\nComponents: main\n' "$security"
      printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    fi
  } >"$root/etc/apt/sources.list.d/debian.sources"
  rm -f "$root/etc/apt/sources.list"
  # Slim as Debian's own slim images are: no apt lists, no caches, no docs a server never reads.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
  tar -C "$root" --numeric-owner -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
fi
podman import --change 'CMD ["bash"]' "$tarball" "$name" >/dev/null
echo "base: $name imported"
