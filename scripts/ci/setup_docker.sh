#!/usr/bin/env bash
# Prepare a CI (or developer) host for the sandbox tests: Docker engine, bubblewrap, the local
# sandbox image. Idempotent: every step is skipped when already done. Needs root.
#   bash scripts/ci/setup_docker.sh            # install, start dockerd, build mlerl-sandbox:local
#   MLERL_SANDBOX_IMAGE=name:tag bash ...       # another tag
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE="${MLERL_SANDBOX_IMAGE:-mlerl-sandbox:local}"
LOG="${DOCKERD_LOG:-/var/log/mlerl-dockerd.log}"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]})); then
  echo "setup_docker: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "setup_docker: starting dockerd (log: $LOG)"
  # No init system on these machines; no iptables and no bridge: containers get only `lo`.
  nohup dockerd --iptables=false --bridge=none -H unix:///var/run/docker.sock >"$LOG" 2>&1 &
  for _ in $(seq 1 120); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { echo "setup_docker: dockerd did not start"; tail -20 "$LOG"; exit 1; }
fi

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  bash scripts/build_image.sh "$IMAGE"
fi
echo "setup_docker: ready (image $IMAGE)"
