# The two commands of the README: `make train` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PKGS := protocol sandbox instrument bench learner actors embedded
PYPROJECTS := pyproject.toml $(foreach p,$(PKGS),packages/$(p)/pyproject.toml)
# What the workspace installs (editable, with these extras); scripts/lock.py reads this line.
EDITABLES := -e 'packages/protocol[wandb,console]' $(foreach p,$(filter-out protocol,$(PKGS)),-e packages/$(p)) -e '.[dev,bench,slurm]'
# Every version installed, torch's included (docs/testing.md "Locked installs"; `make lock` refreshes it).
LOCK := requirements/lock.txt
# The locked torch pin takes the CPU wheel on CPU machines; an unpinned torch would pull a multi-GB
# CUDA build. GPU users: `make install TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"`.
TORCH_SPEC ?= $(shell grep -m1 '^torch==' $(LOCK))

.PHONY: install lock upgrade services sandbox-deps train lint test test-vllm test-fast wheels clean

# The installer: uv (locked beside pip) installs the same lock several times faster than pip
# (docs/testing.md "Locked installs"), from pip's own sources (scripts/pip_sources.py).
# INSTALLER=pip, or a uv that fails, installs with pip. Both write the bytecode at install (pip
# does by default, uv with --compile-bytecode), as does the compileall of the workspace below:
# with PYTHONDONTWRITEBYTECODE set, or a read-only venv in the sandbox, every process would
# otherwise compile what it imports again (docs/testing.md "Locked installs", "Bytecode").
INSTALLER ?= uv
UV_INSTALL = $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python $$($(BIN)/python scripts/pip_sources.py)

install: $(VENV)/.installed

# Exactly the locked versions: the installers, torch, the lock, then the workspace without
# resolving anything more; `pip check` fails the install if the lock misses a dependency.
$(VENV)/.installed: $(PYPROJECTS) $(LOCK)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -c $(LOCK) pip
	{ test "$(INSTALLER)" = uv && $(BIN)/pip install -q -c $(LOCK) uv && \
	  $(UV_INSTALL) -c $(LOCK) $(TORCH_SPEC) && $(UV_INSTALL) -r $(LOCK) && \
	  $(UV_INSTALL) --no-deps $(EDITABLES); } || { \
	  test "$(INSTALLER)" = pip || echo "make: uv did not install; installing with pip"; \
	  $(BIN)/pip install -q -c $(LOCK) $(TORCH_SPEC) && $(BIN)/pip install -q -r $(LOCK) && \
	  $(BIN)/pip install -q --no-deps $(EDITABLES); }
	$(BIN)/python -m compileall -q -j0 packages src
	$(BIN)/pip check
	touch $@

# Resolve what the pyprojects now ask for into $(LOCK) (and .venv-vllm's lock), keeping every
# locked version they still admit, and print what changed (old -> new).
lock:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q packaging
	$(BIN)/python scripts/lock.py refresh $(LOCK_FLAGS) -- $(TORCH_SPEC) $(EDITABLES)
	bash scripts/ci/setup_vllm.sh lock $(LOCK_FLAGS)

# Move forward deliberately: every package to the newest version admitted, printed as
# old -> new; then install it and run the suite. Review `git diff requirements/` and commit it
# with the suite's result.
upgrade:
	$(MAKE) lock LOCK_FLAGS=--upgrade
	$(MAKE) test

# Services the `docker`, `slurm` and `vllm` tests need: a Docker engine + bubblewrap + the local
# sandbox image, a Slurm cluster of 3 nodes on this machine (stopped again after the tests), and
# vLLM's CPU build in its own venv (.venv-vllm). Idempotent; needs root and apt.
services:
	@bash scripts/ci/setup_docker.sh || echo "make: Docker setup failed; the docker tests will fail (deselect: ARGS=\"-m 'not docker'\")"
	@bash scripts/ci/setup_slurm.sh || echo "make: Slurm setup failed; the slurm tests will fail (deselect: ARGS=\"-m 'not slurm'\")"
	@test .venv-vllm/.installed -nt requirements/vllm-lock.txt || bash scripts/ci/setup_vllm.sh

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

# The suite runs in two pytest-xdist workers, a module whole on one worker and the end-to-end
# modules that each start a whole system one after another (tests/conftest.py, docs/testing.md
# "Workers"); WORKERS=0 runs it in one process.
WORKERS ?= 2
WORKERS_ARGS = -n $(WORKERS) $(if $(filter 0,$(WORKERS)),,--dist loadfile)

# Lint first, then the lock check, the main suite in .venv, then the vLLM tests in .venv-vllm
# (vLLM pins its own torch). The Slurm cluster is stopped after the main suite, pass or fail (the
# stop checks nothing is left).
test: lint services
	$(BIN)/python scripts/lock.py check
	$(BIN)/python -m pytest -m "not gpu and not vllm" $(WORKERS_ARGS) $(ARGS); code=$$?; bash scripts/ci/setup_slurm.sh stop || code=1; exit $$code
	$(MAKE) test-vllm

test-vllm:
	@test .venv-vllm/.installed -nt requirements/vllm-lock.txt || bash scripts/ci/setup_vllm.sh
	.venv-vllm/bin/python -m pytest -m "vllm and not gpu" tests/actors $(ARGS)

test-fast: install
	$(BIN)/python -m pytest -m "not gpu and not docker and not vllm and not slurm and not slow" $(WORKERS_ARGS) $(ARGS)

wheels:
	bash scripts/check_wheels.sh

clean:
	rm -rf $(VENV) .venv-vllm dist build
