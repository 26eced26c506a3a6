# The two commands of the README: `make train` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PKGS := protocol sandbox instrument bench learner actors embedded
PYPROJECTS := pyproject.toml $(foreach p,$(PKGS),packages/$(p)/pyproject.toml)
# CPU machines get the CPU torch wheel; an unpinned torch would pull a multi-GB CUDA build.
# GPU users: `make install TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"`.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install services sandbox-deps train lint test test-vllm test-fast wheels clean

install: $(VENV)/.installed

$(VENV)/.installed: $(PYPROJECTS)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e 'packages/protocol[wandb,console]' $(foreach p,$(filter-out protocol,$(PKGS)),-e packages/$(p)) -e '.[dev,bench,slurm]'
	touch $@

# Services the `docker` and `vllm` tests need: a Docker engine + bubblewrap + the local sandbox
# image, and vLLM's CPU build in its own venv (.venv-vllm). Idempotent; needs root and apt.
services:
	@bash scripts/ci/setup_docker.sh || echo "make: Docker setup failed; the docker tests will fail (deselect: ARGS=\"-m 'not docker'\")"
	@test -x .venv-vllm/bin/python || bash scripts/ci/setup_vllm.sh

# The local sandbox refuses to run unisolated: install bubblewrap where possible, else say how.
sandbox-deps:
	@bash scripts/setup_sandbox.sh

train: install sandbox-deps
	$(BIN)/mlerl train $(ARGS)

# Lint and type checks (config: pyproject.toml [tool.ruff], [tool.mypy]).
lint: install
	$(BIN)/ruff check packages src
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Lint first, then the main suite in .venv, then the vLLM tests in .venv-vllm (vLLM pins its
# own torch).
test: lint services
	$(BIN)/python -m pytest -m "not gpu and not vllm" $(ARGS)
	$(MAKE) test-vllm

test-vllm:
	@test -x .venv-vllm/bin/python || bash scripts/ci/setup_vllm.sh
	.venv-vllm/bin/python -m pytest -m "vllm and not gpu" tests/actors $(ARGS)

test-fast: install
	$(BIN)/python -m pytest -m "not gpu and not docker and not vllm and not slow" $(ARGS)

wheels:
	bash scripts/check_wheels.sh

clean:
	rm -rf $(VENV) .venv-vllm dist build
