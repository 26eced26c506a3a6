"""Fixtures: a sandbox per backend, and a check after every test that nothing was left behind.

Every program gets ``MLERL_TEST_TOKEN=<unique>`` in its environment; processes of the run are
found on the host by that token in /proc/*/environ (Docker's processes are host processes too).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mlerl.sandbox import ExecutionRequest, Limits, Sandbox, SandboxConfig, make_sandbox
from mlerl.sandbox import _cgroup
from mlerl.sandbox._workdir import owner_tag

BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


def processes_with(token: str) -> list[int]:
    needle = f"MLERL_TEST_TOKEN={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


async def containers_of(owner: str) -> list[str]:
    import aiodocker

    docker = aiodocker.Docker()
    try:
        found = await docker.containers.list(all=True, filters={"label": [f"mlerl.owner={owner}"]})
        return [c.id for c in found]
    finally:
        await docker.close()


def leftover_runs(work_root: Path, owner: str) -> list[str]:
    dirs = [work_root / owner, *(base / owner for base in _cgroup.base_dirs().values())]
    return [str(p) for d in dirs for p in d.glob("*") if p.is_dir()]


def _cgroups_writable() -> bool:
    from mlerl.sandbox._doctor import _cgroups_work

    return _cgroups_work().startswith("ok")


HOST_HAS = {"bwrap": shutil.which("bwrap") is not None, "cgroups": _cgroups_writable()}


class Env:
    """One test's sandbox settings; ``request()`` builds requests carrying the token."""

    def __init__(self, backend: str, work_root: Path) -> None:
        self.backend = backend
        self.token = uuid.uuid4().hex
        self.config = SandboxConfig(backend=backend, work_root=str(work_root), max_concurrency=4)

    def request(self, program: str, **limits: object) -> ExecutionRequest:
        collect = limits.pop("collect", ("submission.csv",))
        data_dir = limits.pop("data_dir", None)
        env = {"MLERL_TEST_TOKEN": self.token, **limits.pop("env", {})}  # type: ignore[dict-item]
        base = {"wall_time_s": 30.0, "memory_mb": 1024, "pids": 256} | limits
        return ExecutionRequest(
            program=program,
            limits=Limits(**base),  # type: ignore[arg-type]
            collect=collect,
            data_dir=data_dir,
            env=env,
        )  # type: ignore[arg-type]

    def require(self, *features: str) -> None:
        """Skip the local variant on hosts without ``features`` (doctor reports them; CI and
        this project's machines have them, so the test runs there)."""
        missing = [f for f in features if self.backend == "local" and not HOST_HAS[f]]
        if missing:
            pytest.skip(f"local backend without {', '.join(missing)} does not meet this row")

    def sandbox(self, **overrides: object) -> Sandbox:
        cfg = SandboxConfig(**(vars(self.config) | overrides))  # type: ignore[arg-type]
        return make_sandbox(cfg)


async def assert_nothing_left(env: Env) -> None:
    owner = owner_tag()
    for _ in range(50):  # the kernel needs a moment to finish exiting killed processes
        if not processes_with(env.token):
            break
        await asyncio.sleep(0.1)
    assert processes_with(env.token) == [], "processes left behind"
    assert leftover_runs(Path(env.config.work_root), owner) == [], "run dirs/cgroups left"
    if env.backend == "docker":
        assert await containers_of(owner) == [], "containers left behind"


@pytest.fixture(params=BACKENDS)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    e = Env(request.param, tmp_path / "sandbox")
    yield e
    await assert_nothing_left(e)


@pytest.fixture
async def sandbox(env: Env) -> AsyncIterator[Sandbox]:
    sb = env.sandbox()
    try:
        yield sb
    finally:
        await sb.close()


@pytest.fixture
def find_processes():  # type: ignore[no-untyped-def]
    """``processes_with(token)`` for tests that build their own sandbox."""
    return processes_with


@pytest.fixture
def answer_roots() -> Iterator[list[Path]]:
    """Data roots where answers really live, outside /tmp (the sandbox's private /tmp hides
    anything there whatever the mounts): MLE-bench's default cache under ``$HOME``, and a data
    dir configured inside the checkout (world-readable: as root the program's uid drop cannot
    hide it, only the mount allowlist does). Removed afterwards."""
    tag = "mlerl-canary-" + uuid.uuid4().hex[:12]
    checkout = Path(__file__).resolve().parents[2]
    tops = [Path.home() / ".cache" / tag]
    if not str(checkout).startswith("/tmp/"):
        tops.append(checkout / f".{tag}")
    try:
        yield [tops[0] / "mle-bench" / "data", *(top / "data" for top in tops[1:])]
    finally:
        for top in tops:
            shutil.rmtree(top, ignore_errors=True)
