#!/usr/bin/env bash
# What the local sandbox needs to isolate programs (bubblewrap; cgroups need root), installed
# where this host allows it. `make train` runs this first; `mlerl-sandbox doctor` reports the rest.
set -euo pipefail
command -v bwrap >/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup_sandbox: installing bubblewrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
  exit 0
fi
echo "setup_sandbox: the local sandbox needs bubblewrap. Install it with:" >&2
echo "  sudo apt-get install -y bubblewrap" >&2
echo "(or run programs in Docker: mlerl train sandbox=docker)" >&2
exit 1
