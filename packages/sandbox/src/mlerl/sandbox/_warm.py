"""The local backend's warm path: starting sandboxes ahead of their programs, running a program in
one, and discarding those not used (what a warm sandbox is, and the pool: ``_prewarm.py``).

The backend sees five calls (:class:`WarmPath`): ``take`` a warm work dir for a request (its
``main.py`` written) or None, ``holds`` a work dir, ``execute`` the program waiting in it,
``started`` (a program of that shape started: start one for the next run), ``close``. The warm
path needs four things of the backend to make a sandbox exactly as a cold run would
(:class:`Starter`): a fresh work dir, the run's cgroups, the staged inputs, and the spawned
chain of processes waiting for "go".

Guarantees: a warm sandbox is made with the same work dir, cgroups, mounts and environment as a
cold run of that request; it serves one program; a sandbox that did not say "started" is
never kept, one that did not say "running" after "go" is a set-up failure (retried by the
runner), and one discarded is killed through its cgroup, with its cgroups and work dir removed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
from pathlib import Path
from typing import Protocol

from mlerl.sandbox import _cgroup
from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._prewarm import Warm, WarmPool, shape_of
from mlerl.sandbox._proc import (
    CgroupRemovals,
    Process,
    kill,
    read_when_ready,
    reaped,
    said,
    signal_run,
    supervise,
)
from mlerl.sandbox._runner import Outcome, started
from mlerl.sandbox._types import ExecutionRequest, Limits
from mlerl.sandbox._workdir import WorkDir

log = logging.getLogger("mlerl.sandbox")

_START_TIMEOUT_S = 60.0


class Starter(Protocol):
    """What the warm path needs of the local backend (:class:`~._local.LocalSandbox`)."""

    removals: CgroupRemovals

    def fresh_workdir(self, request: ExecutionRequest) -> WorkDir: ...

    def run_cgroup(self, lim: Limits) -> _cgroup.RunCgroup | None:
        """The run's cgroups (None where cgroups are not used); OSError if they cannot be made."""
        ...

    async def stage(self, request: ExecutionRequest) -> str | None: ...

    async def spawn(
        self,
        request: ExecutionRequest,
        wd: WorkDir,
        cg: _cgroup.RunCgroup | None,
        input_host: str | None,
        status_w: int,
        go_r: int | None = None,
    ) -> Process: ...


class WarmPath:
    """Sandboxes started ahead, at most ``capacity`` waiting per shape (0: none)."""

    def __init__(self, capacity: int, backend: Starter) -> None:
        self.pool = WarmPool(capacity, self._discard)
        self._backend = backend
        self._claimed: dict[Path, Warm] = {}  # work dir -> the warm sandbox it belongs to

    def take(self, request: ExecutionRequest) -> WorkDir | None:
        """A warm sandbox's work dir for ``request`` with its program written in, or None."""
        warm = self.pool.take(shape_of(request))
        if warm is None:
            return None
        try:
            (warm.wd.path / "main.py").write_text(request.program)
        except BaseException:
            self.pool.discard_later(warm)
            raise
        self._claimed[warm.wd.path] = warm
        return warm.wd

    def holds(self, wd: WorkDir) -> bool:
        """Whether ``wd`` came from :meth:`take` (its program waits in a warm sandbox)."""
        return wd.path in self._claimed

    def started(self, request: ExecutionRequest) -> None:
        """A program of ``request``'s shape started: start a sandbox for the next one."""
        shape = shape_of(request)
        if self.pool.wants(shape):
            self.pool.refill(shape, lambda: self._spawn(request))

    async def execute(self, request: ExecutionRequest, wd: WorkDir, sink: OutputSink) -> Outcome:
        """Run the program waiting in ``wd`` (from :meth:`take`); its cgroups are removed after."""
        warm = self._claimed.pop(wd.path)
        try:
            return await self._go(request, warm, sink)
        finally:
            if warm.cg is not None:
                await self._backend.removals.remove(warm.cg)

    async def close(self) -> None:
        """Wait for the sandboxes being started, then discard every waiting one."""
        await self.pool.close()

    async def _go(self, request: ExecutionRequest, warm: Warm, sink: OutputSink) -> Outcome:
        out = started()
        try:
            os.write(warm.go_w, b"go\n")
        except OSError:  # it died while waiting: the run is retried on a fresh sandbox
            out.setup_failed = True
        finally:
            warm.close_go()
        self.started(request)
        assert request.limits is not None
        try:
            if not out.setup_failed:
                await supervise(warm.proc, sink, request.limits, out, warm.cg)
        finally:
            await kill(warm.proc, warm.cg)
            if warm.cg is not None:
                out.oom = warm.cg.oom_kills() > 0
            if not said(warm.status_r, b"running"):
                out.setup_failed = True  # it died waiting, before the program could start
            warm.close_status()
        return out

    async def _spawn(self, request: ExecutionRequest) -> Warm | None:
        """A sandbox for ``request``'s shape, started up to its "go", or None where that failed
        (the run that would have taken it starts its own, and reports why)."""
        backend = self._backend
        template = dataclasses.replace(request, program="")
        wd = await asyncio.to_thread(backend.fresh_workdir, template)
        cg: _cgroup.RunCgroup | None = None
        proc: Process | None = None
        status_r = go_w = -1
        try:
            assert request.limits is not None
            cg = backend.run_cgroup(request.limits)
            input_host = await backend.stage(request)
            status_r, status_w = os.pipe()
            go_r, go_w = os.pipe()
            os.set_blocking(status_r, False)
            try:
                proc = await backend.spawn(template, wd, cg, input_host, status_w, go_r)
            finally:
                os.close(status_w)
                os.close(go_r)
            async with asyncio.timeout(_START_TIMEOUT_S):
                word = await read_when_ready(status_r)
            if word != b"started":
                raise OSError("the sandbox did not start")
            warm = Warm(shape_of(request), proc, wd, cg, go_w, status_r, asyncio.get_running_loop())
            go_w = status_r = -1
            return warm
        except BaseException as exc:
            if go_w >= 0:
                os.close(go_w)
            if proc is not None:
                await kill(proc, cg)
                await reaped(proc)
            if cg is not None:
                await backend.removals.remove(cg)
            await asyncio.to_thread(wd.remove)
            if not isinstance(exc, (OSError, TimeoutError)):
                raise
            log.debug("could not start a sandbox ahead: %s", exc)
            return None
        finally:
            if status_r >= 0:
                os.close(status_r)

    async def _discard(self, warm: Warm) -> None:
        """Kill an unused warm sandbox and remove its cgroups and work dir."""
        warm.close_go()  # its shell reads end-of-file and exits without running anything
        warm.close_status()
        try:
            if warm.loop is asyncio.get_running_loop():
                await kill(warm.proc, warm.cg)
                await reaped(warm.proc)
            else:  # made on an event loop that is gone: signal it directly
                signal_run(warm.proc, warm.cg, signal.SIGKILL)
        finally:
            if warm.cg is not None:
                await self._backend.removals.remove(warm.cg)
            await asyncio.to_thread(warm.wd.remove)
