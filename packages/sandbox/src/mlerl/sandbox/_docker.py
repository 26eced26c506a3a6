"""The Docker backend (aiodocker; Podman's Docker-compatible API works too).

What each container gets: no network (``NetworkMode=none``), a read-only root filesystem, a
tmpfs ``/tmp``, the work dir as the only writable bind (a ``disk_mb`` tmpfs on the host when
the executor is root), ``./input`` bound read-only, uid 65534, every capability dropped,
``no-new-privileges``, Docker's init as pid 1 (reaps zombies, forwards signals), memory equal
to memory + swap (OOM -> ``State.OOMKilled``), a pids limit, a CPU quota, RLIMIT_CORE=0 and
RLIMIT_FSIZE, no log driver (output is streamed through attach, never stored by the engine),
and labels (``mlerl.sandbox``, owner process, host, deadline). With ``site_packages`` set, the
host venv's site-packages is bound read-only at /opt/mlerl-site and put on PYTHONPATH.
What it does not isolate: the kernel is shared (no gVisor/VM); the image's files are readable;
disk I/O bandwidth is not limited.

Engine calls have per-call timeouts (create/start ``engine_timeout_s``, kill 10 s, stop 30 s,
remove 10 s); an engine error or timeout makes the run ``INFRA_ERROR`` (the caller retries; it
is never scored). The container is removed (``force``, volumes too) in ``finally``; what a
crashed executor leaves behind is removed by :func:`reap_containers`, called once when a
sandbox first connects and by ``mlerl-sandbox reap``.
"""

from __future__ import annotations

import asyncio
import socket
import sysconfig
import time
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp

from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._runner import Admission, Outcome, admitted, exit_or_limit, started
from mlerl.sandbox._types import (
    ExecutionRequest,
    ExecutionResult,
    OutputCallback,
    SandboxConfig,
    thread_env,
)
from mlerl.sandbox._workdir import WorkDir, create_workdir, owner_alive, owner_tag, stage_inputs

LABEL = "mlerl.sandbox"
KILL_TIMEOUT_S, STOP_TIMEOUT_S, REMOVE_TIMEOUT_S = 10.0, 30.0, 10.0
STALE_AFTER_DEADLINE_S = 300.0
SITE_MOUNT = "/opt/mlerl-site"
EngineErrors = (aiodocker.DockerError, aiohttp.ClientError, OSError, TimeoutError)


def site_packages(config: SandboxConfig) -> str:
    if config.site_packages == "auto":
        return sysconfig.get_paths()["purelib"]
    return config.site_packages


def container_config(
    config: SandboxConfig,
    request: ExecutionRequest,
    wd: WorkDir,
    owner: str,
    input_host: str | None = None,
) -> dict[str, Any]:
    """The engine's create body: the defaults of the module docstring. ``input_host``: the
    staged copy of ``request.data_dir`` bound at ``/work/input`` (its path names no task)."""
    lim = request.limits
    assert lim is not None, "limits are resolved before a container is made"
    mem = lim.memory_mb * 1024 * 1024
    binds = [f"{wd.path}:/work:rw"]
    if request.data_dir is not None:
        binds.append(f"{input_host or request.data_dir.resolve()}:/work/input:ro")
    env = {
        "HOME": "/tmp",
        "MPLCONFIGDIR": "/tmp",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
    }
    site = site_packages(config)
    if site:
        binds.append(f"{site}:{SITE_MOUNT}:ro")
        env["PYTHONPATH"] = SITE_MOUNT
    env |= thread_env(lim)
    env |= request.env
    deadline = time.time() + lim.wall_time_s + lim.kill_grace_s
    uid = config.sandbox_uid
    return {
        "Image": config.image,
        "Cmd": list(request.entry),
        "WorkingDir": "/work",
        "User": f"{uid}:{uid}",
        "Env": [f"{k}={v}" for k, v in env.items()],
        "AttachStdout": True,
        "AttachStderr": True,
        "AttachStdin": False,
        "Tty": False,
        "OpenStdin": False,
        "NetworkDisabled": True,
        "Labels": {
            LABEL: "1",
            "mlerl.owner": owner,
            "mlerl.host": socket.gethostname(),
            "mlerl.deadline": f"{deadline:.0f}",
        },
        "HostConfig": {
            "NetworkMode": "none",
            "ReadonlyRootfs": True,
            "Binds": binds,
            "Tmpfs": {"/tmp": f"rw,nosuid,nodev,size={lim.disk_mb}m"},
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "Init": True,
            "Memory": mem,
            "MemorySwap": mem,
            "PidsLimit": lim.pids,
            "NanoCpus": int(lim.cpus * 1e9),
            "LogConfig": {"Type": "none", "Config": {}},
            "Ulimits": [
                {"Name": "core", "Soft": 0, "Hard": 0},
                {"Name": "fsize", "Soft": lim.disk_mb << 20, "Hard": lim.disk_mb << 20},
            ],
            "AutoRemove": False,
        },
    }


def _client(config: SandboxConfig) -> aiodocker.Docker:
    return aiodocker.Docker(url=config.docker_host or None)


async def reap_containers(
    config: SandboxConfig, everything: bool = False, docker: aiodocker.Docker | None = None
) -> int:
    """Remove labelled containers whose executor died or whose deadline is long past."""
    own = docker is None
    docker = docker or _client(config)
    removed = 0
    try:
        async with asyncio.timeout(config.engine_timeout_s):
            found = await docker.containers.list(all=True, filters={"label": [f"{LABEL}=1"]})
        host = socket.gethostname()
        for c in found:
            labels = c._container.get("Labels") or {}
            deadline = float(labels.get("mlerl.deadline", "0") or 0)
            dead = (
                labels.get("mlerl.host") == host and not owner_alive(labels.get("mlerl.owner", ""))
            ) or time.time() > deadline + STALE_AFTER_DEADLINE_S
            if everything or dead:
                async with asyncio.timeout(REMOVE_TIMEOUT_S + KILL_TIMEOUT_S):
                    await c.delete(force=True, v=True)
                removed += 1
    finally:
        if own:
            await docker.close()
    return removed


