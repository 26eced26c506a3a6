"""Sandboxes started ahead of their programs (``SandboxConfig.prewarm``, local backend).

What must hold: a run of a recent shape starts in a sandbox made before it, the program sees
exactly what a freshly started sandbox gives it, a warm sandbox serves one program only, the
limits count from the program's start, and a dead or foreign warm sandbox is never used.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mlerl.protocol import ExecStatus
from mlerl.sandbox import ExecutionRequest, SandboxConfig, make_sandbox
from mlerl.sandbox._prewarm import WarmPool, launchable

Env = Any  # the conftest fixture type

# Prints when this process's interpreter started (epoch seconds, 10 ms resolution).
START_TIME = textwrap.dedent("""
    import os, time
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    print(time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK")))
""")

SETTLE_S = 0.5  # time for the sandbox started after a run to be ready for the next


@pytest.fixture
def local(env: Env) -> Env:
    """The local backend's env, on a host with bubblewrap and cgroups."""
    if env.backend != "local":
        pytest.skip("sandboxes are started ahead by the local backend only")
    env.require("bwrap", "cgroups")
    return env


async def started_before_run(sandbox, request: ExecutionRequest) -> float:
    """Seconds between the program's interpreter start and its run's start."""
    result = await sandbox.run(request)
    assert result.status is ExecStatus.OK, result
    return result.started_at - float(result.stdout.text().split()[-1])


async def test_the_next_run_of_a_shape_starts_in_a_sandbox_made_before_it(local: Env) -> None:
    sandbox = local.sandbox(prewarm=2)
    try:
        first = await started_before_run(sandbox, local.request(START_TIME))
        await asyncio.sleep(SETTLE_S)
        second = await started_before_run(sandbox, local.request(START_TIME))
        await asyncio.sleep(SETTLE_S)
        other_shape = await started_before_run(sandbox, local.request(START_TIME, memory_mb=900))
    finally:
        await sandbox.close()
    assert first < 0.05  # started with its run
    assert second > SETTLE_S / 2  # started ahead, while the first one ran
    assert other_shape < 0.05  # different limits: a sandbox of its own


async def test_prewarm_0_starts_every_sandbox_with_its_run(local: Env) -> None:
    """Also the default: the warm path is opt-in (benchmarks/throughput/prewarm_ab.py)."""
    sandbox = local.sandbox(prewarm=0)
    try:
        for _ in range(2):
            assert await started_before_run(sandbox, local.request(START_TIME)) < 0.05
            await asyncio.sleep(SETTLE_S)
    finally:
        await sandbox.close()


SEMANTICS = [
    "import sys\nprint(sys.argv, sys.path[0], __file__, __name__, __spec__, __package__,\n"
    "      type(__loader__).__name__, __builtins__)\ndef f():\n    1/0\nf()\n",
    "x = (\n",
    "import sys\nprint('bye')\nsys.exit(3)\n",
    "import os\nprint(sorted(os.listdir('/proc/self/fd')), os.getuid(), os.getcwd())\n",
    "import multiprocessing as mp\ndef sq(x):\n    return x * x\nif __name__ == '__main__':\n"
    "    with mp.get_context('spawn').Pool(2) as p:\n        print(p.map(sq, [1, 2, 3]))\n",
    "import atexit, pickle\nclass A:\n    pass\nprint(len(pickle.dumps(A())) > 0)\n"
    "atexit.register(print, 'at exit')\nraise KeyError('k')\n",
]


@pytest.mark.parametrize(
    "entry",
    [("python", "main.py"), ("python", "-u", "main.py")],
    ids=["interpreter-waits", "shell-waits"],
)
async def test_a_warm_run_sees_what_a_fresh_sandbox_gives(local: Env, entry) -> None:
    async def outputs(prewarm: int) -> list[tuple[object, ...]]:
        sandbox = local.sandbox(prewarm=prewarm)
        seen = []
        try:
            for program in SEMANTICS:
                for _ in range(2):  # the second run of a shape is the one that could be warm
                    request = dataclasses.replace(local.request(program), entry=entry)
                    r = await sandbox.run(request)
                    await asyncio.sleep(0.3)
                seen.append((r.status, r.exit_code, r.stdout.text(), r.stderr.text()))
        finally:
            await sandbox.close()
        return seen

    assert launchable(entry) == (entry == ("python", "main.py"))
    fresh, warm = await outputs(0), await outputs(2)
    assert warm == fresh
    assert "ZeroDivisionError" in fresh[0][3] and "<string>" not in warm[0][3]
    assert fresh[2][:2] == (ExecStatus.PROGRAM_ERROR, 3)


async def test_a_warm_sandbox_serves_one_program_only(local: Env) -> None:
    leave = (
        "import subprocess\nopen('/tmp/left', 'w').write('x')\nopen('left', 'w').write('x')\n"
        "subprocess.Popen(['sleep', '300'], start_new_session=True)\nprint('left')\n"
    )
    look = (
        "import os\nprint(os.path.exists('/tmp/left'), os.path.exists('left'),\n"
        "      sorted(p for p in os.listdir('/proc') if p.isdigit() and p != str(os.getpid())))\n"
    )
    sandbox = local.sandbox(prewarm=2)
    try:
        await sandbox.run(local.request(leave))
        await asyncio.sleep(SETTLE_S)
        after = await sandbox.run(local.request(look))
    finally:
        await sandbox.close()
    exists_tmp, exists_cwd, *_ = after.stdout.text().split()
    assert (exists_tmp, exists_cwd) == ("False", "False")
    assert "'300'" not in after.stdout.text()  # no sleep process of the first program
    others = after.stdout.text().split("[", 1)[1]
    assert others.count(",") <= 2  # pid 1 (bwrap) and the program's own ancestry only


async def test_limits_count_from_the_program_start_in_a_warm_sandbox(local: Env) -> None:
    sandbox = local.sandbox(prewarm=2)
    try:
        await sandbox.run(local.request("pass", wall_time_s=1.0, memory_mb=256))
        await asyncio.sleep(2.0)  # the next sandbox has been waiting longer than the limit
        slow = await sandbox.run(
            local.request("import time\ntime.sleep(30)\n", wall_time_s=1.0, memory_mb=256)
        )
        await asyncio.sleep(SETTLE_S)
        big = await sandbox.run(  # the memory limit binds, not the wall time (a loaded machine)
            local.request(
                "x = bytearray(600 * 2**20)\nprint(len(x))\n", wall_time_s=30.0, memory_mb=256
            )
        )
    finally:
        await sandbox.close()
    assert slow.status is ExecStatus.TIMEOUT and 1.0 <= slow.duration_s < 4.0
    assert big.status is ExecStatus.OOM


async def test_a_warm_sandbox_that_died_is_not_used(local: Env, find_processes) -> None:
    sandbox = local.sandbox(prewarm=2)
    try:
        await sandbox.run(local.request("pass"))
        await asyncio.sleep(SETTLE_S)
        waiting = find_processes(local.token)
        assert waiting, "a sandbox should be waiting for the next run"
        killed = 0
        for pid in waiting:  # a sandbox's inner processes die with its outer one: gone is fine
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        assert killed, "the waiting sandbox's processes were gone before the kill"
        result = await sandbox.run(local.request("print('ran')"))
    finally:
        await sandbox.close()
    assert result.status is ExecStatus.OK and result.stdout.text() == "ran\n"


async def test_preloaded_modules_are_imported_before_the_program_arrives(local: Env) -> None:
    sandbox = local.sandbox(prewarm=2, preload=["csv", "no_such_module_anywhere"])
    seen = "import sys\nprint('csv' in sys.modules)\nimport csv\nprint(csv.__name__)\n"
    try:
        first = await sandbox.run(local.request(seen))  # no sandbox was waiting: a fresh start
        await asyncio.sleep(SETTLE_S)
        second = await sandbox.run(local.request(seen))
    finally:
        await sandbox.close()
    assert first.stdout.text() == "False\ncsv\n"
    assert second.status is ExecStatus.OK and second.stdout.text() == "True\ncsv\n"


def test_preload_takes_module_names_only() -> None:
    from mlerl.protocol import ConfigError

    with pytest.raises(ConfigError, match="preload"):
        SandboxConfig(preload=["os; import shutil"])


class _Fake:
    def __init__(self, shape: str, alive: bool = True) -> None:
        self.shape = shape
        self.alive = alive

    def usable(self) -> bool:
        return self.alive


async def test_the_pool_keeps_at_most_capacity_and_hands_out_matching_usable_ones() -> None:
    discarded: list[_Fake] = []

    async def discard(warm) -> None:  # type: ignore[no-untyped-def]
        discarded.append(warm)

    pool = WarmPool(2, discard)
    made = [_Fake("a"), _Fake("a", alive=False), _Fake("b")]
    for warm in made:
        assert pool.wants(warm.shape)  # type: ignore[arg-type]

        async def spawn(w=warm):  # type: ignore[no-untyped-def]
            return w

        pool.refill(warm.shape, spawn)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    assert discarded == [made[0]]  # the oldest, once a third was waiting
    assert pool.take("b") is made[2]  # type: ignore[arg-type]
    assert pool.take("a") is None  # type: ignore[arg-type]  (the only "a" left is dead)
    await pool.close()
    assert discarded == [made[0], made[1]]
    assert not WarmPool(0, discard).wants("a")  # type: ignore[arg-type]
