#!/usr/bin/env bash
# Build the local sandbox image without a registry: a minimal Debian bookworm root filesystem
# (debootstrap, Python 3.11 from Debian) imported into Docker. The ML stack is not inside: at
# run time the sandbox binds the host venv's site-packages read-only (SandboxConfig.site_packages),
# so programs see exactly the packages of the project's .venv. For a self-contained image with
# pinned packages use docker/Dockerfile instead (needs a registry for its base image).
#   bash scripts/build_image.sh [TAG]       (default mlerl-sandbox:local; ~45 s, needs root)
set -euo pipefail
TAG="${1:-mlerl-sandbox:local}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ROOTFS="$(mktemp -d /tmp/mlerl-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT

echo "build_image: debootstrap into $ROOTFS"
debootstrap --variant=minbase --include=python3,python-is-python3,libgomp1 \
  bookworm "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || { tail -30 "$ROOTFS.log"; exit 1; }
rm -f "$ROOTFS.log"
# Trim what a sandboxed program never needs: apt caches, docs, man pages.
rm -rf "$ROOTFS"/var/cache/apt/* "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/doc/* \
  "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/*
mkdir -p "$ROOTFS/work" "$ROOTFS/opt/mlerl-site"
chmod 1777 "$ROOTFS/work"

echo "build_image: importing as $TAG"
tar -C "$ROOTFS" -c . | docker import \
  --change 'USER 65534:65534' \
  --change 'WORKDIR /work' \
  --change 'ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp MPLCONFIGDIR=/tmp' \
  --change 'CMD ["python3"]' \
  - "$TAG" >/dev/null
echo "build_image: built $TAG"