async def count_containers(config: SandboxConfig, owner: str) -> int:
    """Containers (running or not) labelled with executor ``owner``."""
    docker = _client(config)
    try:
        async with asyncio.timeout(config.engine_timeout_s):
            return len(
                await docker.containers.list(all=True, filters={"label": [f"mlerl.owner={owner}"]})
            )
    finally:
        await docker.close()


class DockerSandbox:
    """See the module docstring for exactly what is isolated."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.admission = Admission(config.max_concurrency, config.queue_size)
        self.owner = owner_tag()
        self._docker: aiodocker.Docker | None = None
        self._lock = asyncio.Lock()

    async def _engine(self) -> aiodocker.Docker:
        async with self._lock:
            if self._docker is None:
                docker = _client(self.config)
                try:
                    await reap_containers(self.config, docker=docker)
                except BaseException:
                    await docker.close()
                    raise
                self._docker = docker
            return self._docker

    async def run(
        self, request: ExecutionRequest, on_output: OutputCallback | None = None
    ) -> ExecutionResult:
        async with admitted(self.config, self.admission, request, on_output) as run:
            while run.another_attempt():
                async with run.attempt() as attempt:
                    attempt.workdir = self._workdir(run.request)
                    run.outcome = await self._execute(run.request, attempt.workdir, run.sink)
        return run.result()

    async def close(self) -> None:
        if self._docker is not None:
            await self._docker.close()
            self._docker = None

    def _workdir(self, request: ExecutionRequest) -> WorkDir:
        assert request.limits is not None
        return create_workdir(
            self.config.work_root,
            request.program,
            request.limits.disk_mb,
            self.config.tmpfs_workdir,
            owner_uid=self.config.sandbox_uid,
            input_mountpoint=request.data_dir is not None,
        )

    async def _execute(self, request: ExecutionRequest, wd: WorkDir, sink: OutputSink) -> Outcome:
        out = started()
        container = None
        try:
            docker = await self._engine()
            input_host = None
            if request.data_dir is not None:
                input_host = str(
                    await asyncio.to_thread(
                        stage_inputs, request.data_dir, Path(self.config.work_root) / "inputs"
                    )
                )
            body = container_config(self.config, request, wd, self.owner, input_host)
            async with asyncio.timeout(self.config.engine_timeout_s):
                container = await docker.containers.create(body)
            await self._attach_and_run(container, request, sink, out)
        except EngineErrors as exc:
            out.infra_error = f"docker engine: {type(exc).__name__}: {exc}"[:2000]
        finally:
            if not out.finished_at:
                out.finish()
            if container is not None:
                await self._remove(container, out)
        return out

    async def _attach_and_run(
        self, container: Any, request: ExecutionRequest, sink: OutputSink, out: Outcome
    ) -> None:
        lim = request.limits
        assert lim is not None
        limit_hit = asyncio.Event()
        names = {1: "stdout", 2: "stderr"}
        stream = container.attach(stdout=True, stderr=True, logs=False)
        async with asyncio.timeout(self.config.engine_timeout_s):
            await stream._init()  # attach before start: no output is missed

        async def pump() -> None:
            while (msg := await stream.read_out()) is not None:
                sink.feed(names.get(msg.stream, "stderr"), msg.data)
                if sink.over_limit:
                    limit_hit.set()

        try:
            async with asyncio.TaskGroup() as tg:
                async with asyncio.timeout(self.config.engine_timeout_s):
                    await container.start()
                out.start()
                pumping = tg.create_task(pump())
                exited = tg.create_task(container.wait())
                if await exit_or_limit(
                    tg, exited, limit_hit, lim, out, lambda grace: self._stop(container, grace)
                ):
                    exited.cancel()
                out.finish()
                # the container has ended (every writer gone): read its stream to the end
                bound = self.config.engine_timeout_s
                _, pending = await asyncio.wait({pumping}, timeout=bound)
                for task in pending:
                    task.cancel()
                    out.note = f"output not read to its end {bound:g} s after exit"
        finally:
            await stream.close()
        async with asyncio.timeout(self.config.engine_timeout_s):
            state = (await container.show())["State"]
        out.exit_code = state.get("ExitCode")
        out.oom = bool(state.get("OOMKilled"))

    async def _stop(self, container: Any, grace: float) -> None:
        """TERM (through init, to the whole container), wait ``grace``, KILL."""
        if grace > 0:
            async with asyncio.timeout(KILL_TIMEOUT_S):
                await container.kill(signal="SIGTERM")
            try:
                async with asyncio.timeout(grace):
                    await container.wait()
            except TimeoutError:
                pass
        try:
            async with asyncio.timeout(KILL_TIMEOUT_S):
                await container.kill(signal="SIGKILL")
        except aiodocker.DockerError as exc:
            if exc.status != 409:  # 409: already stopped
                raise
        async with asyncio.timeout(STOP_TIMEOUT_S):
            await container.wait()

    async def _remove(self, container: Any, out: Outcome) -> None:
        try:
            async with asyncio.timeout(REMOVE_TIMEOUT_S + KILL_TIMEOUT_S):
                await container.delete(force=True, v=True)
        except EngineErrors as exc:  # labelled: the reaper removes it later
            left = f"container {container.id[:12]} not removed ({type(exc).__name__})"
            out.note = f"{out.note}; {left}" if out.note else left
