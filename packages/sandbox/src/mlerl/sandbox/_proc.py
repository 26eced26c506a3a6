"""The host processes of one local run: supervising, signalling and killing them, and removing
their cgroups. Shared by the cold path (``_local.py``) and the warm path (``_warm.py``).

Guarantees:
- :func:`supervise` drains stdout and stderr into the sink while the program runs, stops it at
  the wall-clock limit (TERM, ``kill_grace_s``, KILL: ``timed_out``) or at once when the output
  cap is passed, and always kills what is left of the run before it returns. After the exit it
  reads the pipes to their end: where the run's cgroup is empty no writer is left and it waits
  (``DRAIN_BOUND_S`` at most, however busy the event loop is); without that proof it gives a
  process that escaped the kill ``DRAIN_UNPROVEN_S`` and, if its output was cut, says so in
  the outcome's note.
- Every kill goes through the run's cgroup where there is one (every descendant, never a pid
  read from outside it), and the process group of the still-unreaped leader.
- :class:`CgroupRemovals` removes a run's cgroups now or keeps retrying in the background for
  ``REMOVE_PATIENCE_S``; ``close`` waits for those retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time

from mlerl.sandbox import _cgroup
from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._runner import Outcome, exit_or_limit
from mlerl.sandbox._types import Limits

log = logging.getLogger("mlerl.sandbox")

REMOVE_PATIENCE_S = 60.0
"""How long a run cgroup the kernel keeps busy after its run is retried in the background."""
DRAIN_BOUND_S = 60.0
"""Most seconds spent reading a run's output after its exit when its cgroup is empty (every
writer gone: the end of the pipes is certain, only a stalled event loop delays reading it)."""
DRAIN_UNPROVEN_S = 2.0
"""The same where no cgroup proves every writer gone (a process that escaped the kill may
hold the pipes open forever)."""

Process = asyncio.subprocess.Process


async def supervise(
    proc: Process, sink: OutputSink, lim: Limits, out: Outcome, cg: _cgroup.RunCgroup | None
) -> None:
    """Run ``proc`` to its end or its limit; fill ``out``'s exit code, timeout and finish time."""
    limit_hit = asyncio.Event()

    async def pump(reader: asyncio.StreamReader | None, name: str) -> None:
        assert reader is not None
        while chunk := await reader.read(1 << 16):
            sink.feed(name, chunk)
            if sink.over_limit:
                limit_hit.set()

    async with asyncio.TaskGroup() as tg:
        pumps = {
            tg.create_task(pump(proc.stdout, "stdout")),
            tg.create_task(pump(proc.stderr, "stderr")),
        }
        exited = tg.create_task(proc.wait())
        await exit_or_limit(
            tg, exited, limit_hit, lim, out, lambda grace: terminate(proc, cg, grace)
        )
        out.finish()
        emptied = await kill(proc, cg)  # descendants still holding the pipes
        bound = DRAIN_BOUND_S if emptied else DRAIN_UNPROVEN_S
        _, pending = await asyncio.wait(pumps | {exited}, timeout=bound)
        for task in pending:
            task.cancel()
        if pending & pumps:
            out.note = (
                f"output not read to its end: the pipes were still open {bound:g} s after exit"
            )
            log.warning("%s", out.note)
    out.exit_code = proc.returncode


def signal_run(proc: Process, cg: _cgroup.RunCgroup | None, sig: int) -> None:
    """Send ``sig`` to every member of the run's cgroup and to the leader's process group."""
    if cg is not None:
        cg.signal_all(sig)
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def terminate(proc: Process, cg: _cgroup.RunCgroup | None, grace: float) -> None:
    """TERM the group, wait ``grace``, then KILL it."""
    if grace > 0:
        signal_run(proc, cg, signal.SIGTERM)
        try:
            async with asyncio.timeout(grace):
                await proc.wait()
        except TimeoutError:
            pass
    await kill(proc, cg)


async def kill(proc: Process, cg: _cgroup.RunCgroup | None) -> bool:
    """KILL the run; True when its cgroup is empty afterwards (no process of it is left)."""
    emptied = await cg.kill_all() if cg is not None else False
    signal_run(proc, None, signal.SIGKILL)
    return emptied


def said(status_r: int, word: bytes) -> bool:
    """Whether the sandbox said ``word`` on its status pipe (the program never holds it)."""
    try:
        return os.read(status_r, 64) == word
    except BlockingIOError:
        return False


async def read_when_ready(fd: int) -> bytes:
    """Read a non-blocking descriptor once it has data or end-of-file."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    try:
        return os.read(fd, 64)
    except BlockingIOError:
        return b""


async def reaped(proc: Process, patience_s: float = 5.0) -> None:
    """Wait until a killed process has exited and its pipes are closed, so that its transport
    is finished on this event loop (not left to the garbage collector after the loop ends)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(patience_s):
            await asyncio.gather(
                proc.wait(), *(s.read() for s in (proc.stdout, proc.stderr) if s is not None)
            )


class CgroupRemovals:
    """Removes run cgroups, now or (kept busy by the kernel) in the background."""

    def __init__(self) -> None:
        self._pending: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._pending)

    async def remove(self, cg: _cgroup.RunCgroup) -> None:
        """Remove the run's cgroups now, or keep trying in the background.

        A killed process that is still exiting (freeing a large heap, say) keeps its cgroup
        busy past ``RunCgroup.remove``'s own retries (a few seconds); the run's result does not
        wait for that, and :meth:`close` waits for the retries."""
        if await cg.remove():
            return
        task = asyncio.create_task(self.remove_later(cg))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def remove_later(
        self, cg: _cgroup.RunCgroup, patience_s: float = REMOVE_PATIENCE_S
    ) -> None:
        deadline = time.monotonic() + patience_s
        while time.monotonic() < deadline:
            await asyncio.sleep(1.0)
            if await cg.remove():
                return
        log.warning(
            "could not remove the run cgroups %s in %.0f s (the reaper removes them "
            "once this process exits)",
            cg.procs_files,
            patience_s,
        )

    async def close(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
