"""The integrity attacks through the warm path (``SandboxConfig.prewarm``, opt-in): every
hostile program here runs in a sandbox made before it arrived, and says so.

A run started warm with the usual entry runs in the interpreter that waited for "go"
(``_prewarm.LAUNCHER``), so its ``/proc/self/cmdline`` is ``python -c <launcher> ...``, never
``python main.py``: each program prints ``WARM=<that>`` and the tests require it, so none can pass
on the cold path. Before each run the test waits until a sandbox of the request's shape waits.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mlerl.protocol import ExecStatus
from mlerl.sandbox import ExecutionRequest, ExecutionResult, Sandbox
from mlerl.sandbox._prewarm import shape_of

from .test_integrity import FORGE_INFRA, READ_ANSWERS, plant_where_answers_live, prog

Env = Any

SAY_WARM = (
    "\nprint('WARM=' + str(open('/proc/self/cmdline').read().split('\\0')[1] == '-c'),"
    " flush=True)\n"
)


@pytest.fixture
async def warm(env: Env) -> AsyncIterator[Sandbox]:
    """The local backend with bubblewrap and cgroups, two sandboxes kept waiting per shape."""
    if env.backend != "local":
        pytest.skip("sandboxes are started ahead by the local backend only")
    env.require("bwrap", "cgroups")
    sb = env.sandbox(prewarm=2)
    try:
        yield sb
    finally:
        await sb.close()


async def run_warm(sandbox: Sandbox, request: ExecutionRequest) -> ExecutionResult:
    """Run ``request`` in a sandbox made ahead for its shape (primed by a first run if none)."""
    shape = shape_of(request)
    pool = sandbox._warm.pool  # type: ignore[attr-defined]
    assert pool.capacity > 0, "prewarm is off"
    if not any(w.shape == shape for w in pool._waiting) and not pool._spawning.get(shape):
        primer = await sandbox.run(
            ExecutionRequest(
                program="pass", limits=request.limits, data_dir=request.data_dir, env=request.env
            )
        )
        assert primer.status is ExecStatus.OK, primer
    async with asyncio.timeout(60):
        while not any(w.shape == shape for w in pool._waiting):
            await asyncio.sleep(0.05)
    return await sandbox.run(request)


def started_warm(result: ExecutionResult) -> bool:
    lines = result.stdout.text().splitlines()
    return bool(lines) and lines[-1] == "WARM=True"


async def test_warm_runs_cannot_read_answers(
    env: Env, warm: Sandbox, answer_roots: list[Path]
) -> None:
    """Row 10 warm: the same canaries as the cold test (home data root, checkout data dir,
    each task's private dir), twice in a row from sandboxes made ahead."""
    public, paths, canaries = plant_where_answers_live(answer_roots)
    program = prog(READ_ANSWERS.format(paths=paths)) + SAY_WARM
    for _ in range(2):
        result = await run_warm(warm, env.request(program, data_dir=public, wall_time_s=60.0))
        assert result.status is ExecStatus.OK, result
        assert started_warm(result), result.stdout.text()[-300:]
        assert result.stdout.text().startswith("nothing"), result.stdout.text()
        for canary in canaries:
            assert canary not in result.stdout.text() + result.stderr.text()
        assert "submission.csv" not in result.files


async def test_warm_runs_see_no_host_secret(
    env: Env, warm: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret in the executor's environment (an API key) reaches neither the program's
    environment nor the environment or command line of any process it can see."""
    secret = "SECRET" + uuid.uuid4().hex
    monkeypatch.setenv("WANDB_API_KEY", secret)
    program = (
        prog("""
        import os
        seen = [k for k, v in os.environ.items() if "SECRET" in v]
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            for name in ("environ", "cmdline"):
                try:
                    if b"SECRET" in open(f"/proc/{pid}/{name}", "rb").read():
                        seen.append(f"{pid}/{name}")
                except OSError:
                    pass
        print("seen", seen, "WANDB_API_KEY" in os.environ)
    """)
        + SAY_WARM
    )
    result = await run_warm(warm, env.request(program))
    assert result.status is ExecStatus.OK, result
    assert started_warm(result), result.stdout.text()
    assert result.stdout.text().splitlines()[0] == "seen [] False"
    assert secret not in result.stdout.text() + result.stderr.text()


async def test_warm_run_cannot_forge_infra_error_or_start_the_next(env: Env, warm: Sandbox) -> None:
    """Row 17 warm: the program writes garbage (and "running", "go") into every descriptor it
    holds and every pipe it can open, then fails as a set-up failure would. It was started on "go", after the waiting
    interpreter closed both pipes: PROGRAM_ERROR, exit 1, run once; the next warm sandbox was
    neither started nor poisoned by it (the next program runs normally, warm)."""
    forge = FORGE_INFRA.replace(
        'os.write(h, b"garbage")',
        'os.write(h, b"garbage"); os.write(h, b"go\\n"); os.write(h, b"running")',
    )
    assert forge != FORGE_INFRA
    # and straight into every descriptor it holds (reopening a host pipe through /proc is
    # refused to the sandbox uid; a descriptor kept open would not be)
    forge = forge.replace(
        "import os, sys, time\n",
        """import os, sys, time
for fd in os.listdir("/proc/self/fd"):
    for word in (b"garbage", b"go\\n", b"running"):
        try:
            if int(fd) > 2:
                os.write(int(fd), word)
        except OSError:
            pass
""",
        1,
    )
    assert "os.write(int(fd)" in forge
    # the verdict is printed before os._exit, which skips the WARM line: check it first
    forge = forge.replace("os._exit(1)", SAY_WARM.strip() + "\nos._exit(1)")
    result = await run_warm(warm, env.request(forge))
    assert result.status is ExecStatus.PROGRAM_ERROR, result
    assert result.exit_code == 1
    assert started_warm(result), result.stdout.text()
    assert result.stdout.text().splitlines()[-2] == "ATTEMPTS=x"
    after = await run_warm(warm, env.request("import os\nprint('ran', os.listdir('.'))" + SAY_WARM))
    assert after.status is ExecStatus.OK, after
    assert after.stdout.text().splitlines() == ["ran ['main.py']", "WARM=True"]


LEAVE = prog("""
    import json, os, subprocess, sys
    os.environ["LEFT_ENV"] = "1"
    os.putenv("LEFT_PUTENV", "1")
    open("left_cwd", "w").write("x")
    open("/tmp/left_tmp", "w").write("x")
    open("/dev/shm/left_shm", "w").write("x")
    json.LEFT = "memory"  # a global left in a (preloaded) module
    sys.modules["left_module"] = type(sys)("left_module")
    import csv, decimal  # modules imported by this run
    builtins = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
    builtins["LEFT_BUILTIN"] = 1
    sys.path.append("/tmp/left_path")
    LEFT_BUFFER = bytearray(b"LEFTMEM" * 1000)
    subprocess.Popen(["sleep", "300"], start_new_session=True)
    print("left")
""")

LOOK = (
    prog("""
    import json, os, sys
    builtins = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
    others = [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())]
    cmdlines = [open(f"/proc/{p}/cmdline", "rb").read() for p in others]
    seen = {
        "env": [k for k in os.environ if k.startswith("LEFT")],
        "files": [p for p in ("left_cwd", "/tmp/left_tmp", "/dev/shm/left_shm") if os.path.exists(p)],
        "cwd": sorted(os.listdir(".")),
        "memory": hasattr(json, "LEFT") or "LEFT_BUILTIN" in builtins or "LEFT_BUFFER" in globals(),
        "modules": [m for m in ("left_module", "decimal") if m in sys.modules],
        "path": "/tmp/left_path" in sys.path,
        "processes": [c for c in cmdlines if b"sleep" in c],
    }
    print(seen)
""")
    + SAY_WARM
)


async def test_nothing_of_one_warm_run_reaches_the_next(env: Env) -> None:
    """Environment, files (cwd, /tmp, /dev/shm), modules, module globals and builtins, sys.path
    and background processes of one run are gone in the next run of the same shape, which
    starts warm (with ``json`` preloaded in the waiting interpreter, the shared-module case)."""
    if env.backend != "local":
        pytest.skip("sandboxes are started ahead by the local backend only")
    env.require("bwrap", "cgroups")
    sandbox = env.sandbox(prewarm=2, preload=["json"])
    try:
        first = await run_warm(sandbox, env.request(LEAVE + SAY_WARM))
        second = await run_warm(sandbox, env.request(LOOK))
    finally:
        await sandbox.close()
    assert first.status is ExecStatus.OK and started_warm(first), first
    assert second.status is ExecStatus.OK, second
    assert started_warm(second), second.stdout.text()
    seen = second.stdout.text().splitlines()[0]
    assert seen == str(
        {
            "env": [],
            "files": [],
            "cwd": ["main.py"],
            "memory": False,
            "modules": [],
            "path": False,
            "processes": [],
        }
    ), seen
    assert "LEFTMEM" not in second.stdout.text()
    assert os.environ.get("LEFT_ENV") is None
