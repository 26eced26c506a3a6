"""Rows 15-17: an executor SIGKILLed mid-run, the reaper, and engine failures."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mlerl.protocol import ExecStatus
from mlerl.sandbox import ExecutionRequest, Limits, SandboxConfig, make_sandbox, reap
from mlerl.sandbox import _cgroup

Env = Any  # the conftest fixture type (test modules cannot import conftest)

EXECUTOR = textwrap.dedent("""
    import asyncio, json, sys
    from mlerl.sandbox import ExecutionRequest, Limits, SandboxConfig, make_sandbox
    from mlerl.sandbox._workdir import owner_tag

    async def main():
        cfg = SandboxConfig(backend=sys.argv[1], work_root=sys.argv[2])
        req = ExecutionRequest(
            program="print('ready', flush=True)\\nimport time\\ntime.sleep(1000)\\n",
            limits=Limits(wall_time_s=300), env={"MLERL_TEST_TOKEN": sys.argv[3]})
        def seen(name, chunk):
            if b"ready" in chunk:
                print(json.dumps({"owner": owner_tag()}), flush=True)
        await make_sandbox(cfg).run(req, on_output=seen)
    asyncio.run(main())
""")


async def test_row16_executor_killed_then_reaper_cleans_up(env: Env) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        EXECUTOR,
        env.backend,
        env.config.work_root,
        env.token,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(60):
            assert proc.stdout is not None
            owner = json.loads(await proc.stdout.readline())["owner"]
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # no finally of the executor runs
        await proc.wait()
    work_root = Path(env.config.work_root)
    left = list((work_root / owner).iterdir())
    assert left, "the crashed executor left its run dir"
    counts = await reap(env.config)
    # the run's dir, and (local) the one of a sandbox started ahead if it was ready in time
    assert counts["workdirs"] == len(left) and len(left) <= 1 + (env.backend == "local")
    if env.backend == "docker":
        assert counts["containers"] == 1
    assert not (work_root / owner).exists()
    assert all(not (base / owner).exists() for base in _cgroup.base_dirs().values())
    # the fixture then asserts that no process (or container) of the run is alive


@pytest.mark.docker
@pytest.mark.parametrize(
    "overrides",
    [{"image": "mlerl-no-such-image:0"}, {"docker_host": "unix:///nonexistent/docker.sock"}],
)
async def test_row17_engine_failure_is_infra_error(
    tmp_path: Path, overrides: dict[str, str]
) -> None:
    config = SandboxConfig(backend="docker", work_root=str(tmp_path), **overrides)
    sandbox = make_sandbox(config)
    try:
        result = await sandbox.run(
            ExecutionRequest(program="print(1)\n", limits=Limits(wall_time_s=5))
        )
    finally:
        await sandbox.close()
    assert result.status is ExecStatus.INFRA_ERROR
    assert result.error.startswith("docker engine:")
    assert not any(p.is_dir() for p in tmp_path.glob("*/*"))  # the run dir was removed


async def test_plain_local_fallback_still_limits_time_and_group(
    tmp_path: Path, find_processes: Any
) -> None:
    # No bubblewrap, no cgroups: the lesser isolation of hosts without them.
    config = SandboxConfig(
        work_root=str(tmp_path), use_bwrap=False, use_cgroups=False, allow_unisolated=True
    )
    sandbox = make_sandbox(config)
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("A")
    program = textwrap.dedent("""
        import subprocess, time
        print(open("input/a.txt").read(), flush=True)
        subprocess.Popen(["sleep", "1000"])   # same process group: killed with it
        time.sleep(1000)
    """)
    token = os.urandom(8).hex()
    result = await sandbox.run(
        ExecutionRequest(
            program=program,
            data_dir=data,
            env={"MLERL_TEST_TOKEN": token},
            limits=Limits(wall_time_s=1.5, kill_grace_s=0.5),
        )
    )
    assert result.status is ExecStatus.TIMEOUT and result.stdout.text() == "A\n"
    await asyncio.sleep(0.2)
    assert find_processes(token) == []


SLOW_BWRAP = """#!/bin/sh
# bubblewrap, two seconds late: the window between the chain's fork and bwrap's own prctl
if [ -n "$MLERL_TEST_TOKEN" ]; then echo $$ >> {log}; sleep 2; fi
exec {bwrap} "$@"
"""


async def test_executor_killed_while_its_sandbox_starts_takes_the_sandbox_down(
    tmp_path: Path, find_processes: Any
) -> None:
    """SIGKILL of the executor between the fork of a sandbox's chain and bubblewrap's own
    ``--die-with-parent`` (armed too late to see the executor die): the orphaned chain must
    still end, not run the program; it does because its "started" word finds the executor's
    end of the status pipe closed."""
    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("no bubblewrap on this host")
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "slow.log"
    (fake / "bwrap").write_text(SLOW_BWRAP.format(bwrap=real, log=log))
    (fake / "bwrap").chmod(0o755)
    token = os.urandom(8).hex()
    executor = EXECUTOR.replace("work_root=sys.argv[2]", "work_root=sys.argv[2], prewarm=0")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        executor,
        "local",
        str(tmp_path / "sandbox"),
        token,
        env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"},
    )
    try:
        try:
            async with asyncio.timeout(60):
                while not log.is_file() or not log.read_text().strip():
                    await asyncio.sleep(0.05)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
        chain = int(log.read_text().split()[0])
        await asyncio.sleep(4)  # past the fake's two seconds and bubblewrap's start
        alive = find_processes(token) + ([chain] if os.path.exists(f"/proc/{chain}") else [])
    finally:
        await reap(SandboxConfig(work_root=str(tmp_path / "sandbox")))  # work dirs and mounts
    assert alive == [], "the sandbox outlived its executor"
